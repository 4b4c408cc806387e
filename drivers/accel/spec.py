"""The simulated NPU's specification: what the chip can do, read from a TOML file.

`nnrt-driver accel --spec SPEC.toml` reads one; without `--spec` the documented default
(`DEFAULT_SPEC_TEXT`, shipped as deploy/npu-sim.toml — the same text, a test checks it) is
used. The numbers are a simulated chip's, not a real one's; the cost model (cost.py) turns
them into each node's simulated duration.

Decisions:

* The file is flat TOML with the field names of `AccelSpec`; the two per-mode tables are
  `[clock_mhz]` and `[power_watts]`, each with exactly the keys `low`, `medium`, `high` and
  `extreme` (the HDI PerformanceModes PERFORMANCE_LOW..EXTREME). Every key is required and
  no other key is allowed: a misspelt key must not silently fall back to a default.
* Types: `name` a non-empty string; the byte sizes and `busy_queue_depth` TOML integers;
  every rate, time, clock and power a TOML integer or float (stored as float). Booleans are
  neither. Every number must be finite and > 0 (a zero rate would make time infinite).
  The clocks must not decrease from LOW to EXTREME; `onchip_memory_bytes` may not exceed
  `device_memory_bytes`.
* Rates are given at the nominal clock (`nominal_clock_mhz`); a performance mode scales the
  whole chip by clock(mode) / nominal (see `clock_scale`). PERFORMANCE_NONE (the client
  did not choose) runs as MEDIUM, for the clock and the power alike.
* Every error is a `SpecError` whose message names the file, the key and why.
* `identity` is the name plus a short SHA-256 of the canonical parsed contents (not of the
  text): comments and formatting do not change it, any value does. Offline models and
  model caches record it and are refused by a device with another spec.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from nnrt.protos import hdi_types_pb2 as ht

__all__ = ["DEFAULT_SPEC_TEXT", "MODE_KEYS", "AccelSpec", "SpecError", "load_spec",
           "parse_spec"]


class SpecError(ValueError):
    """A specification that cannot be used; the message says file, key and why."""


# The TOML keys of the per-mode tables, in order, and the HDI PerformanceMode of each.
MODE_KEYS: dict[str, int] = {
    "low": ht.PERFORMANCE_LOW,
    "medium": ht.PERFORMANCE_MEDIUM,
    "high": ht.PERFORMANCE_HIGH,
    "extreme": ht.PERFORMANCE_EXTREME,
}
_MODE_NAMES = {code: key.upper() for key, code in MODE_KEYS.items()}


def _effective_mode(mode: int) -> int:
    """PERFORMANCE_NONE runs as MEDIUM; an unknown code is a ValueError."""
    if mode == ht.PERFORMANCE_NONE:
        return ht.PERFORMANCE_MEDIUM
    if mode not in _MODE_NAMES:
        raise ValueError(f"unknown performance mode {mode}")
    return mode


@dataclass(frozen=True)
class AccelSpec:
    """One simulated NPU. Rates are at the nominal clock."""

    name: str  # spec name, e.g. "npu-sim-default"
    int8_macs_per_second: float  # int8 multiply-accumulates per second (MAC array)
    fp16_macs_per_second: float  # float16 multiply-accumulates per second (MAC array)
    vector_ops_per_second: float  # element operations per second (vector unit)
    onchip_memory_bytes: int  # on-chip SRAM (weights resident when they all fit)
    dma_bytes_per_second: float  # device memory <-> on-chip
    launch_seconds: float  # fixed cost of launching one node
    device_memory_bytes: int  # the hard limit: buffers + prepared weights
    nominal_clock_mhz: float  # the clock the rates above are given at
    clock_mhz: Mapping[int, float]  # HDI PerformanceMode -> clock, LOW..EXTREME
    power_watts: Mapping[int, float]  # HDI PerformanceMode -> power while busy
    idle_power_watts: float  # power while idle
    busy_queue_depth: int  # runs admitted beyond which GetDeviceStatus says BUSY

    def __post_init__(self) -> None:
        # Read-only copies: a frozen spec must not change under whoever holds it.
        object.__setattr__(self, "clock_mhz", MappingProxyType(dict(self.clock_mhz)))
        object.__setattr__(self, "power_watts", MappingProxyType(dict(self.power_watts)))

    def __hash__(self) -> int:
        return hash(self.identity)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Picklable (a read-only mapping is not): the per-mode tables travel as dicts.
        return (type(self), tuple(dict(v) if isinstance(v, Mapping) else v
                                  for v in (getattr(self, f.name) for f in fields(self))))

    def clock(self, mode: int) -> float:
        """The clock in MHz of a performance mode (PERFORMANCE_NONE = MEDIUM)."""
        return self.clock_mhz[_effective_mode(mode)]

    def clock_scale(self, mode: int) -> float:
        """clock(mode) / nominal clock: how much faster than the nominal rates the chip runs."""
        return self.clock(mode) / self.nominal_clock_mhz

    def power(self, mode: int) -> float:
        """Watts drawn while busy in `mode` (PERFORMANCE_NONE = MEDIUM)."""
        return self.power_watts[_effective_mode(mode)]

    def canonical(self) -> dict[str, Any]:
        """The parsed contents as plain JSON-able values (modes by their TOML key)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Mapping):
                value = {key: float(value[code]) for key, code in MODE_KEYS.items()}
            out[f.name] = value
        return out

    @property
    def identity(self) -> str:
        """`name@` + the first 16 hex digits of the SHA-256 of the canonical contents."""
        text = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return f"{self.name}@{hashlib.sha256(text.encode()).hexdigest()[:16]}"

    def details(self) -> dict[str, str]:
        """Human-readable lines for `nnrt devices` and the admin status."""
        modes = ", ".join(f"{_MODE_NAMES[c]} {_num(self.clock_mhz[c])}" for c in MODE_KEYS.values())
        power = ", ".join(f"{_MODE_NAMES[c]} {_num(self.power_watts[c])}"
                          for c in MODE_KEYS.values())
        return {
            "spec": self.name,
            "spec_identity": self.identity,
            "int8_throughput": f"{_si(self.int8_macs_per_second)}MAC/s",
            "fp16_throughput": f"{_si(self.fp16_macs_per_second)}MAC/s",
            "vector_throughput": f"{_si(self.vector_ops_per_second)}op/s",
            "onchip_memory": _binary(self.onchip_memory_bytes),
            "dma_bandwidth": f"{_si(self.dma_bytes_per_second)}B/s",
            "launch_cost": f"{_num(self.launch_seconds * 1e6)} us",
            "device_memory": _binary(self.device_memory_bytes),
            "clock": f"nominal {_num(self.nominal_clock_mhz)} MHz; {modes} MHz",
            "power": f"idle {_num(self.idle_power_watts)} W; busy {power} W",
            "busy_queue_depth": str(self.busy_queue_depth),
        }


