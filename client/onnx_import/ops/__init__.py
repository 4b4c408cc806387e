"""The ONNX operators the importer maps, one operator family per module, each handler
registered by op_type with the importer's `_handles` (client/onnx_import/importer.py), as
onnx's reference evaluator registers its operators. Every mapping is exact: the OH_NN
operation that computes the operator's definition, or several composed where one does not
exist (each composition is the operator's own formula, evaluated in the input's type);
anything outside that raises OnnxImportError naming the node and why.

The families: `elementwise` (Identity, the unary activations, Clip, HardSigmoid, the binary
arithmetic, Max / Min, Where, Cast), `arithmetic` (Mod, Sum, Mean, Xor, IsNaN, IsInf, Sign),
`activations` (Elu, Selu, Celu, Softplus, Softsign, ThresholdedRelu, PRelu, Mish, Shrink),
`conversions` (CastLike), `spatial` (Conv, pooling, Resize, BatchNormalization), `linear`
(Gemm, MatMul), `qdq` (QuantizeLinear, DequantizeLinear), `recurrent` (LSTM),
`normalization` (Softmax, LogSoftmax, LayerNormalization, RMSNormalization,
LpNormalization), `reductions` (every Reduce*), `movement` (Transpose, Reshape, Flatten,
Squeeze, Unsqueeze, Concat, Split, Slice, Gather, Pad, Expand, Tile), `rearrange`
(DepthToSpace, SpaceToDepth), `scans` (CumSum), `selection` (ArgMax, ArgMin, Hardmax,
Trilu), and `functions` (the operators imported through their ONNX function body:
Attention, GroupNormalization, ...).

Importing this package registers them (nnrt.client.onnx_import's __init__ does)."""

from . import (activations, arithmetic, conversions, elementwise, functions,  # noqa: F401
               linear, movement, normalization, qdq, rearrange, recurrent, reductions,
               scans, selection, spatial)
