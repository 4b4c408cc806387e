"""QDQ planning: which quantised ONNX nodes become one quantised OH_NN operation
(`_QUANTISABLE`, with its condition), and the parameters of a QuantizeLinear /
DequantizeLinear (`_qparams`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .loading import OnnxImportError
from .values import _Attrs, _axis, _Quant, _reshape_target

if TYPE_CHECKING:
    from .importer import _Importer


_QUANTISED_TYPES = (np.dtype(np.int8), np.dtype(np.uint8))


@dataclass(frozen=True)
class _QuantPlan:
    """A node emitted as a quantised OH_NN operation: its result `out` (after a fused
    activation) is read only by `q_node`, whose parameters the result takes."""

    out: str
    q_node: Any
    quant: _Quant


def _qparams(im: _Importer, node: Any, a: _Attrs, rank: int, quantize: bool) -> _Quant:
    """The parameters of a QuantizeLinear / DequantizeLinear: constant scale and zero point,
    one (per tensor) or one per channel along `axis`; int8 / uint8 (int32 for a constant
    DequantizeLinear, a bias)."""
    from onnx import helper

    axis = int(a.get("axis", 1))
    if int(a.get("block_size", 0)):
        raise OnnxImportError("blocked quantisation (block_size) has no OH_NN form", node)
    saturate = a.get("saturate")
    if saturate is not None and not int(saturate):
        raise OnnxImportError("saturate=0 (float8 only)", node)
    scale = im.get(node, 1)
    zero = im.get(node, 2)
    if scale is None or scale.const is None or (zero is not None and zero.const is None):
        raise OnnxImportError("scale and zero point must be constants (OH_NN quantisation "
                              "parameters are fixed)", node)
    if scale.dtype != np.float32:
        raise OnnxImportError(f"a scale of type {scale.dtype} (float32 only)", node)
    output_dtype = a.get("output_dtype") if quantize else None
    if zero is not None:
        dtype = zero.dtype
    elif quantize:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(int(output_dtype))) if output_dtype \
            else np.dtype(np.uint8)  # ONNX's default
    else:
        dtype = im.dtype(node.input[0], node)
    if output_dtype and np.dtype(helper.tensor_dtype_to_np_dtype(int(output_dtype))) != dtype:
        raise OnnxImportError("output_dtype disagrees with the zero point's type", node)
    if dtype not in _QUANTISED_TYPES and not (dtype == np.int32 and not quantize):
        raise OnnxImportError(f"quantised type {dtype}: OH_NN quantises to int8 or uint8",
                              node)
    values = np.asarray(scale.const, np.float32)
    zeros = np.zeros(values.shape, np.int64) if zero is None else \
        np.asarray(zero.const).astype(np.int64)
    if values.ndim == 0 or (values.ndim == 1 and values.size == 1 and zeros.size == 1):
        return _Quant(values.reshape(()), zeros.reshape(()), None, dtype)
    if values.ndim != 1 or zeros.shape != values.shape:
        raise OnnxImportError(f"scale {list(values.shape)} / zero point {list(zeros.shape)}: "
                              f"per tensor or 1-D per channel only", node)
    axis = _axis(axis, rank, node)
    size = im.shape(node.input[0], node)[axis]
    if size >= 0 and size != values.size:
        raise OnnxImportError(f"{values.size} scales for axis {axis} of size {size}", node)
    return _Quant(values, zeros, axis, dtype)


def _quantisable_conv(im: _Importer, node: Any, a: _Attrs) -> bool:
    return im.values[node.input[1]].const is not None


def _quantisable_gemm(im: _Importer, node: Any, a: _Attrs) -> bool:
    """The FullConnection form: a constant weight, alpha 1, a constant [N] (or [1, N]) C."""
    w = im.values[node.input[1]]
    c = im.values.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    columns = im.shape(node.output[0], node)[1]
    return w.const is not None and float(a.get("alpha", 1.0)) == 1.0 and (c is None or (
        c.const is not None and c.const.ndim <= 2 and c.const.size in (1, columns) and
        (c.const.ndim < 2 or c.const.shape[0] == 1)))


def _quantisable_matmul(im: _Importer, node: Any, a: _Attrs) -> bool:
    w = im.values[node.input[1]]
    return w.const is None or w.const.ndim == 2


def _quantisable_clip(im: _Importer, node: Any, a: _Attrs) -> bool:
    low, high = im._maybe_const(node, 1), im._maybe_const(node, 2)
    if low is False or high is False or low is None:
        return False
    lo = float(np.asarray(low).reshape(-1)[0])
    hi = None if high is None else float(np.asarray(high).reshape(-1)[0])
    return lo == 0.0 and hi in (None, 6.0)  # Relu / Relu6


def _quantisable_pool(im: _Importer, node: Any, a: _Attrs) -> bool:
    if node.op_type != "AveragePool" or not int(a.get("count_include_pad", 0)):
        return True
    return not any(a.ints("pads", [0]) or [0]) and a.get("auto_pad", "NOTSET") in \
        ("NOTSET", "VALID")


def _quantisable_resize(im: _Importer, node: Any, a: _Attrs) -> bool:
    return a.get("mode", "nearest") == "linear"


def _always(im: _Importer, node: Any, a: _Attrs) -> bool:
    return True


def _quantisable_binary(im: _Importer, node: Any, a: _Attrs) -> bool:
    return all(im.values[n].dtype == np.float32 for n in node.input[:2])


# ONNX operators that a QDQ model's quantised nodes map onto one OH_NN operation that the C
# API quantises (node_quant_type_from_first_output), with the condition for that mapping.
_QUANTISABLE: dict[str, Callable[[_Importer, Any, _Attrs], bool]] = {
    "Conv": _quantisable_conv, "Gemm": _quantisable_gemm, "MatMul": _quantisable_matmul,
    "Add": _quantisable_binary, "Sub": _quantisable_binary, "Mul": _quantisable_binary,
    "Div": _quantisable_binary, "Relu": _always, "Sigmoid": _always, "Tanh": _always,
    "HardSwish": _always, "Clip": _quantisable_clip, "MaxPool": _quantisable_pool,
    "AveragePool": _quantisable_pool, "GlobalAveragePool": _always, "GlobalMaxPool": _always,
    "Reshape": lambda im, node, a: im.values[node.input[1]].const is not None,
    "Flatten": lambda im, node, a: _reshape_target(im.shape(node.output[0], node)) is not None,
    "Concat": _always, "Softmax": _always, "Resize": _quantisable_resize,
}
_FUSES_ACTIVATION = {"Conv", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div"}