def _num(value: float) -> str:
    return f"{value:.4g}"


def _si(value: float) -> str:
    """2e11 -> '200 G'."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{_num(value / factor)} {prefix}"
    return f"{_num(value)} "


def _binary(size: int) -> str:
    """4194304 -> '4 MiB (4194304 bytes)'."""
    for factor, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if size >= factor:
            return f"{_num(size / factor)} {unit} ({size} bytes)"
    return f"{size} bytes"


DEFAULT_SPEC_TEXT = """\
# nnrt NPU simulator: the default device specification (deploy/npu-sim.toml).
#
# `nnrt-driver accel` uses it when no `--spec FILE` is given (the same text is built into
# nnrt.drivers.accel.spec as DEFAULT_SPEC_TEXT). Copy it and change the numbers to simulate
# another chip.
#
# These are a SIMULATED chip's numbers, not any real NPU's. The driver computes every node
# on the host (the CPU driver's reference kernels, in int8 / float16) while the simulated
# time passes, so run latency follows this file only while the host computes faster than
# the simulated chip. The default is therefore a deliberately slow, small NPU, so that a
# 2-core host running the Python reference keeps ahead of it: its MAC array and vector unit
# run at 1/250 of a phone-class NPU's (2 TMAC/s int8, 64 Gop/s vector: the same 32:1
# balance), its DMA at 1/32 of 16 GB/s, and a launch costs 5 times a phone NPU's 20 us.
# At these rates (HIGH mode) the example models of nnrt.client.zoo take 0.5 to 6 ms per
# run at batch 1, a one-node graph about one launch (0.1 ms), and a 1-GFLOP convolution
# (0.46 GMAC) about 60 ms in int8, 120 ms in float16. A spec with a real chip's rates is
# accepted too; latency then follows the host wherever the host is the slower of the two.
#
# Every key is required and no other key is accepted. Rates are at the nominal clock; a
# performance mode scales the whole chip (MAC array, vector unit, DMA engine, launches) by
# clock_mhz.<mode> / nominal_clock_mhz. PERFORMANCE_NONE runs as MEDIUM.
# Integers may be written with underscores (4_194_304).

