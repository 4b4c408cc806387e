"""`nnrt run`: compile a saved model (common/model_file.py) or an ONNX model (imported by
client/onnx_import.py when the file is named .onnx) on a device and run it once.

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
(`nnrt-cpu` or `cpu`), driver (socket) name or type (`cpu`); default the first. With no
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

from nnrt.client.commands.common import (EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK,
                                         EXIT_UNREACHABLE, EXIT_USAGE, add_common_arguments,
                                         print_json, say, table)
from nnrt.client.core.compiler import check_capabilities, compile_model
from nnrt.client.core.device import Device, DeviceRegistry, find_device
from nnrt.client.core.driver import DriverClient, DriverGone
from nnrt.client.core.embedded import DISABLE_ENV, embedded_disabled, find_or_start
from nnrt.client.core.errors import DeviceNotFound, NNRtError, RunTimeout
from nnrt.client.core.execution import Execution
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
    parser.add_argument("--device", "-d", help="device ID, name, driver or type "
                                               "(default: the first device)")
    parser.add_argument("--float16", action="store_true",
                        help="compute in float16 (the device must support it)")
    parser.add_argument("--timeout", type=_positive_int, default=DEFAULT_TIMEOUT_MS, metavar="MS",
                        help=f"deadline of each run in ms (default {DEFAULT_TIMEOUT_MS})")
    add_common_arguments(parser)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {value}")
    return value


# -- the model and its inputs ---------------------------------------------------------------


ACCEPTED_FORMATS = "a saved model (.nnrt) or an ONNX model (.onnx)"


def load_model(path: Path) -> LoweredModel:
    """A saved model, or an ONNX model imported on the fly (client/onnx_import.py)."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(model_file.MAGIC))
        if head != model_file.MAGIC and path.suffix.lower() == ".onnx":
            return _import_onnx(path)
        return model_file.load(path)
    except OSError as exc:
        raise CommandError(EXIT_USAGE, f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CommandError(EXIT_USAGE, f"{exc} (accepted: {ACCEPTED_FORMATS})") from None


def _import_onnx(path: Path) -> LoweredModel:
    from nnrt.client.onnx_import import OnnxImportError, import_onnx  # noqa: PLC0415

    try:
        model = import_onnx(path)
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
    device: Device
    client: DriverClient
    directory: Path
    embedded: bool

    def json(self) -> dict:
        return {"name": self.device.name, "id": self.device.id, "driver": self.device.driver}

    def text(self) -> str:
        return f"{self.device.name} (ID {self.device.id}, driver {self.device.driver})"


def select_device(devices: Sequence[Device], wanted: str | None) -> Device:
    """By the core's rules (core/device.py `find_device`): ID, full name, device-name part,
    driver name or type; None: the first. Exit 3 when none matches."""
    try:
        return find_device(devices, wanted)
    except DeviceNotFound as exc:
        raise CommandError(EXIT_UNREACHABLE, exc.message) from None


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
        device = select_device(devices, args.device)
        try:
            client = device.client()
        except DriverGone as exc:
            raise CommandError(EXIT_UNREACHABLE, f"device {device.name}: {exc}") from None
        yield Target(device, client, found, embedded is not None)
    finally:
        registry.close()  # end our session before the drivers go
        if embedded is not None:
            embedded.stop()


# -- preparing and running --------------------------------------------------------------------


class Prepared:
    """A model compiled on the target's device by the core (client/core/compiler.py), run as
    a core PreparedModel; released by `close`."""

    def __init__(self, target: Target, lowered: LoweredModel, *, float16: bool = False) -> None:
        self.target = target
        self.client = target.client
        self.lowered = lowered
        device = target.device
        started = time.perf_counter()
        try:
            check_capabilities(device, self.client, float16=float16)
            self.built = compile_model(device, self.client, ht.ModelConfig(enableFloat16=float16),
                                       lowered, recoverable=False)
        except DriverGone as exc:
            raise CommandError(EXIT_FAILURE, f"device {device.name}: {exc}") from None
        except NNRtError as exc:
            why = exc.message.removeprefix(f"device {device.name} ")  # named once
            raise CommandError(EXIT_FAILURE, f"device {device.name} refused the model: {why}") \
                from None
        self.prepare_ms = (time.perf_counter() - started) * 1000
        self.model = PreparedModel(self.built, self.client)

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

    def run(self, timeout_ms: int) -> list[list[int]]:
        """One run; the output shapes. CommandError (exit 1) when it fails or times out,
        with the driver's reason."""
        try:
            return self.execution.run(timeout_ms / 1000)
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
        prepared = Prepared(target, lowered, float16=args.float16)
        try:
            prepared.check_dim_ranges(arrays)
            slot = RunSlot(prepared, arrays)
            try:
                started = time.perf_counter()
                shapes = slot.run(args.timeout)
                run_ms = (time.perf_counter() - started) * 1000
                results = slot.read_outputs(shapes)
            finally:
                slot.close()
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
        print_json({"ok": True, "model": str(args.model), "device": target.json(),
                    "runtime_dir": str(target.directory), "embedded": target.embedded,
                    "float16": args.float16, "prepare_ms": round(prepared.prepare_ms, 3),
                    "run_ms": round(run_ms, 3), "inputs": inputs, "outputs": outputs})
        return EXIT_OK
    nodes = len(lowered.hdi.nodes)
    print(f"model:    {args.model} ({nodes} node{'s' if nodes != 1 else ''})")
    print(f"device:   {target.text()}" + ("  [embedded driver]" if target.embedded else ""))
    print(f"prepare:  {prepared.prepare_ms:.1f} ms   run: {run_ms:.2f} ms"
          + ("   (float16)" if args.float16 else ""))
    print()
    print(table(("KIND", "NAME", "DTYPE", "SHAPE", "FILE"),
                [("input", e["name"], e["dtype"], model_file.shape_text(e["shape"]), e["file"])
                 for e in inputs] +
                [("output", e["name"], e["dtype"], model_file.shape_text(e["shape"]), e["file"])
                 for e in outputs]))
    return EXIT_OK
