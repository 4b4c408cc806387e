"""`nnrt run`: compile a saved model (common/model_file.py) or an ONNX model (imported by
client/onnx_import/ when the file is named .onnx) on a device and run it once.

    $ nnrt run mlp.nnrt --input x.npy --output-dir out
    model:    mlp.nnrt (3 nodes)
    device:   nnrt-cpu_nnrt_v2_1 (ID 4536084387933173364, driver cpu)
    prepare:  11.8 ms   run: 0.91 ms

    KIND    NAME       DTYPE    SHAPE    FILE
    input   x          float32  [4, 16]  x.npy
    output  Tensor: 7  float32  [4, 10]  out/Tensor_7.npy

Inputs are `.npy` files, one per model input in the model's order, or one `.npz` archive
holding them all: its arrays matched to the inputs by name when every input's name is in it,
else by position when it holds exactly `arr_0`, `arr_1`, ... (what `np.savez(path, *arrays)`
writes); otherwise the error lists the names the model expects. They are checked before any
device is asked: their count, data type (exact; a non-native byte order is converted) and
shape (rank, every fixed dimension; a dynamic one must be within the device's
GetInputDimRanges). Each output is written to `<output-dir>/<name>.npy`, its name from the
model's I/O descriptors with every run of characters other than letters, digits, `.`, `_`
and `-` replaced by `_` (`Tensor: 7` -> `Tensor_7.npy`) — or, when the output path ends in
`.npz`, all of them into that one archive, each under its output name as the descriptors
give it (`np.load(path)["Tensor: 7"]`).

The device: `--device` by ID, full name (`nnrt-cpu_nnrt_v2_1`), device-name part
(`nnrt-cpu` or `cpu`), driver (socket) name or type (`cpu`); default the first. Several,
comma-separated in order of preference (`--device gpu,cpu`), or `--device auto` (every
device: accelerators, GPUs, CPUs): the model is compiled over them as the Pythonic API's
`model.compile([...])` does (client/core/hetero.py) — each node on the first device that
runs it, the partitions run as steps, and a driver that dies or reports a device error
mid-run moves the run to the devices left (`--no-failover`: the run fails instead); the
output says the plan (`--explain`: every step's nodes, why, the boundary tensors). With no
driver in the runtime directory an embedded CPU driver is started for the run, as for
`nnrt demo` (client/core/embedded.py), and said so on stderr; `NNRT_NO_EMBEDDED=1` forbids it.

Exit codes (client/commands/common.py EXIT_CODES): 0 ok, 1 failed (the device refused the
model, the run failed or timed out, an output could not be written), 2 bad usage or bad
input (unreadable or invalid model file, inputs that do not match the model), 3 no device
(none running and no embedded one, or no device of that name), 130 interrupted.

This module also holds what `nnrt bench` shares with it: loading and checking inputs,
opening the device, preparing, and the buffers of one run in flight.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nnrt.client.commands.common import (DURATION_HELP, EXIT_FAILURE, EXIT_INTERRUPTED,
                                         EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE,
                                         add_common_arguments, duration, positive_int,
                                         print_json, say, table)
from nnrt.client.core.compiler import check_capabilities, compile_model
from nnrt.client.core.device import Device, DeviceRegistry, find_device
from nnrt.client.core.driver import DriverClient, DriverGone
from nnrt.client.core.embedded import DISABLE_ENV, embedded_disabled, find_or_start
from nnrt.client.core.errors import DeviceNotFound, NNRtError, RunTimeout
from nnrt.client.core.execution import Execution
from nnrt.client.core.hetero import HeteroCompilation, device_list
from nnrt.client.core.prepared_model import PreparedModel
from nnrt.common import model_file
from nnrt.common.hdi_model import IODesc, LoweredModel
from nnrt.common.runtime_dir import ENV as RUNTIME_ENV
from nnrt.common.runtime_dir import driver_names, runtime_dir
from nnrt.protos import hdi_types_pb2 as ht

DEFAULT_TIMEOUT_MS = 60_000


class CommandError(Exception):
    """Ends a command with `code` and `message` on stderr."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "run", help="compile a model (.nnrt or .onnx) and run it once on .npy/.npz inputs",
        description="Compile a model — a saved model (.nnrt) or an ONNX model (.onnx, "
                    "imported on the fly) — on a device, run it once on .npy inputs (or one "
                    ".npz archive) and write each output as <output-dir>/<name>.npy, or all "
                    "of them into one .npz archive when the output path ends in .npz.")
    add_model_arguments(parser)
    parser.add_argument("--output-dir", "--output", "-o", dest="output_dir", type=Path,
                        default=Path("."), metavar="PATH",
                        help="where the outputs are written: a directory, one <name>.npy "
                             "per output (default: the current directory), or a file ending "
                             "in .npz holding every output under its name")
    parser.set_defaults(func=run)


