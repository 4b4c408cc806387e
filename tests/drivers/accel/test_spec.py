"""The NPU simulator's device specification (drivers/accel/spec.py): the documented default
(and its copy in deploy/), parsing and every refusal, identity, modes, details."""

from __future__ import annotations

import copy
import json
import math
import pickle
import re
from pathlib import Path
from typing import Any

import pytest

from nnrt.drivers.accel.spec import (
    DEFAULT_SPEC_TEXT,
    MODE_KEYS,
    AccelSpec,
    SpecError,
    load_spec,
    parse_spec,
)
from nnrt.protos import hdi_types_pb2 as ht

REPO = Path(__file__).resolve().parents[3]
DEPLOYED = REPO / "deploy" / "npu-sim.toml"

SCALAR_KEYS = ["name", "int8_macs_per_second", "fp16_macs_per_second",
               "vector_ops_per_second", "onchip_memory_bytes", "dma_bytes_per_second",
               "launch_seconds", "device_memory_bytes", "nominal_clock_mhz",
               "idle_power_watts", "busy_queue_depth"]
TABLE_KEYS = ["clock_mhz", "power_watts"]
INT_KEYS = ["onchip_memory_bytes", "device_memory_bytes", "busy_queue_depth"]
FLOAT_KEYS = [k for k in SCALAR_KEYS if k not in INT_KEYS and k != "name"]
MODE_SUBKEYS = [f"{table}.{mode}" for table in TABLE_KEYS for mode in MODE_KEYS]


def default_values() -> dict[str, Any]:
    return load_spec(None).canonical()


def _value(v: Any) -> str:
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return "inf" if v == math.inf else "-inf" if v == -math.inf else repr(v)
    if isinstance(v, (int, list)):
        return json.dumps(v)
    raise TypeError(v)


def to_toml(values: dict[str, Any]) -> str:
    """A TOML text of `values` (scalars, then the per-mode tables)."""
    lines = [f"{k} = {_value(v)}" for k, v in values.items() if not isinstance(v, dict)]
    for k, v in values.items():
        if isinstance(v, dict):
            lines.append(f"[{k}]")
            lines += [f"{sub} = {_value(x)}" for sub, x in v.items()]
    return "\n".join(lines) + "\n"


def with_value(key: str, value: Any) -> dict[str, Any]:
    values = default_values()
    if "." in key:
        table, sub = key.split(".")
        values[table][sub] = value
    else:
        values[key] = value
    return values


def refused(text: str, *fragments: str, where: str = "my.toml") -> SpecError:
    with pytest.raises(SpecError) as info:
        parse_spec(text, where)
    message = str(info.value)
    assert message.startswith(f"{where}:"), message
    for fragment in fragments:
        assert fragment in message, message
    return info.value


# ----------------------------------------------------------------------------- the default


def test_default_values():
    spec = load_spec(None)
    assert spec.name == "npu-sim-default"
    assert spec.int8_macs_per_second == 8e9
    assert spec.fp16_macs_per_second == spec.int8_macs_per_second / 2
    assert spec.vector_ops_per_second == 250e6
    assert spec.onchip_memory_bytes == 4 << 20
    assert spec.dma_bytes_per_second == 500e6
    assert spec.launch_seconds == pytest.approx(100e-6)
    assert spec.device_memory_bytes == 1 << 30
    assert spec.nominal_clock_mhz == 1000.0
    assert dict(spec.clock_mhz) == {ht.PERFORMANCE_LOW: 400.0, ht.PERFORMANCE_MEDIUM: 800.0,
                                    ht.PERFORMANCE_HIGH: 1000.0,
                                    ht.PERFORMANCE_EXTREME: 1200.0}
    assert dict(spec.power_watts) == {ht.PERFORMANCE_LOW: 0.8, ht.PERFORMANCE_MEDIUM: 1.6,
                                      ht.PERFORMANCE_HIGH: 2.2, ht.PERFORMANCE_EXTREME: 3.0}
    assert spec.idle_power_watts == 0.1
    assert spec.busy_queue_depth == 8
    assert isinstance(spec.onchip_memory_bytes, int) and isinstance(spec.busy_queue_depth, int)
    assert isinstance(spec.int8_macs_per_second, float)


def test_deployed_file_is_the_default_text():
    assert DEPLOYED.read_text(encoding="utf-8") == DEFAULT_SPEC_TEXT
    assert load_spec(DEPLOYED) == load_spec(None)
    assert load_spec(str(DEPLOYED)).identity == load_spec(None).identity


