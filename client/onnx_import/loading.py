"""Loading and describing an ONNX model, the rank-0 convention of its inputs and
outputs, and the error every part of the import raises."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np


class OnnxImportError(ValueError):
    """An ONNX model (or one of its nodes) that the importer cannot map exactly."""

    def __init__(self, reason: str, node: Any = None) -> None:
        self.node_name = getattr(node, "name", "") if node is not None else ""
        self.op_type = getattr(node, "op_type", "") if node is not None else ""
        self.reason = reason
        if node is not None:
            where = f"node {self.node_name!r} ({self.op_type})" if self.node_name \
                else f"a {self.op_type} node (output {list(node.output)[:1]})"
            super().__init__(f"ONNX {where}: {reason}")
        else:
            super().__init__(f"ONNX model: {reason}")


@dataclass(frozen=True)
class IOInfo:
    """An ONNX graph input or output: name, shape (an int, a dim_param name or None per
    dimension) and onnxruntime's type string ("tensor(float)")."""

    name: str
    shape: list[int | str | None]
    type: str
    dtype: np.dtype


# A rank-0 ONNX input or output is computed as a [1] tensor (OH_NN has no rank-0 tensor):
# fed as [1], given back with shape () — as onnxruntime gives it.
def as_fed(info: Any, value: Any) -> np.ndarray:
    """An input as the device takes it (`info`: anything with the ONNX `shape`)."""
    array = np.asarray(value)
    return array.reshape(1) if not info.shape and array.ndim == 0 else array


def as_given(info: Any, array: np.ndarray) -> np.ndarray:
    """An output as ONNX gives it."""
    return array.reshape(()) if not info.shape and array.size == 1 else array


# -- loading and describing ------------------------------------------------------------------


def _onnx() -> Any:
    """The onnx package (a dependency of nnrt; a broken environment may still lack it)."""
    try:
        import onnx
    except ImportError as exc:
        raise OnnxImportError("the ONNX import needs the onnx package: "
                              "pip install onnx") from exc
    return onnx


def load_onnx(source: Any) -> Any:
    """A ModelProto from a path, bytes or a ModelProto (external data beside the file)."""
    onnx = _onnx()

    if isinstance(source, onnx.ModelProto):
        return source
    if isinstance(source, (bytes, bytearray, memoryview)):
        try:
            return onnx.load_from_string(bytes(source))
        except Exception as exc:  # DecodeError and friends
            raise OnnxImportError(f"not a valid ONNX model: {exc}") from None
    path = os.fspath(source)
    try:
        return onnx.load(path)
    except OSError:
        raise
    except Exception as exc:
        raise OnnxImportError(f"{path} is not a valid ONNX model: {exc}") from None


def _type_string(elem_type: int) -> str:
    onnx = _onnx()

    name = onnx.TensorProto.DataType.Name(elem_type).lower()
    return "tensor(" + {"float": "float", "double": "double", "float16": "float16"}.get(
        name, name) + ")"


def describe_io(model: Any) -> tuple[list[IOInfo], list[IOInfo]]:
    """The graph inputs (initializers excluded) and outputs of a ModelProto."""
    from onnx import helper

    initializers = {t.name for t in model.graph.initializer}

    def info(v: Any) -> IOInfo:
        kind = v.type.WhichOneof("value")
        if kind != "tensor_type" or not v.type.tensor_type.elem_type:
            raise OnnxImportError(f"graph input/output {v.name!r} is a "
                                  f"{(kind or 'untyped').replace('_type', '')} value "
                                  f"(only tensors have an OH_NN form)")
        t = v.type.tensor_type
        dims: list[int | str | None] = []
        if t.HasField("shape"):
            for d in t.shape.dim:
                dims.append(d.dim_value if d.HasField("dim_value") else
                            (d.dim_param or None))
        return IOInfo(v.name, dims, _type_string(t.elem_type),
                      np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type)))

    return ([info(v) for v in model.graph.input if v.name not in initializers],
            [info(v) for v in model.graph.output])