# Name shown by `nnrt devices`; with a hash of all the values it identifies the spec an
# offline model (.npubin) or a model cache was built for.
name = "npu-sim-default"

# MAC array: multiply-accumulates per second at the nominal clock, for int8 (quantised
# models, int32 accumulation) and float16 (float32 models compiled with EnableFloat16).
# Convolutions, fully connected layers, matrix products and LSTM gates run here; bias,
# requantisation and fused activations are free in its output stage.
int8_macs_per_second = 8e9           # MAC/s (8 MAC per cycle at 1000 MHz)
fp16_macs_per_second = 4e9           # MAC/s (4 MAC per cycle at 1000 MHz)

# Vector unit: element operations per second: element-wise arithmetic and activations,
# (re)quantisation, pooling, reductions, normalisation, softmax, data movement (transpose,
# concat, slice, ...), and matrix products in a type the MAC array does not take.
vector_ops_per_second = 250e6        # op/s

# On-chip SRAM in bytes. When all the constants (weights) of a model fit, they stay resident
# from prepare on and runs do not fetch them again; otherwise every node fetches its
# weights by DMA each time it runs.
onchip_memory_bytes = 4_194_304      # bytes (4 MiB)

# DMA bandwidth between device memory and on-chip memory: every node reads its inputs and
# writes its outputs (and fetches its weights when they are not resident) at this rate.
dma_bytes_per_second = 500e6         # bytes/s (500 MB/s)

# Fixed cost of launching one node (command processing, setup, synchronisation), in
# seconds at the nominal clock: a node takes launch + max(MAC time, vector time, DMA time).
launch_seconds = 100e-6              # s (100 us)

# Device memory in bytes: the hard limit for the buffers allocated on the device plus the
# prepared models' weights. Beyond it AllocateBuffer and PrepareModel fail with
# NNRT_OUT_OF_MEMORY.
device_memory_bytes = 1_073_741_824  # bytes (1 GiB)

# The clock the rates above are given at, in MHz.
nominal_clock_mhz = 1000.0           # MHz

# Power drawn while idle, in watts (the admin status's energy figures).
idle_power_watts = 0.1               # W

# GetDeviceStatus says BUSY while more than this many runs are admitted (queued or running)
# across all clients.
busy_queue_depth = 8                 # runs

# Clock of each performance mode (HDI PerformanceMode LOW, MEDIUM, HIGH, EXTREME) in MHz;
# it must not decrease from low to extreme. The chip runs clock / nominal_clock_mhz as fast
# as the rates above say.
[clock_mhz]
low = 400.0                          # MHz: 0.4 x the nominal rates
medium = 800.0                       # MHz: 0.8 x (also PERFORMANCE_NONE)
high = 1000.0                        # MHz: 1.0 x
extreme = 1200.0                     # MHz: 1.2 x