def add_model_arguments(parser: argparse.ArgumentParser, *, inputs_required: bool = True) -> None:
    """What `run` and `bench` share: the model, inputs, device and compilation options."""
    parser.add_argument("model", type=Path,
                        help="the model: a saved model (.nnrt) or an ONNX model (.onnx)")
    parser.add_argument("--input", "-i", dest="inputs", action="append", type=Path, default=[],
                        metavar="FILE", help="a .npy file per model input, in order, or one "
                        ".npz archive holding every input (by input name, or arr_0, arr_1, "
                        "... in order)" + ("" if inputs_required else
                                         " (default: random inputs)"))
    parser.add_argument("--device", "-d", help="device ID, name, driver or type (default: the "
                                               "first device); several, comma-separated in "
                                               "order of preference (gpu,cpu), or auto: each "
                                               "node on the first device that runs it")
    parser.add_argument("--no-failover", dest="failover", action="store_false",
                        help="over several devices: a driver's death or device error fails "
                             "the run (default: the run goes on over the devices left)")
    parser.add_argument("--explain", action="store_true",
                        help="over several devices: print the plan (each step's device and "
                             "nodes, why nodes went where, the boundary tensors)")
    parser.add_argument("--float16", action="store_true",
                        help="compute in float16 (the device must support it)")
    parser.add_argument("--timeout", type=duration, default=DEFAULT_TIMEOUT_MS / 1000,
                        metavar="DURATION",
                        help=f"deadline of each run ({DURATION_HELP}; default "
                             f"{DEFAULT_TIMEOUT_MS / 1000:g} s)")
    add_common_arguments(parser)


_positive_int = positive_int  # the name bench.py imports


def timeout_ms(args: argparse.Namespace) -> int:
    """--timeout (a duration in s) as the ms a run's deadline takes."""
    return max(round(args.timeout * 1000), 1)


# -- the model and its inputs ---------------------------------------------------------------


ACCEPTED_FORMATS = "a saved model (.nnrt) or an ONNX model (.onnx)"


def load_model(path: Path, input_shapes: dict | None = None) -> LoweredModel:
    """A saved model, or an ONNX model imported on the fly (client/onnx_import/), its
    inputs' dimensions fixed by `input_shapes` (`--input-shape`, as `nnrt convert` has it)."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(model_file.MAGIC))
        if head != model_file.MAGIC and path.suffix.lower() == ".onnx":
            return _import_onnx(path, input_shapes)
        if input_shapes:
            raise CommandError(EXIT_USAGE, f"{path}: --input-shape applies to an ONNX model "
                                           "(a saved model's shapes were fixed at convert)")
        return model_file.load(path)
    except OSError as exc:
        raise CommandError(EXIT_USAGE, f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CommandError(EXIT_USAGE, f"{exc} (accepted: {ACCEPTED_FORMATS})") from None


def _import_onnx(path: Path, input_shapes: dict | None = None) -> LoweredModel:
    from nnrt.client.onnx_import import OnnxImportError, import_onnx  # noqa: PLC0415

    try:
        model = import_onnx(path, input_shapes=input_shapes or None)
    except OnnxImportError as exc:
        raise CommandError(EXIT_USAGE, f"{path}: {exc}") from None
    lowered = model.handle.lowered()
    model.close()  # the lowered graph stands on its own
    return lowered


def describe_io(desc: IODesc) -> str:
    return f"{desc.name!r} {model_file.dtype_of(desc)} {model_file.shape_text(desc.shape)}"


def load_inputs(paths: Sequence[Path],
                lowered: LoweredModel | None = None) -> tuple[list[np.ndarray], list[str]]:
    """The input arrays and where each came from: one .npy per input, or one .npz archive
    whose arrays are matched to `lowered`'s inputs by name, else as arr_0, arr_1, ..."""
    arrays, sources = [], []
    for path in paths:
        try:
            array = np.load(path, allow_pickle=False)
        except OSError as exc:
            raise CommandError(EXIT_USAGE, f"cannot read {path}: {exc.strerror or exc}") from None
        except ValueError as exc:  # not a .npy file, or an object array
            raise CommandError(EXIT_USAGE, f"cannot read {path} as a .npy array: "
                                           f"{exc}") from None
        if not isinstance(array, np.ndarray):  # an .npz archive
            if len(paths) != 1:
                raise CommandError(EXIT_USAGE, f"{path} is an .npz archive: give it alone "
                                               f"(it holds every input), or one .npy per input")
            with array:
                return _npz_inputs(path, array, lowered)
        arrays.append(array)
        sources.append(str(path))
    return arrays, sources