def test_every_key_of_the_default_is_commented():
    """Each `key = value` line carries its unit/meaning in a trailing comment, and a comment
    block introduces it (or its table)."""
    lines = DEFAULT_SPEC_TEXT.splitlines()
    seen = []
    for n, line in enumerate(lines):
        m = re.match(r"^(\w+)\s*=", line)
        if m:
            seen.append(m.group(1))
            if m.group(1) != "name":
                assert "#" in line and line.split("#", 1)[1].strip(), line
        elif line.startswith("["):
            assert lines[n - 1].startswith("#"), line
    assert set(seen) == set(SCALAR_KEYS) | set(MODE_KEYS)
    assert "SIMULATED" in DEFAULT_SPEC_TEXT  # says these are not a real chip's numbers


def test_load_spec_reads_a_file(tmp_path):
    path = tmp_path / "fast.toml"
    path.write_text(to_toml(with_value("int8_macs_per_second", 2e12)))
    spec = load_spec(path)
    assert spec.int8_macs_per_second == 2e12
    assert spec.fp16_macs_per_second == load_spec(None).fp16_macs_per_second


def test_unreadable_file_names_it(tmp_path):
    missing = tmp_path / "absent.toml"
    with pytest.raises(SpecError, match=re.escape(str(missing))):
        load_spec(missing)


def test_integers_accepted_for_float_keys_and_underscores():
    text = to_toml(with_value("int8_macs_per_second", 16_000_000_000)).replace(
        "16000000000", "16_000_000_000")
    spec = parse_spec(text)
    assert spec.int8_macs_per_second == 16e9 and isinstance(spec.int8_macs_per_second, float)


# ----------------------------------------------------------------------------- refusals


def test_invalid_toml():
    refused("name = \n", "not valid TOML")


@pytest.mark.parametrize("key", SCALAR_KEYS + TABLE_KEYS)
def test_missing_key(key):
    values = default_values()
    del values[key]
    refused(to_toml(values), repr(key), "missing")


@pytest.mark.parametrize("key", MODE_SUBKEYS)
def test_missing_mode(key):
    table, sub = key.split(".")
    values = default_values()
    del values[table][sub]
    refused(to_toml(values), repr(key), "missing")


def test_unknown_key():
    values = default_values()
    values["int4_macs_per_second"] = 1e9
    refused(to_toml(values), "'int4_macs_per_second'", "unknown key")


def test_unknown_mode_key():
    values = default_values()
    values["clock_mhz"]["turbo"] = 2000.0
    refused(to_toml(values), "'clock_mhz.turbo'", "unknown key")


@pytest.mark.parametrize("table", TABLE_KEYS)
def test_mode_table_not_a_table(table):
    values = default_values()
    values[table] = 5.0
    refused(to_toml(values), repr(table), "table")


@pytest.mark.parametrize("key", FLOAT_KEYS + MODE_SUBKEYS)
@pytest.mark.parametrize("bad", ["fast", True, [1.0]])
def test_number_of_wrong_type(key, bad):
    refused(to_toml(with_value(key, bad)), repr(key), "must be a number")


@pytest.mark.parametrize("key", INT_KEYS)
@pytest.mark.parametrize("bad", [4.0, "4", False])
def test_integer_of_wrong_type(key, bad):
    refused(to_toml(with_value(key, bad)), repr(key), "must be an integer")


@pytest.mark.parametrize("bad", [5, "", "  "])
def test_name_of_wrong_type(bad):
    refused(to_toml(with_value("name", bad)), "'name'", "non-empty string")


@pytest.mark.parametrize("key", FLOAT_KEYS + INT_KEYS + MODE_SUBKEYS)
@pytest.mark.parametrize("bad", [0, -1])
def test_non_positive(key, bad):
    value = float(bad) if key not in INT_KEYS else bad
    refused(to_toml(with_value(key, value)), repr(key), "> 0")


@pytest.mark.parametrize("bad", [math.inf, math.nan])
def test_non_finite(bad):
    refused(to_toml(with_value("dma_bytes_per_second", bad)), "'dma_bytes_per_second'",
            "finite")


def test_clocks_must_not_decrease():
    values = default_values()
    values["clock_mhz"]["high"] = 700.0  # below medium's 800
    refused(to_toml(values), "'clock_mhz.high'", "must not decrease")


def test_onchip_memory_within_device_memory():
    refused(to_toml(with_value("onchip_memory_bytes", (1 << 30) + 1)),
            "'onchip_memory_bytes'", "device_memory_bytes")


def test_default_where():
    with pytest.raises(SpecError, match=r"^<spec>: key 'busy_queue_depth'"):
        parse_spec(to_toml(with_value("busy_queue_depth", 0)))


# ----------------------------------------------------------------------------- identity


def test_identity_is_name_and_hash():
    spec = load_spec(None)
    name, digest = spec.identity.split("@")
    assert name == "npu-sim-default" and re.fullmatch(r"[0-9a-f]{16}", digest)


def test_identity_ignores_comments_and_formatting():
    stripped = to_toml(default_values())  # no comments, other number spellings
    assert stripped != DEFAULT_SPEC_TEXT
    assert parse_spec(stripped).identity == load_spec(None).identity
    assert parse_spec(stripped) == load_spec(None)


