"""`nnrt convert`: an ONNX model to a saved model (.nnrt, common/model_file.py).

    $ nnrt convert resnet.onnx -o resnet.nnrt
    wrote resnet.nnrt: 20 nodes, 1.1 MiB
    input   x       float32  [1, 3, 32, 32]
    output  logits  float32  [1, 10]

The model is imported by `client/onnx_import/` (opset 13 and later; NCHW inputs and
outputs keep their layout and names) and saved device-independently: `nnrt run`, `nnrt
bench`, `nnrt compile` and `Model.load` read the result. No driver is needed.
`--input-shape NAME=D0,D1,...` fixes (or, with `?`, frees) an input's dimensions, as
`import_onnx(input_shapes=...)` does — needed where the graph takes the Shape of an input
with a dynamic dimension.

Exit codes: 0 written, 1 the output cannot be written, 2 bad usage or a model that cannot be
read or imported (the reason names the ONNX node, its operator and why).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from nnrt.client.commands.common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, say, table


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "convert", help="convert an ONNX model (.onnx) to a saved model (.nnrt)",
        description="Import an ONNX model (.onnx, opset 13 and later) and save it as an nnrt "
                    "saved model (.nnrt) for nnrt run / bench / compile and Model.load.")
    parser.add_argument("model", type=Path, help="the ONNX model (.onnx)")
    parser.add_argument("-o", "--output", type=Path,
                        help="the saved model to write (default: MODEL with suffix .nnrt)")
    parser.add_argument("--input-shape", action="append", default=[], metavar="NAME=DIMS",
                        help="fix an input's dimensions, e.g. x=1,3,224,224 ('?' for a "
                             "dynamic one); repeatable")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=run)


def parse_input_shapes(entries: list[str]) -> dict[str, list[int | None]]:
    shapes: dict[str, list[int | None]] = {}
    for entry in entries:
        name, sep, dims = entry.rpartition("=")
        if not sep or not name:
            raise ValueError(f"--input-shape {entry!r} is not NAME=D0,D1,...")
        try:
            shapes[name] = [None if d.strip() in ("?", "-1") else int(d)
                            for d in dims.split(",") if d.strip()]
        except ValueError:
            raise ValueError(f"--input-shape {entry!r}: dimensions are integers or '?'") \
                from None
    return shapes


def run(args: argparse.Namespace) -> int:
    from nnrt.common import model_file
    from nnrt.client.onnx_import import OnnxImportError, import_onnx

    output: Path = args.output or args.model.with_suffix(model_file.EXTENSION)
    try:
        shapes = parse_input_shapes(args.input_shape)
    except ValueError as exc:
        say(f"convert: {exc}")
        return EXIT_USAGE
    try:
        model = import_onnx(args.model, input_shapes=shapes or None)
    except OSError as exc:
        say(f"convert: cannot read {args.model}: {exc.strerror or exc}")
        return EXIT_USAGE
    except OnnxImportError as exc:
        say(f"convert: {args.model}: {exc}")
        return EXIT_USAGE
    try:
        lowered = model.handle.lowered()
        try:
            model_file.save_model(model, output)
        except OSError as exc:
            say(f"convert: cannot write {output}: {exc.strerror or exc}")
            return EXIT_FAILURE
    finally:
        model.close()
    size = output.stat().st_size
    rows = [("input", d.name, str(model_file.dtype_of(d)), model_file.shape_text(d.shape))
            for d in lowered.inputs] + \
        [("output", d.name, str(model_file.dtype_of(d)), model_file.shape_text(d.shape))
         for d in lowered.outputs]
    if args.json:
        print(json.dumps({"ok": True, "model": str(args.model), "output": str(output),
                          "nodes": len(lowered.hdi.nodes), "bytes": size,
                          "io": [dict(zip(("kind", "name", "dtype", "shape"), r))
                                 for r in rows]}, indent=2))
        return EXIT_OK
    print(f"wrote {output}: {len(lowered.hdi.nodes)} nodes, {_size(size)}")
    print(table(("KIND", "NAME", "DTYPE", "SHAPE"), rows))
    return EXIT_OK


def _size(count: int) -> str:
    value = float(count)
    for unit in ("bytes", "KiB", "MiB"):
        if value < 1024 or unit == "MiB":
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} bytes"