def _npz_inputs(path: Path, archive: Any,
                lowered: LoweredModel | None) -> tuple[list[np.ndarray], list[str]]:
    keys = list(archive.files)
    names = [d.name for d in lowered.inputs] if lowered is not None else []
    positional = [f"arr_{i}" for i in range(len(names))]
    if names and set(names) <= set(keys) and len(set(names)) == len(names):
        chosen = names
    elif sorted(keys) == sorted(positional):
        chosen = positional
    else:
        wanted = "; ".join(describe_io(d) for d in lowered.inputs) if lowered else "?"
        extra = sorted(set(keys) - set(names))
        missing = [n for n in names if n not in keys]
        raise CommandError(EXIT_USAGE, f"{path} holds arrays {keys}: the model's "
                                       f"input{'s are' if len(names) != 1 else ' is'} "
                                       f"{wanted}; name the arrays {names} (missing: "
                                       f"{missing}{f', not inputs: {extra}' if extra else ''}), "
                                       f"or arr_0.. in that order")
    extra = sorted(set(keys) - set(chosen))
    if extra:
        raise CommandError(EXIT_USAGE, f"{path} holds arrays that are not inputs of the model: "
                                       f"{extra} (its inputs: {names})")
    try:
        arrays = [archive[k] for k in chosen]
    except ValueError as exc:  # an object array
        raise CommandError(EXIT_USAGE, f"cannot read {path}: {exc}") from None
    return arrays, [f"{path}[{k}]" for k in chosen]


def check_inputs(lowered: LoweredModel, arrays: Sequence[np.ndarray],
                 sources: Sequence[str]) -> list[np.ndarray]:
    """The inputs, checked against the model (CommandError, exit 2, naming what is wrong);
    arrays in a non-native byte order are converted, all made contiguous."""
    descs = lowered.inputs
    if len(arrays) != len(descs):
        wanted = "; ".join(describe_io(d) for d in descs)
        raise CommandError(EXIT_USAGE, f"the model has {len(descs)} input"
                                       f"{'s' if len(descs) != 1 else ''} ({wanted}), "
                                       f"{len(arrays)} given")
    checked = []
    for i, (desc, array, source) in enumerate(zip(descs, arrays, sources)):
        what = f"input {i} ({desc.name!r}, {source})"
        dtype = model_file.dtype_of(desc)
        if array.dtype != dtype and array.dtype.newbyteorder("=") == dtype:
            array = array.astype(dtype)
        if array.dtype != dtype:
            raise CommandError(EXIT_USAGE, f"{what}: data type {array.dtype}, the model wants "
                                           f"{dtype}")
        if array.ndim == 0 and list(desc.shape) in ([1], [-1]):
            array = array.reshape(1)  # an ONNX scalar input is a [1] tensor of the model
        want = model_file.shape_text(desc.shape)
        got = model_file.shape_text(list(array.shape))
        if array.ndim != len(desc.shape):
            raise CommandError(EXIT_USAGE, f"{what}: shape {got}, the model wants {want} "
                                           f"(rank {len(desc.shape)}, not {array.ndim})")
        for axis, (d, w) in enumerate(zip(array.shape, desc.shape)):
            if w >= 0 and d != w:
                raise CommandError(EXIT_USAGE, f"{what}: shape {got}, the model wants {want}: "
                                               f"dimension {axis} is {d}, not {w}")
            if d < 1:
                raise CommandError(EXIT_USAGE, f"{what}: shape {got}: dimension {axis} is empty")
        checked.append(np.ascontiguousarray(array))
    return checked


def output_file_names(descs: Sequence[IODesc]) -> list[str]:
    """`<name>.npy` per output: names sanitised for a file system, made unique."""
    names, used = [], set()
    for i, desc in enumerate(descs):
        base = re.sub(r"[^A-Za-z0-9._-]+", "_", desc.name).strip("._") or f"output_{i}"
        name, n = base, 1
        while name.lower() in used:
            n += 1
            name = f"{base}_{n}"
        used.add(name.lower())
        names.append(f"{name}.npy")
    return names


