"""ActivationType as ONNX nodes, for the Activation operator and for every fused activation.

Where an ONNX operator is the same formula it is used (Relu, Clip, Sigmoid, Tanh, Gelu,
LeakyRelu, Softsign, Softplus); where it is not (HardSigmoid computes alpha·x + beta, our
(x + 3) / 6 rounds differently near 0), the numpy kernel's arithmetic is written out node by
node. ELU and SELU stay on numpy: ONNX's Elu is alpha·(e^x − 1), which loses the relative
precision that our expm1 keeps for small |x|.
"""

from __future__ import annotations

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from .lowering import NodeEmitter, NotLowerable

_IDENTITY = frozenset({ht.ACTIVATION_TYPE_NO_ACTIVATION, ht.ACTIVATION_TYPE_LINEAR})
_PLAIN = {
    ht.ACTIVATION_TYPE_RELU: "Relu",
    ht.ACTIVATION_TYPE_ABS: "Abs",
    ht.ACTIVATION_TYPE_SIGN: "Sign",
    ht.ACTIVATION_TYPE_SIGMOID: "Sigmoid",
    ht.ACTIVATION_TYPE_TANH: "Tanh",
    ht.ACTIVATION_TYPE_SOFTSIGN: "Softsign",
    ht.ACTIVATION_TYPE_SOFTPLUS: "Softplus",
}


def emit_activation(e: NodeEmitter, x: str, kind: int, *, out: str | None = None,
                    alpha: float = 0.0, min_val: float = 0.0, max_val: float = 0.0,
                    approximate: bool = False, dtype: np.dtype = np.dtype(np.float32)) -> str:
    """activation(x) written to `out` (a fresh name when None); float tensors of `dtype`."""
    def scalar(v: float) -> str:
        return e.const(v, dtype, "a")

    def clip(low: float, high: float) -> str:
        return e.op("Clip", [x, scalar(low), scalar(high)], out=out)

    if kind in _IDENTITY:
        return x if out is None else e.op("Identity", [x], out=out)
    if kind in _PLAIN:
        return e.op(_PLAIN[kind], [x], out=out)
    if kind == ht.ACTIVATION_TYPE_RELU6:
        return clip(0, 6)
    if kind == ht.ACTIVATION_TYPE_RELU1:
        return clip(0, 1)
    if kind == ht.ACTIVATION_TYPE_HARD_TANH:
        return clip(min_val, max_val)
    if kind == ht.ACTIVATION_TYPE_THRESHOLDRELU:
        return clip(0, alpha)
    if kind == ht.ACTIVATION_TYPE_LEAKY_RELU:
        if not np.isfinite(alpha) or alpha == 0:
            raise NotLowerable(f"LEAKY_RELU with alpha {alpha}")
        return e.op("LeakyRelu", [x], out=out, alpha=float(alpha))
    if kind == ht.ACTIVATION_TYPE_HSIGMOID:  # clip((x + 3) / 6, 0, 1)
        r = e.op("Div", [e.op("Add", [x, scalar(3)]), scalar(6)])
        return e.op("Clip", [r, scalar(0), scalar(1)], out=out)
    if kind == ht.ACTIVATION_TYPE_HSWISH:  # x * clip(x + 3, 0, 6) / 6
        r = e.op("Clip", [e.op("Add", [x, scalar(3)]), scalar(0), scalar(6)])
        return e.op("Div", [e.op("Mul", [r, x]), scalar(6)], out=out)
    if kind == ht.ACTIVATION_TYPE_SWISH:
        return e.op("Mul", [e.op("Sigmoid", [x]), x], out=out)
    if kind == ht.ACTIVATION_TYPE_GELU:
        return e.op("Gelu", [x], out=out, approximate="tanh" if approximate else "none")
    raise NotLowerable(f"activation {ht.ActivationType.Name(kind)}")