# Power drawn while busy in each performance mode, in watts.
[power_watts]
low = 0.8                            # W
medium = 1.6                         # W
high = 2.2                           # W
extreme = 3.0                        # W
"""

# Every key of the file, in order, and its kind: "str", "int", "float" or "modes" (a table).
_KEYS: dict[str, str] = {
    "name": "str",
    "int8_macs_per_second": "float",
    "fp16_macs_per_second": "float",
    "vector_ops_per_second": "float",
    "onchip_memory_bytes": "int",
    "dma_bytes_per_second": "float",
    "launch_seconds": "float",
    "device_memory_bytes": "int",
    "nominal_clock_mhz": "float",
    "clock_mhz": "modes",
    "power_watts": "modes",
    "idle_power_watts": "float",
    "busy_queue_depth": "int",
}


def _error(where: str, key: str, why: str) -> SpecError:
    return SpecError(f"{where}: key {key!r}: {why}")


def _number(where: str, key: str, value: Any, kind: str) -> float | int:
    """A finite positive integer ("int") or number ("float") or SpecError."""
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise _error(where, key, f"must be an integer, not {type(value).__name__} "
                                     f"{value!r}")
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _error(where, key, f"must be a number, not {type(value).__name__} {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise _error(where, key, f"must be a finite number > 0, not {value!r}")
    return int(value) if kind == "int" else float(value)


def _modes(where: str, key: str, value: Any) -> dict[int, float]:
    if not isinstance(value, dict):
        raise _error(where, key, f"must be a table with keys {', '.join(MODE_KEYS)}, not "
                                 f"{type(value).__name__} {value!r}")
    for sub in value:
        if sub not in MODE_KEYS:
            raise _error(where, f"{key}.{sub}", f"unknown key (expected {', '.join(MODE_KEYS)})")
    out = {}
    for sub, code in MODE_KEYS.items():
        if sub not in value:
            raise _error(where, f"{key}.{sub}", "missing: every performance mode needs a value")
        out[code] = float(_number(where, f"{key}.{sub}", value[sub], "float"))
    return out


def parse_spec(text: str, where: str = "<spec>") -> AccelSpec:
    """The spec in TOML `text`; `where` (a file name) prefixes every SpecError message."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{where}: not valid TOML: {exc}") from None
    for key in data:
        if key not in _KEYS:
            raise _error(where, key, f"unknown key (expected {', '.join(_KEYS)})")
    values: dict[str, Any] = {}
    for key, kind in _KEYS.items():
        if key not in data:
            raise _error(where, key, "missing")
        value = data[key]
        if kind == "str":
            if not isinstance(value, str) or not value.strip():
                raise _error(where, key, f"must be a non-empty string, not {value!r}")
            values[key] = value
        elif kind == "modes":
            values[key] = _modes(where, key, value)
        else:
            values[key] = _number(where, key, value, kind)
    clocks = values["clock_mhz"]
    keys = list(MODE_KEYS)
    for lower, higher in itertools.pairwise(keys):
        if clocks[MODE_KEYS[higher]] < clocks[MODE_KEYS[lower]]:
            raise _error(where, f"clock_mhz.{higher}",
                         f"{clocks[MODE_KEYS[higher]]:g} MHz is below clock_mhz.{lower} "
                         f"({clocks[MODE_KEYS[lower]]:g} MHz): clocks must not decrease "
                         f"from low to extreme")
    if values["onchip_memory_bytes"] > values["device_memory_bytes"]:
        raise _error(where, "onchip_memory_bytes",
                     f"{values['onchip_memory_bytes']} exceeds device_memory_bytes "
                     f"({values['device_memory_bytes']})")
    return AccelSpec(**values)


def load_spec(path: str | Path | None) -> AccelSpec:
    """The spec in the TOML file at `path`; None: the default (DEFAULT_SPEC_TEXT)."""
    if path is None:
        return parse_spec(DEFAULT_SPEC_TEXT, "<default spec>")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path}: cannot read the spec: {exc}") from None
    return parse_spec(text, str(path))