def npz_output_names(descs: Sequence[IODesc]) -> list[str]:
    """The key of each output in a .npz archive: its name; made unique (`name_2`) and never
    empty (`output_<i>`)."""
    names, used = [], set()
    for i, desc in enumerate(descs):
        base = desc.name or f"output_{i}"
        name, n = base, 1
        while name in used:
            n += 1
            name = f"{base}_{n}"
        used.add(name)
        names.append(name)
    return names


# -- the device -------------------------------------------------------------------------------


@dataclass
class Target:
    device: Device  # the one device, or the first (preferred) of several
    client: DriverClient
    directory: Path
    embedded: bool
    devices: list[Device] | None = None  # several, in order of preference

    def json(self) -> dict:
        return _device_json(self.device)

    def text(self) -> str:
        if self.devices is not None:
            return ", ".join(_device_text(d) for d in self.devices)
        return _device_text(self.device)

    def add_json(self, entry: dict) -> dict:
        """`entry` with the devices: "device" (the one, or the preferred), "devices" for
        several."""
        entry["device"] = self.json()
        if self.devices is not None:
            entry["devices"] = [_device_json(d) for d in self.devices]
        return entry


def _device_json(device: Device) -> dict:
    return {"name": device.name, "id": device.id, "driver": device.driver}


def _device_text(device: Device) -> str:
    return f"{device.name} (ID {device.id}, driver {device.driver})"


def select_device(devices: Sequence[Device], wanted: str | None) -> Device:
    """By the core's rules (core/device.py `find_device`): ID, full name, device-name part,
    driver name or type; None: the first. Exit 3 when none matches."""
    try:
        return find_device(devices, wanted)
    except DeviceNotFound as exc:
        raise CommandError(EXIT_UNREACHABLE, exc.message) from None


def select_devices(devices: Sequence[Device], wanted: str | None) -> list[Device] | None:
    """Several devices (`gpu,cpu`, `auto`) by the core's rules (core/hetero.py
    `device_list`); None when `wanted` names one. Exit 3 for a device there is not, 2 for a
    list naming one twice or an empty name."""
    try:
        return device_list(devices, wanted)
    except DeviceNotFound as exc:
        raise CommandError(EXIT_UNREACHABLE, exc.message) from None
    except NNRtError as exc:
        raise CommandError(EXIT_USAGE, f"--device {wanted}: {exc.message}") from None


@contextlib.contextmanager
def open_device(args: argparse.Namespace) -> Iterator[Target]:
    """The chosen device's session; an embedded driver started (and said so) when none runs."""
    if args.runtime_dir is not None:
        os.environ[RUNTIME_ENV] = str(args.runtime_dir)
    directory = runtime_dir()
    if not driver_names(directory) and embedded_disabled():
        raise CommandError(EXIT_UNREACHABLE, f"no device: no driver in {directory} and "
                                             f"{DISABLE_ENV} is set")
    try:
        found, embedded = find_or_start(announce=False)  # said here, once
    except RuntimeError as exc:
        raise CommandError(EXIT_FAILURE, f"cannot start an embedded driver: {exc}") from None
    if embedded is not None:
        say(f"no driver in {directory}: started an embedded {', '.join(embedded.kinds)} driver "
            f"in {found} for this run, stopped at the end ({DISABLE_ENV}=1 forbids this)")
    registry = DeviceRegistry(found)
    try:
        devices = registry.devices()
        if not devices:
            raise CommandError(EXIT_UNREACHABLE, f"no device: no driver answers in {found}")
        several = select_devices(devices, args.device)
        device = several[0] if several else select_device(devices, args.device)
        try:
            client = device.client()
        except DriverGone as exc:
            raise CommandError(EXIT_UNREACHABLE, f"device {device.name}: {exc}") from None
        yield Target(device, client, found, embedded is not None, several)
    finally:
        registry.close()  # end our session before the drivers go
        if embedded is not None:
            embedded.stop()


# -- preparing and running --------------------------------------------------------------------