CHANGES = [("name", "other-npu"), ("int8_macs_per_second", 8.5e9),
           ("fp16_macs_per_second", 4.5e9), ("vector_ops_per_second", 251e6),
           ("onchip_memory_bytes", 4 << 19), ("dma_bytes_per_second", 501e6),
           ("launch_seconds", 101e-6), ("device_memory_bytes", (1 << 30) - 1),
           ("nominal_clock_mhz", 999.0), ("idle_power_watts", 0.11), ("busy_queue_depth", 9),
           ("clock_mhz.low", 401.0), ("clock_mhz.medium", 801.0), ("clock_mhz.high", 1001.0),
           ("clock_mhz.extreme", 1201.0), ("power_watts.low", 0.81),
           ("power_watts.medium", 1.61), ("power_watts.high", 2.21),
           ("power_watts.extreme", 3.01)]


def test_changes_cover_every_key():
    assert {k for k, _ in CHANGES} == set(SCALAR_KEYS) | set(MODE_SUBKEYS)


@pytest.mark.parametrize("key,value", CHANGES)
def test_identity_changes_with_any_value(key, value):
    base = load_spec(None)
    changed = parse_spec(to_toml(with_value(key, value)))
    assert changed != base
    assert changed.identity != base.identity
    assert len({changed.identity, base.identity}) == 2


# ----------------------------------------------------------------------------- modes


def test_clock_scale_and_power_per_mode():
    spec = load_spec(None)
    assert spec.clock_scale(ht.PERFORMANCE_LOW) == pytest.approx(0.4)
    assert spec.clock_scale(ht.PERFORMANCE_MEDIUM) == pytest.approx(0.8)
    assert spec.clock_scale(ht.PERFORMANCE_HIGH) == pytest.approx(1.0)
    assert spec.clock_scale(ht.PERFORMANCE_EXTREME) == pytest.approx(1.2)
    assert spec.power(ht.PERFORMANCE_LOW) == 0.8 and spec.power(ht.PERFORMANCE_EXTREME) == 3.0


def test_performance_none_is_medium():
    spec = load_spec(None)
    assert spec.clock_scale(ht.PERFORMANCE_NONE) == spec.clock_scale(ht.PERFORMANCE_MEDIUM)
    assert spec.power(ht.PERFORMANCE_NONE) == spec.power(ht.PERFORMANCE_MEDIUM)
    assert spec.clock(ht.PERFORMANCE_NONE) == 800.0


def test_unknown_mode_is_refused():
    spec = load_spec(None)
    with pytest.raises(ValueError, match="performance mode 7"):
        spec.clock_scale(7)
    with pytest.raises(ValueError):
        spec.power(-1)


def test_clock_scale_uses_the_nominal_clock():
    spec = parse_spec(to_toml(with_value("nominal_clock_mhz", 500.0)))
    assert spec.clock_scale(ht.PERFORMANCE_HIGH) == pytest.approx(2.0)


# ----------------------------------------------------------------------------- the object


def test_spec_is_immutable_hashable_and_picklable():
    spec = load_spec(None)
    with pytest.raises(AttributeError):
        spec.launch_seconds = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.clock_mhz[ht.PERFORMANCE_LOW] = 1.0  # type: ignore[index]
    assert hash(spec) == hash(load_spec(None))
    assert {spec: 1}[load_spec(None)] == 1
    for clone in (pickle.loads(pickle.dumps(spec)), copy.deepcopy(spec)):
        assert clone == spec and clone.identity == spec.identity
        assert clone.clock_scale(ht.PERFORMANCE_LOW) == spec.clock_scale(ht.PERFORMANCE_LOW)


def test_constructed_directly():
    base = load_spec(None)
    spec = AccelSpec(**{**{k: getattr(base, k) for k in SCALAR_KEYS},
                        "clock_mhz": dict(base.clock_mhz), "power_watts": dict(base.power_watts)})
    assert spec == base and spec.identity == base.identity


def test_details():
    spec = load_spec(None)
    details = spec.details()
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in details.items())
    assert details["spec"] == "npu-sim-default"
    assert details["spec_identity"] == spec.identity
    assert details["int8_throughput"] == "8 GMAC/s"
    assert details["fp16_throughput"] == "4 GMAC/s"
    assert details["vector_throughput"] == "250 Mop/s"
    assert details["dma_bandwidth"] == "500 MB/s"
    assert details["onchip_memory"].startswith("4 MiB")
    assert details["device_memory"].startswith("1 GiB")
    assert details["launch_cost"] == "100 us"
    assert details["clock"] == "nominal 1000 MHz; LOW 400, MEDIUM 800, HIGH 1000, EXTREME 1200 MHz"
    assert details["power"] == "idle 0.1 W; busy LOW 0.8, MEDIUM 1.6, HIGH 2.2, EXTREME 3 W"
    assert details["busy_queue_depth"] == "8"
