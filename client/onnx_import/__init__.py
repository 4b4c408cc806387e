"""ONNX import: an ONNX `ModelProto` (opset 13 and later) becomes a finished `nnrt.client.Model`,
built through the same Pythonic builder an application uses (`Model.input`, `Model.op`, ...).

    from nnrt.client.onnx_import import import_onnx
    model = import_onnx("resnet.onnx")                   # or a ModelProto, or the bytes
    with model.compile("cpu") as compiled:
        y = compiled.run(x)                              # x in the ONNX layout (NCHW)

Decisions:

* **Layouts: tracked per tensor, transposes only where a layout really changes.** Every
  tensor of the import is an nnrt operand together with a permutation `perm`: the operand
  holds the ONNX value transposed by `perm` (None: as ONNX has it). The OH_NN spatial
  operations (Conv2D, pooling, Resize, BatchNorm) take channels-last tensors, so their
  inputs are asked for in `perm` (0, 2, 3, 1) (NHWC) and their results stay NHWC; operations
  that do not care (element-wise unary and binary ones, Concat, Split, Softmax, reductions,
  Squeeze, Pad, Slice, Transpose itself) work on whatever layout their inputs have, with
  axes and constants permuted at import time. A tensor goes back to the ONNX layout only
  where an operation needs it (Reshape, MatMul, Gather, ...) and at the model's outputs:
  one Transpose, or a free Reshape when the permutation only moves dimensions of size 1
  (a global pool's [N, C, 1, 1]). An ONNX Transpose costs nothing: it only changes the
  recorded permutation. The model's inputs and outputs keep the ONNX layout and names the
  user feeds and reads (tensors are not tagged NCHW: every tensor the device sees is in the
  layout its operation expects).
* **Constants and shape subgraphs are folded at import time.** Initializers and Constant
  nodes stay numpy values until an operation needs them; a node whose inputs are all
  constant is evaluated with onnx's reference evaluator, and Shape / Size of a tensor with
  a static shape are constants — so Shape → Gather → Concat → Reshape chains become a
  constant Reshape. A Shape (Size) of a tensor with a dynamic dimension is the OH_NN Shape
  operation (then a Gather into the ONNX order / start:end, or a ReduceProd), and a
  Reshape to a shape computed at run time takes the inferred shape where at most one
  dimension is unknown, else the shape tensor itself.
* **LSTM** is one OH_NN LSTM layer: the gate blocks reordered from ONNX's i, o, f, c to
  OH_NN's i, f, g, o (W, R and both halves of B), direction "reverse" as a forward layer
  over the sequence reversed in time (a StridedSlice of stride -1, before and after),
  layout 1 (batch first) through the recorded permutations; Y [seq, batch, D*H] is
  reshaped to [seq, batch, D, H], ONNX's Y in layout (0, 2, 1, 3). Refused: activations
  other than Sigmoid/Tanh/Tanh, clip, input_forget, non-zero peepholes, sequence_lens
  shorter than the sequence, non-constant weights.
* **Shapes** come from onnx's shape inference (with data propagation) after `input_shapes`
  is applied; a dynamic dimension is -1 (None for the model's inputs).
* **Fusions** (exact rewrites only): BatchNormalization following a Conv with constant
  weights, whose output nothing else reads, is folded into the Conv's weights and bias
  (computed in float64, rounded once); a Relu (or Clip to [0, 6] / [0, inf)) that is the
  sole reader of a Conv, Gemm, MatMul, Add, Sub, Mul or Div becomes that operation's fused
  activation; a MatMul by a constant 2-D weight becomes a FullConnection, taking a
  following Add of a constant [N] bias; Gelu's erf form x * 0.5 * (1 + Erf(x / sqrt 2))
  (PyTorch's export) becomes one exact GELU.
* **Anything else that cannot be mapped exactly is refused** with `OnnxImportError` naming
  the node, the operator and why: an unknown operator or domain, an attribute the mapping
  does not read (checked for every node), a value outside what the OH_NN operation
  computes (e.g. AveragePool with count_include_pad and ceil_mode together, Resize cubic,
  Pad "edge") — never an approximation.
* **QDQ models** (QuantizeLinear / DequantizeLinear with constant parameters, int8 or
  uint8, per tensor or per channel): a DequantizeLinear is no operation by itself. A node
  whose non-constant inputs are all DequantizeLinear results and whose result (after a
  fused Relu) only a per-tensor QuantizeLinear reads becomes a quantised OH_NN operation
  (QUANT_TYPE_ALL: its tensors carry the parameters; the driver dequantises, computes in
  float and requantises, which is the QDQ arithmetic): Conv / Gemm / MatMul weights int8 or
  uint8 (per channel where the channels land on the OH_NN weight's axis 0), biases int32
  where their scale is input scale x weight scale (what the driver derives), else float.
  Elsewhere a QuantizeLinear is a QuantDTypeCast to the quantised tensor and a float
  reader of a DequantizeLinear gets one back to float — the same arithmetic, in float.
  Refused: non-constant parameters, other types (int16, int4, float8), blocked
  quantisation, a run-time int32 DequantizeLinear, QLinear* and DynamicQuantizeLinear.
* Not imported (refused with that reason): GRU/RNN, control flow (If/Loop/Scan), ONNX
  functions of non-default domains.

The package: `loading` (reading and describing a model, OnnxImportError), `values` (one
tensor of the import and the layout arithmetic), `importer` (the `_Importer` core and the
handler registry), `quant_plan` (which QDQ nodes become quantised operations), `entry`
(`import_onnx`), and `ops/`: every operator's mapping, one module per operator family
(`ops/__init__.py` lists which operators each holds).
"""

from __future__ import annotations

from ..api.model import READERS
# each family module registers its handlers with the importer when imported
from . import ops  # noqa: F401
from .entry import MIN_OPSET, import_onnx  # noqa: F401 - MIN_OPSET: the opset it reads
from .importer import _HANDLERS
from .loading import (IOInfo, OnnxImportError, as_fed, as_given,  # noqa: F401 - as_fed, as_given:
                      describe_io, load_onnx)  # the rank-0 convention, for sessions and backend
from .ops.functions import BY_FUNCTION_BODY

__all__ = [
    "SUPPORTED_OPERATORS",
    "IOInfo",
    "OnnxImportError",
    "describe_io",
    "import_onnx",
    "load_onnx",
]

# Model.load(".onnx") reads through import_onnx
READERS[".onnx"] = import_onnx

SUPPORTED_OPERATORS: tuple[str, ...] = tuple(sorted(
    {*_HANDLERS, *BY_FUNCTION_BODY, "Shape", "Size", "Constant", "ConstantOfShape", "Range"}))