class Prepared:
    """A model compiled on the target's device by the core (client/core/compiler.py), or
    over its several devices (client/core/hetero.py, as `model.compile([...])`), run as a
    core PreparedModel; released by `close`."""

    def __init__(self, target: Target, lowered: LoweredModel, *, float16: bool = False,
                 failover: bool = True) -> None:
        self.target = target
        self.client = target.client
        self.lowered = lowered
        self.hetero: HeteroCompilation | None = None
        device = target.device
        config = ht.ModelConfig(enableFloat16=float16)
        started = time.perf_counter()
        if target.devices is not None:
            self._build_hetero(target.devices, config, failover)
            self.prepare_ms = (time.perf_counter() - started) * 1000
            self.model = PreparedModel(self.built, self.built.client)
            return
        try:
            check_capabilities(device, self.client, float16=float16)
            self.built = compile_model(device, self.client, config, lowered, recoverable=False)
        except DriverGone as exc:
            raise CommandError(EXIT_FAILURE, f"device {device.name}: {exc}") from None
        except NNRtError as exc:
            why = exc.message.removeprefix(f"device {device.name} ")  # named once
            raise CommandError(EXIT_FAILURE, f"device {device.name} refused the model: {why}") \
                from None
        self.prepare_ms = (time.perf_counter() - started) * 1000
        self.model = PreparedModel(self.built, self.client)

    def _build_hetero(self, devices: list[Device], config: ht.ModelConfig,
                      failover: bool) -> None:
        names = ", ".join(d.name for d in devices)
        self.hetero = HeteroCompilation(devices, self.lowered, config, failover=failover)
        try:
            self.built = self.hetero.build()
        except DriverGone as exc:
            raise CommandError(EXIT_FAILURE, f"devices {names}: {exc}") from None
        except NNRtError as exc:
            raise CommandError(EXIT_FAILURE, f"devices {names} refused the model: "
                                             f"{exc.message}") from None

    def plan(self) -> dict | None:
        """Over several devices, the plan in use and what the runs did (JSON); else None."""
        if self.hetero is None:
            return None
        current = self.hetero.current
        stats = self.model.hetero.stats
        return {"steps": [{"device": p.device.name, "driver": p.device.driver,
                           "nodes": len(p.step.nodes)}
                          for p in current.steps] if current is not None else [],
                "boundary_tensors": len(current.plan.boundaries) if current is not None else 0,
                "boundary_bytes": stats.boundary_bytes, "copied_bytes": stats.copied_bytes,
                "failovers": stats.failovers}

    def plan_lines(self, width: int, explain: bool) -> list[str]:
        """The plan for the text output: one line, or the whole explanation."""
        plan = self.plan()
        if plan is None:
            return []
        if explain:
            return self.hetero.explain().splitlines()
        steps = ", ".join(f"{s['driver']} ({s['nodes']} node{'s' if s['nodes'] != 1 else ''})"
                          for s in plan["steps"])
        line = (f"{'plan:':<{width}}{len(plan['steps'])} step"
                f"{'s' if len(plan['steps']) != 1 else ''}: {steps}; "
                f"{plan['boundary_tensors']} boundary tensor"
                f"{'s' if plan['boundary_tensors'] != 1 else ''}, "
                f"{plan['copied_bytes']} bytes copied between steps")
        if plan["failovers"]:
            line += f"; {plan['failovers']} run(s) failed over"
        return [line]

    def check_dim_ranges(self, arrays: Sequence[np.ndarray]) -> None:
        """Dynamic dimensions against the device's GetInputDimRanges (exit 2 outside them)."""
        found = self.model.dim_ranges().first_violation([a.shape for a in arrays])
        if found is not None:
            i, why = found
            raise CommandError(EXIT_USAGE, f"input {i} ({self.lowered.inputs[i].name!r}): {why}")

    def close(self) -> None:
        self.model.close()
        self.built.release()


class RunSlot:
    """One run in flight: the core's Execution (client/core/execution.py: its own buffers,
    outputs resized to the shapes the driver reports), its failures as the command's exit."""

    def __init__(self, prepared: Prepared, arrays: Sequence[np.ndarray],
                 output_sizes: Sequence[int] | None = None) -> None:
        try:
            self.execution = Execution(prepared.model, arrays, output_sizes)
        except DriverGone as exc:
            raise CommandError(EXIT_FAILURE, str(exc)) from None
        except NNRtError as exc:
            raise CommandError(EXIT_FAILURE, exc.message) from None

    @property
    def output_sizes(self) -> list[int]:
        return self.execution.output_sizes

    def run(self, timeout_ms: int, profile: list | None = None) -> list[list[int]]:
        """One run; the output shapes. CommandError (exit 1) when it fails or times out,
        with the driver's reason. `profile`: the driver's RunProfile is appended to it."""
        try:
            return self.execution.run(timeout_ms / 1000, profile)
        except RunTimeout:
            raise CommandError(EXIT_FAILURE, f"the run did not finish within {timeout_ms} ms") \
                from None
        except NNRtError as exc:
            raise CommandError(EXIT_FAILURE, exc.message) from None

    def read_outputs(self, shapes: Sequence[Sequence[int]]) -> list[np.ndarray]:
        return self.execution.results(shapes)

    def close(self) -> None:
        self.execution.close()


