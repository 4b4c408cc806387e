"""The NPU simulator's offline compiler: a saved model (`.nnrt`) to its binary (`.npubin`).

    python -m nnrt.drivers.accel.compile MODEL.nnrt -o MODEL.npubin [--spec SPEC.toml] [--float16]

(`nnrt compile MODEL.nnrt --device accel ...` runs this module; the client does not import
driver code.) It does what the driver does at PrepareModel, ahead of time and without a
driver: reads the saved model (common/model_file.py), validates it into a Graph as the
driver host does (server/model_validation.build_graph), makes the device graph
(drivers/accel/support.device_graph: float16 in relaxed precision, every node checked) and
writes the binary (drivers/accel/offline.py) for the device specification given (default:
the built-in one, deploy/npu-sim.toml). The binary loads only on a driver running that same
spec (`nnrt-driver accel --spec SPEC.toml`).

A float32 model needs `--float16` (the NPU computes float32 only in relaxed precision, as
with EnableFloat16 at compile time of an online model); int8 and float16 models compile as
they are. The output is written atomically (a temporary file renamed into place).

Exit codes: 0 written (what was written is printed: sizes, nodes, spec identity); 1 the
model cannot be compiled for this NPU (the reason: an unsupported node, float32 without
--float16, an invalid graph) or the output cannot be written; 2 bad usage or bad input (an
unreadable or invalid model file or spec file).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from nnrt.common import model_file
from nnrt.common.hdi_model import LoweredModel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common.errors import DriverError
from nnrt.hdi.graph import Graph
from nnrt.hdi.model_validation import build_graph

from . import offline
from .spec import SpecError, load_spec

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
_CONSTANTS = 1  # the pseudo buffer id of the constant blob


class CompileError(Exception):
    """Ends the tool with `code` and `message` on stderr."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def model_graph(lowered: LoweredModel) -> Graph:
    """The validated Graph of a saved model, as the driver host builds it from a
    PrepareModel request (the constants read from one blob, in tensor order)."""
    builder = lowered.hdi
    blob = b"".join(builder.constants[i].tobytes() for i in sorted(builder.constants))
    model = builder.model(ht.SharedBuffer(bufferId=_CONSTANTS, bufferSize=len(blob))
                          if blob else None)
    view = memoryview(blob)

    def read_constant(buffer: ht.SharedBuffer) -> memoryview:
        return view[buffer.offset:buffer.offset + buffer.dataSize].toreadonly()

    return build_graph(model, read_constant)


def _write(path: Path, data: bytes) -> None:
    directory = path.parent if str(path.parent) else Path(".")
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def _shape(shape: tuple[int, ...]) -> str:
    return model_file.shape_text(list(shape))


def compile_file(model_path: Path, output: Path, spec_path: Path | None,
                 float16: bool) -> list[str]:
    """Compile one model file; the lines describing what was written. CompileError."""
    try:
        spec = load_spec(spec_path)
    except OSError as exc:
        raise CompileError(EXIT_USAGE, f"cannot read spec {spec_path}: "
                                       f"{exc.strerror or exc}") from None
    except SpecError as exc:
        raise CompileError(EXIT_USAGE, str(exc)) from None
    try:
        lowered = model_file.load(model_path)
    except OSError as exc:
        raise CompileError(EXIT_USAGE, f"cannot read {model_path}: "
                                       f"{exc.strerror or exc}") from None
    except ValueError as exc:
        raise CompileError(EXIT_USAGE, str(exc)) from None
    try:
        graph = model_graph(lowered)
    except DriverError as exc:
        raise CompileError(EXIT_FAILURE, f"{model_path}: invalid model: {exc.message}") from None
    try:
        blob = offline.compile_offline(graph, spec, float16)
    except DriverError as exc:
        hint = ("; pass --float16 to compile a float32 model in relaxed precision"
                if not float16 and "float32" in exc.message else "")
        raise CompileError(EXIT_FAILURE, f"{model_path} cannot run on the NPU of spec "
                                         f"{spec.identity}: {exc.message}{hint}") from None
    try:
        _write(output, blob)
    except OSError as exc:
        raise CompileError(EXIT_FAILURE, f"cannot write {output}: "
                                         f"{exc.strerror or exc}") from None
    loaded = offline.load_offline(blob, spec)  # what the driver will see (and a self-check)
    program = loaded.graph
    weights = sum(t.constant.nbytes for t in program.tensors if t.is_constant)
    lines = [
        f"wrote {output}: {len(blob)} bytes",
        (f"model:     {model_path} ({program.name!r}, {len(program.nodes)} nodes, "
         f"{weights} bytes of weights)"),
        f"spec:      {spec.identity}" + (f" ({spec_path})" if spec_path else " (built-in)"),
        "precision: " + ("float16 (relaxed, from float32: --float16)" if float16
                         else "native (int8 / float16)"),
    ]
    for kind, specs in (("input", loaded.inputs), ("output", loaded.outputs)):
        for t in specs:
            lines.append(f"{kind + ':':<10} {t.name!r} {t.dtype} {_shape(t.shape)}")
    if loaded.costs is not None:
        seconds = sum(c.seconds(spec, ht.PERFORMANCE_MEDIUM) for c in loaded.costs)
        lines.append(f"estimate:  {seconds * 1e3:.3f} ms per run at PERFORMANCE_MEDIUM "
                     f"(cost model, idle device)")
    return lines


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m nnrt.drivers.accel.compile",
        description="Compile a saved model (.nnrt) into an offline model of the NPU simulator "
                    "(.npubin), for PrepareOfflineModel on `nnrt-driver accel`.")
    p.add_argument("model", type=Path, help="the saved model (.nnrt)")
    p.add_argument("-o", "--output", type=Path,
                   help="the binary to write (default: MODEL with the suffix .npubin)")
    p.add_argument("--spec", type=Path, help="the device specification (TOML) of the driver "
                                             "that will load it (default: the built-in one)")
    p.add_argument("--float16", action="store_true",
                   help="compile a float32 model in relaxed precision (float16)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)  # bad usage: exit 2
    output = args.output or args.model.with_suffix(offline.EXTENSION)
    try:
        lines = compile_file(args.model, output, args.spec, args.float16)
    except CompileError as exc:
        print(f"nnrt compile: {exc.message}", file=sys.stderr)
        return exc.code
    print("\n".join(lines))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
