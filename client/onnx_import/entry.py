"""The entry point: `import_onnx`, from an ONNX model to a finished Model."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ..api.model import Model
from .importer import _HANDLERS, _Importer
from .loading import load_onnx, OnnxImportError, _onnx

log = logging.getLogger(__name__)


MIN_OPSET = 13


def import_onnx(source: Any, *, input_shapes: Mapping[str, Sequence[int | None]] | None = None,
                name_outputs: bool = True) -> Model:
    """A finished Model from an ONNX model (a path, bytes or a ModelProto).

    `input_shapes` fixes (or frees, with None) input dimensions by input name, e.g.
    {"x": [1, 3, 224, 224]}: needed where a Shape of a dynamic tensor feeds the graph.
    The Model's inputs and outputs are the graph's, in the ONNX layout, under their names.
    OnnxImportError when something cannot be mapped exactly."""
    onnx = _onnx()

    proto = onnx.ModelProto()
    proto.CopyFrom(load_onnx(source))
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None:
        raise OnnxImportError("the model imports no default-domain opset")
    if opset < MIN_OPSET:
        from onnx import version_converter

        try:
            proto = version_converter.convert_version(proto, MIN_OPSET)
        except Exception as exc:
            raise OnnxImportError(f"opset {opset}: the importer reads opset {MIN_OPSET} and "
                                  f"later, and converting failed: {exc}") from None
    if proto.functions:
        names = sorted({f.name for f in proto.functions})
        log.info("model-local functions %s: only used ones are refused", names)
    from .ops.functions import expand_functions

    proto = expand_functions(proto, set(_HANDLERS))
    importer = _Importer(proto, input_shapes, name_outputs)
    try:
        return importer.run()
    except BaseException:
        importer.m.close()
        raise