def finish(exc: CommandError, as_json: bool) -> int:
    """Say why a command ends and give its exit code (JSON carries the error too)."""
    if as_json:
        print_json({"ok": False, "exit_code": exc.code, "error": exc.message})
    say(exc.message)
    return exc.code


# -- the command ------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except CommandError as exc:
        return finish(exc, args.json)
    except KeyboardInterrupt:  # sessions closed, an embedded driver stopped on the way here
        return finish(CommandError(EXIT_INTERRUPTED, "interrupted"), args.json)


def _run(args: argparse.Namespace) -> int:
    lowered = load_model(args.model)
    arrays, sources = load_inputs(args.inputs, lowered)
    arrays = check_inputs(lowered, arrays, sources)
    out_dir: Path = args.output_dir
    archive = out_dir.suffix.lower() == ".npz"
    if archive:
        if out_dir.is_dir():
            raise CommandError(EXIT_USAGE, f"--output {out_dir} is a directory, not a .npz file")
        keys = npz_output_names(lowered.outputs)
        files = [f"{out_dir}[{k}]" for k in keys]
    else:
        if out_dir.exists() and not out_dir.is_dir():
            raise CommandError(EXIT_USAGE, f"--output-dir {out_dir} is not a directory")
        files = [out_dir / name for name in output_file_names(lowered.outputs)]
    with open_device(args) as target:
        prepared = Prepared(target, lowered, float16=args.float16, failover=args.failover)
        try:
            prepared.check_dim_ranges(arrays)
            slot = RunSlot(prepared, arrays)
            try:
                started = time.perf_counter()
                shapes = slot.run(timeout_ms(args))
                run_ms = (time.perf_counter() - started) * 1000
                results = slot.read_outputs(shapes)
            finally:
                slot.close()
            plan = prepared.plan()
            plan_lines = prepared.plan_lines(10, args.explain)
        finally:
            prepared.close()
    try:
        if archive:
            out_dir.parent.mkdir(parents=True, exist_ok=True)
            with open(out_dir, "wb") as f:  # exactly this name (np.savez would add .npz)
                np.savez(f, **dict(zip(keys, results)))
        else:
            out_dir.mkdir(parents=True, exist_ok=True)
            for path, result in zip(files, results):
                np.save(path, result)
    except OSError as exc:
        raise CommandError(EXIT_FAILURE, f"cannot write the outputs to {out_dir}: "
                                         f"{exc.strerror or exc}") from None
    inputs = [{"name": d.name, "dtype": str(a.dtype), "shape": list(a.shape), "file": s}
              for d, a, s in zip(lowered.inputs, arrays, sources)]
    outputs = [{"name": d.name, "dtype": str(r.dtype), "shape": list(r.shape), "file": str(p)}
               for d, r, p in zip(lowered.outputs, results, files)]
    if args.json:
        entry = target.add_json({"ok": True, "model": str(args.model)})
        if plan is not None:
            entry["plan"] = plan
            if args.explain:
                entry["explain"] = "\n".join(plan_lines)
        print_json({**entry, "runtime_dir": str(target.directory),
                    "embedded": target.embedded, "float16": args.float16,
                    "prepare_ms": round(prepared.prepare_ms, 3), "run_ms": round(run_ms, 3),
                    "inputs": inputs, "outputs": outputs})
        return EXIT_OK
    nodes = len(lowered.hdi.nodes)
    print(f"model:    {args.model} ({nodes} node{'s' if nodes != 1 else ''})")
    print(f"{'devices:' if target.devices else 'device:':<10}{target.text()}"
          + ("  [embedded driver]" if target.embedded else ""))
    for line in plan_lines:
        print(line)
    print(f"prepare:  {prepared.prepare_ms:.1f} ms   run: {run_ms:.2f} ms"
          + ("   (float16)" if args.float16 else ""))
    print()
    print(table(("KIND", "NAME", "DTYPE", "SHAPE", "FILE"),
                [("input", e["name"], e["dtype"], model_file.shape_text(e["shape"]), e["file"])
                 for e in inputs] +
                [("output", e["name"], e["dtype"], model_file.shape_text(e["shape"]), e["file"])
                 for e in outputs]))
    return EXIT_OK
