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
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import capi
from ..api import _OH_TYPES, Model, Operand

__all__ = [
    "SUPPORTED_OPERATORS",
    "IOInfo",
    "OnnxImportError",
    "describe_io",
    "import_onnx",
    "load_onnx",
]

log = logging.getLogger(__name__)

MIN_OPSET = 13
_NHWC = (0, 2, 3, 1)
_SQRT2 = math.sqrt(2.0)
_FUSE = {None: 0, "relu": 1, "relu6": 2}
_INT64_MAX = np.iinfo(np.int64).max


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


# -- the values of the import -----------------------------------------------------------------


@dataclass(eq=False)
class _Value:
    """One ONNX tensor during the import."""

    shape: tuple[int, ...]  # ONNX layout, -1 where unknown
    dtype: np.dtype
    const: np.ndarray | None = None  # a constant, in the ONNX layout
    operand: Operand | None = None  # the device tensor, transposed by `perm`
    perm: tuple[int, ...] | None = None  # operand = onnx_value.transpose(perm); None: identity
    views: dict[tuple[int, ...] | None, Operand] = field(default_factory=dict)
    quant: _Quant | None = None  # an int8/uint8 (int32) tensor's quantisation parameters
    deq: _Value | None = None  # a DequantizeLinear's result: the quantised tensor it reads
    # (a float value that has no operand until a float operation needs one)


@dataclass(frozen=True, eq=False)
class _Quant:
    """Quantisation parameters: r = (q - zero_point) * scale, per tensor (axis None) or per
    channel along the ONNX `axis`."""

    scale: np.ndarray  # float32, [] or [channels]
    zero_point: np.ndarray  # int64, the same shape
    axis: int | None
    dtype: np.dtype  # the quantised type: int8, uint8 (int32: a bias)

    def same(self, other: _Quant | None) -> bool:
        return other is not None and self.dtype == other.dtype and self.axis == other.axis \
            and np.array_equal(self.scale, other.scale) \
            and np.array_equal(self.zero_point, other.zero_point)

    def moved(self, axis: int | None) -> _Quant:
        return _Quant(self.scale, self.zero_point, axis, self.dtype)

    def real(self, q: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """DequantizeLinear of the constant q, as onnxruntime computes it (in float32)."""
        shape = [1] * q.ndim
        if self.axis is not None:
            shape[self.axis] = -1
        zero = self.zero_point.reshape(shape) if self.axis is not None else self.zero_point
        scale = self.scale.reshape(shape) if self.axis is not None else self.scale
        return ((q.astype(np.int64) - zero).astype(np.float32) * scale).astype(dtype)


class _Attrs:
    """A node's attributes; records which were read, so unread ones can be refused."""

    def __init__(self, node: Any) -> None:
        from onnx import helper

        self.node = node
        self.values = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        self.read: set[str] = set()

    def get(self, name: str, default: Any = None) -> Any:
        self.read.add(name)
        value = self.values.get(name, default)
        if isinstance(value, bytes):
            value = value.decode()
        return value

    def ints(self, name: str, default: Sequence[int] | None = None) -> list[int] | None:
        value = self.get(name)
        return list(default) if value is None and default is not None else (
            None if value is None else [int(v) for v in value])

    def unread(self) -> list[str]:
        return sorted(set(self.values) - self.read)


def _inverse(perm: Sequence[int]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _identity(perm: Sequence[int] | None) -> bool:
    return perm is None or tuple(perm) == tuple(range(len(perm)))


def _permuted(shape: Sequence[int], perm: Sequence[int] | None) -> tuple[int, ...]:
    return tuple(shape) if perm is None else tuple(shape[p] for p in perm)


def _moves_only_units(perm: Sequence[int], shape: Sequence[int]) -> bool:
    """Whether transposing by `perm` keeps the element order (it moves only size-1 axes)."""
    kept = [p for p in perm if shape[p] != 1]
    return kept == sorted(kept)


def _reshape_target(shape: Sequence[int]) -> list[int] | None:
    """A Reshape target for a shape of at most one unknown dimension (else None)."""
    if sum(d < 0 for d in shape) > 1:
        return None
    return [int(d) for d in shape]


# -- the importer -------------------------------------------------------------------------------

Handler = Callable[["_Importer", Any, _Attrs], None]
_HANDLERS: dict[str, Handler] = {}


def _handles(*op_types: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for op_type in op_types:
            _HANDLERS[op_type] = fn
        return fn
    return register


_REFUSED = {
    "GRU": "GRU has no OH_NN operation",
    "RNN": "RNN has no OH_NN operation",
    "QLinearConv": "QLinear operators are not imported (export QDQ: QuantizeLinear / "
                   "DequantizeLinear around float operators)",
    "QLinearMatMul": "QLinear operators are not imported (export QDQ: QuantizeLinear / "
                     "DequantizeLinear around float operators)",
    "DynamicQuantizeLinear": "dynamic quantisation (parameters computed at run time) has no "
                             "OH_NN form",
    "If": "control flow has no OH_NN operation",
    "Loop": "control flow has no OH_NN operation",
    "Scan": "control flow has no OH_NN operation",
}


# operators evaluated at import only (no OH_NN operation of their own): what must be constant
_FOLDED_ONLY = {"ConstantOfShape": "the shape (input 0)",
                "Range": "start, limit and delta"}


class _Importer:
    def __init__(self, proto: Any, input_shapes: Mapping[str, Sequence[int | None]] | None,
                 name_outputs: bool = True) -> None:
        self.proto = proto
        self.graph = proto.graph
        self.input_shapes = dict(input_shapes or {})
        self.name_outputs = name_outputs
        self.values: dict[str, _Value] = {}
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.types: dict[str, np.dtype] = {}
        self.skip: set[int] = set()  # ids of nodes fused into an earlier one
        self.consumers: dict[str, list[Any]] = {}
        self.outputs = {o.name for o in self.graph.output}
        self.m = Model()
        self.named: dict[int, str] = {}  # operand index -> the tensor name it was given
        self.plan: _QuantPlan | None = None  # the node being emitted as a quantised one

    # -- shapes and values ----------------------------------------------------------------------

    def infer(self) -> None:
        onnx = _onnx()
        from onnx import helper, shape_inference

        graph = self.graph
        initializers = {t.name for t in graph.initializer}
        for v in graph.input:
            if v.name in initializers or v.name not in self.input_shapes:
                continue
            dims = self.input_shapes[v.name]
            shape = v.type.tensor_type.shape
            if len(shape.dim) and len(shape.dim) != len(dims):
                raise OnnxImportError(f"input_shapes[{v.name!r}] has rank {len(dims)}, the "
                                      f"input has rank {len(shape.dim)}")
            del shape.dim[:]
            for d in dims:
                dim = shape.dim.add()
                if d is None or int(d) < 0:
                    dim.dim_param = "dynamic"
                else:
                    dim.dim_value = int(d)
        unknown = set(self.input_shapes) - {v.name for v in graph.input}
        if unknown:
            raise OnnxImportError(f"input_shapes names no input of the model: {sorted(unknown)}")
        # Recorded intermediate shapes may be stale (an input made dynamic afterwards):
        # inference starts again from the inputs.
        del graph.value_info[:]
        try:
            inferred = shape_inference.infer_shapes(self.proto, strict_mode=False,
                                                    data_prop=True)
        except Exception as exc:  # onnx's InferenceError
            raise OnnxImportError(f"shape inference failed: {exc}") from None
        for v in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
            t = v.type.tensor_type
            if not v.type.HasField("tensor_type"):
                continue
            if t.elem_type:
                self.types[v.name] = np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type))
            if t.HasField("shape"):
                # 0 stays 0 (an empty tensor, refused where it reaches an operation)
                self.shapes[v.name] = tuple(d.dim_value if d.HasField("dim_value") and
                                            d.dim_value >= 0 else -1 for d in t.shape.dim)
        for t in graph.initializer:
            array = onnx.numpy_helper.to_array(t)
            self.values[t.name] = _Value(tuple(array.shape), array.dtype, const=array)
        for node in graph.node:
            for name in node.input:
                if name:
                    self.consumers.setdefault(name, []).append(node)

    def shape(self, name: str, node: Any) -> tuple[int, ...]:
        if name in self.values:
            return self.values[name].shape
        if name not in self.shapes:
            raise OnnxImportError(f"the shape of {name!r} is unknown (shape inference could "
                                  f"not work it out; fix the inputs' shapes with input_shapes=)",
                                  node)
        return self.shapes[name]

    def dtype(self, name: str, node: Any) -> np.dtype:
        if name in self.values:
            return self.values[name].dtype
        if name not in self.types:
            raise OnnxImportError(f"the element type of {name!r} is unknown", node)
        return self.types[name]

    def get(self, node: Any, k: int) -> _Value | None:
        if k >= len(node.input) or not node.input[k]:
            return None
        name = node.input[k]
        if name not in self.values:
            raise OnnxImportError(f"input {name!r} is produced by no node before it", node)
        return self.values[name]

    def need(self, node: Any, k: int) -> _Value:
        v = self.get(node, k)
        if v is None:
            raise OnnxImportError(f"input {k} is missing", node)
        return v

    def const(self, node: Any, k: int, what: str) -> np.ndarray | None:
        v = self.get(node, k)
        if v is None:
            return None
        if v.const is None:
            raise OnnxImportError(f"{what} (input {k}) must be a constant (or computable "
                                  f"from constants and static shapes)", node)
        return v.const

    def run_time_shape(self, out: str, shape: Sequence[int]) -> None:
        """`out`'s shape where a parameter fed at run time decides it: -1 in the dimensions
        the parameter sets (never the shape the graph declares: the device works it out at
        each run)."""
        self.shapes[out] = tuple(int(d) for d in shape)

    def sole_consumer(self, name: str) -> Any | None:
        users = self.consumers.get(name, [])
        if name in self.outputs or len(users) != 1 or id(users[0]) in self.skip:
            return None
        return users[0]

    # -- operands in a layout -----------------------------------------------------------------

    def view(self, v: _Value, perm: tuple[int, ...] | None = None) -> Operand:
        """v's operand holding the ONNX value transposed by `perm` (None: the ONNX layout).
        A DequantizeLinear's result is, for a quantised node, the quantised tensor it reads;
        for any other reader, that tensor converted to float (one QuantDTypeCast)."""
        if perm is not None and _identity(perm):
            perm = None
        if v.deq is not None and v.const is None:
            if self.plan is not None:
                return self.view(v.deq, perm)
            if v.operand is None:
                self.dequantised(v)
        if perm in v.views:
            return v.views[perm]
        if v.const is not None:
            if v.const.size == 0:
                raise OnnxImportError(f"an empty constant of shape {list(v.const.shape)} (a "
                                      f"dimension of size 0 has no OH_NN form)")
            data = v.const if perm is None else np.ascontiguousarray(v.const.transpose(perm))
            operand = self.m.constant(data)
        elif (v.perm or None) == perm:
            operand = v.operand
        else:
            src = v.perm if not _identity(v.perm) else tuple(range(len(v.shape)))
            dst = perm if perm is not None else tuple(range(len(v.shape)))
            step = tuple(_inverse(src)[d] for d in dst)  # operand.transpose(step) = target
            target = _permuted(v.shape, perm)
            phys = _permuted(v.shape, v.perm)
            reshape = _reshape_target(target)
            if _moves_only_units(step, phys) and reshape is not None:
                operand = self.m.op("RESHAPE", v.operand, np.asarray(reshape, np.int64),
                                    shape=target)
            else:
                operand = self.m.op("TRANSPOSE", v.operand, np.asarray(step, np.int64),
                                    shape=target)
            if v.quant is not None:  # moved data keeps its parameters
                self.set_quant(operand, v.quant)
        v.views[perm] = operand
        return operand

    # -- quantised tensors (QDQ) ----------------------------------------------------------------

    def set_quant(self, operand: Operand, q: _Quant) -> None:
        """The tensor's quantisation parameters (OH_NNModel_SetTensorQuantParams)."""
        scales = [float(v) for v in q.scale.reshape(-1)]
        zero_points = [int(v) for v in q.zero_point.reshape(-1)]
        n = len(scales)
        params = capi.OH_NNQuantParam_Create()
        try:
            codes = [capi.OH_NNQuantParam_SetScales(params, scales, n),
                     capi.OH_NNQuantParam_SetZeroPoints(params, zero_points, n),
                     capi.OH_NNQuantParam_SetNumBits(params, [8] * n, n),
                     capi.OH_NNModel_SetTensorQuantParams(self.m.handle, operand.index, params)]
        finally:
            capi.OH_NNQuantParam_Destroy(params)
        if any(codes):
            raise OnnxImportError(f"the quantisation parameters of a tensor were refused "
                                  f"(codes {codes})")

    def mark_quantised(self, result: Operand) -> None:
        """The operation that made `result` computes quantised (QUANT_TYPE_ALL), as the C API
        decides when its first output has quantisation parameters before AddOperation: the
        builder adds the output and the operation in one call, so the parameters come after
        and the decision is made again here."""
        from nnrt.protos import hdi_types_pb2 as ht

        handle = self.m.handle
        with handle.lock:
            operation = handle.operations[-1]
            if operation.outputs[0] != result.index or not operation.spec.quant_from_first_output:
                raise OnnxImportError(f"internal: {operation.spec.name} cannot be quantised")
            operation.quant_type = ht.QUANT_TYPE_ALL

    def dequantised(self, v: _Value) -> None:
        """A DequantizeLinear's result as a float operand: a QuantDTypeCast of the quantised
        tensor (with the tensor's parameters: r = (q - zeroPoint) * scale)."""
        src = v.deq
        operand = self.view(src, src.perm)
        q = src.quant
        axis = 0 if q.axis is None else _physical_axis(q.axis, src.perm)
        result = self.m.op("QUANT_DTYPE_CAST", operand, shape=operand.shape, dtype=v.dtype,
                           srcT=int(_OH_TYPES[src.dtype]), dstT=int(_OH_TYPES[v.dtype]),
                           axis=axis)
        v.operand, v.perm = result, src.perm
        v.views[v.perm] = result

    def quant_plan(self, node: Any) -> _QuantPlan | None:
        """Whether `node` becomes a quantised OH_NN operation: its non-constant inputs are all
        DequantizeLinear results (per tensor), its result (after a fused Relu) is read only by
        a QuantizeLinear (per tensor, int8 / uint8), and its mapping is one operation that
        the C API quantises. Else it computes in float between conversions (also exact)."""
        check = _QUANTISABLE.get(node.op_type)
        if check is None:
            return None
        data = [self.values.get(n) for n in node.input if n]
        if any(v is None for v in data):
            return None
        live = [v for v in data if v.const is None]
        if not live or any(v.deq is None or v.deq.quant.axis is not None for v in live):
            return None
        out = node.output[0]
        if node.op_type in _FUSES_ACTIVATION:
            out = self.peek_activation(out)
        q_node = self.sole_consumer(out)
        if q_node is None or q_node.op_type != "QuantizeLinear" or q_node.input[0] != out:
            return None
        try:
            q = _qparams(self, q_node, _Attrs(q_node), len(self.shape(out, node)), True)
        except OnnxImportError:
            return None  # refused when the QuantizeLinear itself is imported
        if q.axis is not None or not check(self, node, _Attrs(node)):
            return None
        return _QuantPlan(out, q_node, q)

    def weight(self, v: _Value, perm: tuple[int, ...] | None = None) -> Operand:
        """A constant weight transposed by `perm`: quantised (int8 / uint8 with its
        parameters, per channel where the channels end up on axis 0) in a quantised node
        whose weight is a DequantizeLinear of a constant, else float."""
        src = v.deq
        if self.plan is not None and src is not None and src.const is not None and \
                src.quant.dtype.itemsize == 1:
            q = src.quant
            axis = None if q.axis is None else (q.axis if perm is None else perm.index(q.axis))
            if axis in (None, 0):
                data = src.const if perm is None else src.const.transpose(perm)
                operand = self.m.constant(np.ascontiguousarray(data))
                self.set_quant(operand, q.moved(axis))
                return operand
        data = v.const if perm is None else v.const.transpose(perm)
        return self.m.constant(np.ascontiguousarray(data))

    def bias(self, b: _Value | None, values: np.ndarray, x: _Value, w: Operand) -> Operand:
        """A constant bias: in a quantised node with a quantised weight, the int32 bias of
        a DequantizeLinear whose scale is input scale x weight scale and zero point 0 (what
        the OH_NN driver derives for an INT32 bias), else the float values."""
        src = None if b is None else b.deq
        quantised_weight = bool(self.m.handle.tensors[w.index].quant)
        if self.plan is not None and src is not None and src.const is not None and \
                quantised_weight and src.quant.dtype == np.int32 and x.deq is not None and \
                src.const.shape == values.shape and not np.any(src.quant.zero_point):
            w_scales = np.asarray([s for _, _, s in self.m.handle.tensors[w.index].quant],
                                  np.float64)
            derived = (np.float64(x.deq.quant.scale) * w_scales).astype(np.float32)
            if np.array_equal(np.broadcast_to(derived, values.shape),
                              np.broadcast_to(src.quant.scale, values.shape)):
                return self.m.constant(np.ascontiguousarray(src.const.astype(np.int32)))
        return self.m.constant(np.ascontiguousarray(values))

    def peek_activation(self, out: str) -> str:
        """The name a fused Relu / Clip would give the result (fused_activation, no effect)."""
        skip = set(self.skip)
        _, name = self.fused_activation(out)
        self.skip = skip
        return name

    def put(self, name: str, operand: Operand, perm: tuple[int, ...] | None, node: Any,
            dtype: np.dtype | None = None) -> None:
        shape = self.shapes.get(name)
        if shape is None:  # not inferred: the operand's, back in the ONNX layout
            shape = _permuted(operand.shape, None if perm is None else _inverse(perm))
        if perm is not None and _identity(perm):
            perm = None
        v = _Value(shape, dtype if dtype is not None else operand.dtype, operand=operand,
                   perm=perm)
        v.views[perm] = operand
        self.values[name] = v

    def names(self, out: str, perm: tuple[int, ...] | None) -> list[str] | None:
        """The tensor name for a result that is a graph output and already in ONNX layout."""
        if self.name_outputs and out in self.outputs and _identity(perm):
            return [out]
        return None

    def op(self, node: Any, op_type: str, inputs: Sequence[Any], out: str,
           perm: tuple[int, ...] | None = None, *, dtype: np.dtype | None = None,
           **params: Any) -> Operand:
        """One OH_NN operation whose result is the ONNX tensor `out` held in layout `perm`."""
        shape = _permuted(self.shape(out, node), perm)
        if 0 in shape:
            raise OnnxImportError(f"result {out!r} of shape {list(self.shape(out, node))}: an "
                                  f"empty tensor (a dimension of size 0) has no OH_NN form",
                                  node)
        out_dtype = dtype if dtype is not None else self.dtype(out, node)
        plan = self.plan
        if plan is not None:  # the quantised result is the QuantizeLinear's
            if out != plan.out:
                raise OnnxImportError(f"internal: a quantised {op_type} ends in {out!r}, not "
                                      f"{plan.out!r}", node)
            self.skip.add(id(plan.q_node))
            out, out_dtype = plan.q_node.output[0], plan.quant.dtype
        try:
            result = self.m.op(op_type, *inputs, shape=shape, dtype=out_dtype,
                               names=self.names(out, perm), **params)
        except Exception as exc:  # NNRtError, TypeError: what the builder refused
            raise OnnxImportError(f"the OH_NN {op_type} operation was refused: {exc}",
                                  node) from None
        if self.names(out, perm):
            self.named[result.index] = out
        self.put(out, result, perm, node, out_dtype)
        if plan is not None:
            self.set_quant(result, plan.quant)
            self.mark_quantised(result)
            self.values[out].quant = plan.quant
            self.plan = None  # the inputs of anything after it are float again
        return result

    def alias(self, name: str, v: _Value) -> None:
        self.values[name] = v

    # -- fusion helpers -------------------------------------------------------------------------

    def fused_activation(self, out: str) -> tuple[str | None, str]:
        """("relu" / "relu6" / None, the ONNX name the result then has)."""
        user = self.sole_consumer(out)
        if user is None or user.domain not in ("", "ai.onnx"):
            return None, out
        kind = None
        if user.op_type == "Relu":
            kind = "relu"
        elif user.op_type == "Clip" and user.input[0] == out and not user.attribute:
            low = self._maybe_const(user, 1)
            high = self._maybe_const(user, 2)
            if low is not False and high is not False:
                lo = None if low is None else float(np.asarray(low).reshape(-1)[0])
                hi = None if high is None else float(np.asarray(high).reshape(-1)[0])
                if lo == 0.0 and hi == 6.0:
                    kind = "relu6"
                elif lo == 0.0 and (hi is None or hi == math.inf):
                    kind = "relu"
        if kind is None:
            return None, out
        self.skip.add(id(user))
        return kind, user.output[0]

    def _maybe_const(self, node: Any, k: int) -> np.ndarray | None | bool:
        """A constant input, None when absent, False when it is not constant."""
        if k >= len(node.input) or not node.input[k]:
            return None
        v = self.values.get(node.input[k])
        return False if v is None or v.const is None else v.const

    # -- the walk -------------------------------------------------------------------------------

    def run(self) -> Model:
        self.infer()
        initializers = {t.name for t in self.graph.initializer}
        graph_inputs = [v for v in self.graph.input if v.name not in initializers]
        if not graph_inputs:
            raise OnnxImportError("the model has no inputs (an OH_NN model computes from at "
                                  "least one input; this one's outputs are constants)")
        for v in graph_inputs:
            t = v.type.tensor_type
            dtype = self.types.get(v.name)
            if v.type.WhichOneof("value") != "tensor_type" or dtype is None:
                raise OnnxImportError(f"input {v.name!r} is not a typed tensor (sequences, "
                                      f"optionals and maps have no OH_NN form)")
            if not t.HasField("shape"):
                raise OnnxImportError(f"input {v.name!r} has no shape (give its rank with "
                                      f"input_shapes=)")
            if dtype not in _OH_TYPES:
                raise OnnxImportError(f"input {v.name!r}: element type {dtype} has no "
                                      f"OH_NN data type")
            shape = self.shapes[v.name]
            if 0 in shape:
                raise OnnxImportError(f"input {v.name!r} of shape {list(shape)}: an empty "
                                      f"tensor (a dimension of size 0) has no OH_NN form")
            # rank 0: OH_NN tensors have a shape, so the model takes [1]; the value stays
            # rank 0 for ONNX's shapes and broadcasting ([1] broadcasts as a scalar does)
            operand = self.m.input([None if d < 0 else d for d in shape] if shape else [1],
                                   dtype, name=v.name)
            self.values[v.name] = _Value(shape, dtype, operand=operand, views={None: operand})
        for node in self.graph.node:
            if id(node) in self.skip:
                continue
            self.node(node)
        outs = []
        named: set[int] = set()
        for o in self.graph.output:
            v = self.values.get(o.name)
            if v is None:
                raise OnnxImportError(f"output {o.name!r} is produced by no node")
            if v.const is not None and v.const.size == 0:
                raise OnnxImportError(f"output {o.name!r} is an empty constant (a dimension "
                                      f"of size 0 has no OH_NN form)")
            operand = self.view(v) if v.const is None else self.m.constant(v.const)
            if not operand.shape or (self.name_outputs and (
                    operand.index in named or v.const is not None or
                    not self._named(operand, o.name))):
                # rank 0: [1] (an OH_NN tensor has a shape; InferenceSession gives () back)
                target = [1] if not operand.shape else _reshape_target(operand.shape)
                names = [o.name] if self.name_outputs else None
                if target is None:  # several dynamic dimensions: an identity Transpose
                    operand = self.m.op("TRANSPOSE", operand,
                                        np.arange(len(operand.shape), dtype=np.int64),
                                        shape=operand.shape, names=names)
                else:
                    operand = self.m.op("RESHAPE", operand, np.asarray(target, np.int64),
                                        shape=tuple(target), names=names)
            named.add(operand.index)
            outs.append(operand)
        self.m.outputs(*outs)
        return self.m

    def _named(self, operand: Operand, name: str) -> bool:
        return self.named.get(operand.index) == name

    def node(self, node: Any) -> None:
        if node.domain not in ("", "ai.onnx"):
            raise OnnxImportError(f"operator domain {node.domain!r} is not supported "
                                  f"(only the default ONNX domain)", node)
        if node.op_type in _REFUSED:
            raise OnnxImportError(_REFUSED[node.op_type], node)
        attrs = _Attrs(node)
        if self.fold(node, attrs):
            return
        handler = _HANDLERS.get(node.op_type)
        if handler is None and node.op_type in _FOLDED_ONLY:
            raise OnnxImportError(f"{_FOLDED_ONLY[node.op_type]} must be constants (or "
                                  f"computable from constants and static shapes): it is "
                                  f"evaluated at import", node)
        if handler is None:
            raise OnnxImportError(f"operator {node.op_type} is not supported by the nnrt "
                                  f"importer (see SUPPORTED_OPERATORS)", node)
        self.plan = self.quant_plan(node)
        try:
            handler(self, node, attrs)
            if self.plan is not None:
                raise OnnxImportError("internal: the quantised operation was not emitted", node)
        except OnnxImportError as exc:
            if exc.node_name or exc.op_type:
                raise
            raise OnnxImportError(exc.reason, node) from None  # said of the node it stopped
        finally:
            self.plan = None
        unread = attrs.unread()
        if unread:
            raise OnnxImportError(f"attribute(s) {unread} are not supported", node)

    # -- constant folding ---------------------------------------------------------------------

    def dynamic_shape(self, node: Any, attrs: _Attrs, v: _Value) -> None:
        """Shape / Size of a tensor with a dynamic dimension: the OH_NN Shape operation
        (then a Gather of the dimensions ONNX asks for, in the ONNX order, where the layout
        or start / end differ; Size: their ReduceProd)."""
        rank = len(v.shape)
        operand = self.view(v, v.perm)
        dims = self.m.op("SHAPE", operand, shape=(rank,), dtype=np.int64)
        if node.op_type == "Size":
            self.op(node, "REDUCE_PROD", [dims, np.asarray([0], np.int64)], node.output[0],
                    None, dtype=np.dtype(np.int64), keepDims=False)
            return
        start, end = attrs.get("start", 0), attrs.get("end", None)
        wanted = list(range(rank))[slice(start, end)]
        phys = [_physical_axis(i, v.perm) for i in wanted]
        if phys == list(range(rank)):
            self.put(node.output[0], dims, None, node, np.dtype(np.int64))
            return
        self.op(node, "GATHER", [dims, np.asarray(phys, np.int64), np.asarray([0], np.int64)],
                node.output[0], None, dtype=np.dtype(np.int64))

    def fold(self, node: Any, attrs: _Attrs) -> bool:
        """Evaluate a node at import time when its result does not depend on the inputs."""
        if node.op_type in ("Shape", "Size"):
            v = self.need(node, 0)
            if any(d < 0 for d in v.shape):
                self.dynamic_shape(node, attrs, v)
                return True
            if node.op_type == "Size":
                self.values[node.output[0]] = _Value((), np.dtype(np.int64),
                                                     const=np.asarray(math.prod(v.shape),
                                                                      np.int64))
                return True
            start, end = attrs.get("start", 0), attrs.get("end", None)
            dims = np.asarray(v.shape, np.int64)[slice(start, end)]
            self.values[node.output[0]] = _Value(tuple(dims.shape), dims.dtype, const=dims)
            return True
        if node.op_type in ("RandomNormal", "RandomUniform", "RandomNormalLike",
                            "RandomUniformLike", "Multinomial", "Bernoulli"):
            return False
        inputs = [self.values.get(n) if n else None for n in node.input]
        if any(n and (v is None or v.const is None) for n, v in zip(node.input, inputs)):
            return False
        if node.op_type in _REFUSED or node.op_type in ("If", "Loop", "Scan",
                                                        "DequantizeLinear"):
            return False  # a dequantised constant remembers its quantised form
        from onnx import helper
        from onnx.reference import ReferenceEvaluator

        names = [n for n in node.input if n]
        feeds = {n: self.values[n].const for n in names}
        graph = helper.make_graph(
            [node], "fold",
            [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
             for n, a in feeds.items()],
            [helper.make_tensor_value_info(o, 0, None) for o in node.output if o])
        opsets = [helper.make_opsetid(o.domain, o.version) for o in self.proto.opset_import]
        try:
            results = ReferenceEvaluator(helper.make_model(graph, opset_imports=opsets)).run(
                None, feeds)
        except Exception as exc:
            raise OnnxImportError(f"could not evaluate this constant node: {exc}", node) \
                from None
        for name, value in zip([o for o in node.output if o], results):
            array = np.asarray(value)
            self.values[name] = _Value(tuple(array.shape), array.dtype, const=array)
        return True


# -- operator handlers ---------------------------------------------------------------------------


def _axis(axis: int, rank: int, node: Any) -> int:
    if not -rank <= axis < max(rank, 1):
        raise OnnxImportError(f"axis {axis} is outside a rank-{rank} tensor", node)
    return axis % rank if rank else 0


def _physical_axis(axis: int, perm: tuple[int, ...] | None) -> int:
    return axis if perm is None else perm.index(axis)


@_handles("Identity", "Dropout")
def _identity_op(im: _Importer, node: Any, a: _Attrs) -> None:
    a.get("seed")
    if node.op_type == "Dropout":
        training = im._maybe_const(node, 2)
        if training is False or (training is not None and bool(np.asarray(training))):
            raise OnnxImportError("training mode (a non-constant or true training_mode) "
                                  "is not inference", node)
        if len(node.output) > 1 and node.output[1] and node.output[1] in im.consumers:
            raise OnnxImportError("the mask output is not computed", node)
    im.alias(node.output[0], im.need(node, 0))


# unary element-wise: same shape, layout-agnostic
_UNARY = {"Relu": "RELU", "Sigmoid": "SIGMOID", "Tanh": "TANH", "HardSwish": "HSWISH",
          "Erf": "ERF", "Sqrt": "SQRT", "Exp": "EXP", "Log": "LOG", "Abs": "ABS", "Neg": "NEG",
          "Reciprocal": "RECIPROCAL", "Floor": "FLOOR", "Ceil": "CEIL", "Round": "ROUND",
          "Sin": "SIN", "Cos": "COS", "Not": "LOGICAL_NOT"}


@_handles(*_UNARY)
def _unary(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    im.op(node, _UNARY[node.op_type], [im.view(x, x.perm)], node.output[0], x.perm)


@_handles("LeakyRelu")
def _leaky_relu(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    im.op(node, "LEAKY_RELU", [im.view(x, x.perm)], node.output[0], x.perm,
          alpha=float(a.get("alpha", 0.01)))


@_handles("Gelu")
def _gelu(im: _Importer, node: Any, a: _Attrs) -> None:
    approximate = a.get("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise OnnxImportError(f"approximate {approximate!r} is not 'none' or 'tanh'", node)
    x = im.need(node, 0)
    im.op(node, "GELU", [im.view(x, x.perm)], node.output[0], x.perm,
          approximate=approximate == "tanh")


@_handles("Clip")
def _clip(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    bounds = [im.get(node, 1), im.get(node, 2)]
    if any(v is not None and v.const is None for v in bounds):
        _clip_run_time(im, node, x, bounds)
        return
    low = im.const(node, 1, "min")
    high = im.const(node, 2, "max")
    lo = None if low is None else float(np.asarray(low).reshape(-1)[0])
    hi = None if high is None else float(np.asarray(high).reshape(-1)[0])
    operand = im.view(x, x.perm)
    if lo == 0.0 and hi == 6.0:
        im.op(node, "RELU6", [operand], node.output[0], x.perm)
    elif lo == 0.0 and hi is None and x.dtype.kind == "f":
        im.op(node, "RELU", [operand], node.output[0], x.perm)
    else:
        im.op(node, "CLIP", [operand], node.output[0], x.perm, min=lo, max=hi)


def _clip_run_time(im: _Importer, node: Any, x: _Value, bounds: list[_Value | None]) -> None:
    """Clip with bounds fed at run time: Maximum with min, then Minimum with max (ONNX's
    definition, min(max(x, min), max))."""
    shape = tuple(x.shape)
    steps = [(op, v) for op, v in zip(("MAXIMUM", "MINIMUM"), bounds) if v is not None]
    source = im.view(x)
    for k, (op_type, v) in enumerate(steps):
        if v.dtype != x.dtype or v.shape not in ((), (1,)):
            raise OnnxImportError(f"a bound of type {v.dtype} and shape {list(v.shape)} (a "
                                  f"scalar of the input's type)", node)
        bound = im.m.constant(v.const) if v.const is not None else im.view(v)
        if k == len(steps) - 1:
            im.op(node, op_type, [source, bound], node.output[0], None)
        else:
            source = im.m.op(op_type, source, bound, shape=shape)


@_handles("HardSigmoid")
def _hard_sigmoid(im: _Importer, node: Any, a: _Attrs) -> None:
    """max(0, min(1, alpha * x + beta)) as Mul, Add, Clip (exact, no approximation)."""
    x = im.need(node, 0)
    alpha, beta = float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))
    shape = _permuted(x.shape, x.perm)
    t = im.m.op("MUL", im.view(x, x.perm), np.asarray(alpha, x.dtype), shape=shape)
    t = im.m.op("ADD", t, np.asarray(beta, x.dtype), shape=shape)
    im.op(node, "CLIP", [t], node.output[0], x.perm, min=0.0, max=1.0)


_BINARY = {"Add": "ADD", "Sub": "SUB", "Mul": "MUL", "Div": "DIV", "Pow": "POW",
           "Max": "MAXIMUM", "Min": "MINIMUM", "Equal": "EQUAL", "Less": "LESS",
           "Greater": "GREATER", "LessOrEqual": "LESS_EQUAL", "GreaterOrEqual": "GREATER_EQUAL",
           "And": "LOGICAL_AND", "Or": "LOGICAL_OR"}
_FUSABLE = {"Add", "Sub", "Mul", "Div"}


def _common_perm(values: Sequence[_Value], rank: int) -> tuple[int, ...] | None:
    """The layout shared by every non-constant input of full rank (None: the ONNX one)."""
    perms = {v.perm for v in values if v.const is None}
    if len(perms) != 1:
        return None
    (perm,) = perms
    if perm is None or any(v.const is None and len(v.shape) != rank for v in values):
        return None
    return perm


def _operands_in(im: _Importer, values: Sequence[_Value], perm: tuple[int, ...] | None,
                 rank: int) -> list[Operand]:
    operands = []
    for v in values:
        if v.const is not None and perm is not None:
            c = v.const.reshape((1,) * (rank - v.const.ndim) + v.const.shape)
            operands.append(im.m.constant(np.ascontiguousarray(c.transpose(perm))))
        else:
            operands.append(im.view(v, perm))
    return operands


@_handles(*_BINARY)
def _binary(im: _Importer, node: Any, a: _Attrs) -> None:
    if node.op_type in ("Max", "Min") and len(node.input) != 2:
        _variadic(im, node, _BINARY[node.op_type])
        return
    x, y = im.need(node, 0), im.need(node, 1)
    out = node.output[0]
    if node.op_type == "Pow" and x.dtype.kind in "iu" and y.dtype.kind == "f" and not (
            y.const is not None and np.array_equal(y.const, np.round(y.const))):
        raise OnnxImportError(f"an integer base ({x.dtype}) with a {y.dtype} exponent (the "
                              f"OH_NN Pow computes in the base's type)", node)
    rank = len(im.shape(out, node))
    perm = _common_perm([x, y], rank)
    operands = _operands_in(im, [x, y], perm, rank)
    if node.op_type == "Pow":
        if y.dtype != x.dtype:
            operands[1] = im.m.constant(np.asarray(y.const, x.dtype)) if y.const is not None \
                else operands[1]
        im.op(node, "POW", operands, out, perm, scale=1.0, shift=0.0)
        return
    if x.dtype != y.dtype:
        raise OnnxImportError(f"operands of different types ({x.dtype}, {y.dtype})", node)
    if node.op_type in _FUSABLE:
        if _gelu_pattern(im, node, x, y):
            return
        activation, out = im.fused_activation(out)
        im.op(node, _BINARY[node.op_type], operands, out, perm,
              activationType=_FUSE[activation])
    else:
        im.op(node, _BINARY[node.op_type], operands, out, perm)


def _variadic(im: _Importer, node: Any, op_type: str) -> None:
    """Max / Min / Sum / Mean of any number of inputs: one input is itself, more a chain of
    the binary operation, left to right (numpy broadcasting at each step)."""
    values = [im.need(node, k) for k in range(len(node.input))]
    if not values:
        raise OnnxImportError("no inputs", node)
    if any(v.dtype != values[0].dtype for v in values):
        raise OnnxImportError(f"inputs of different types {[str(v.dtype) for v in values]}",
                              node)
    out = node.output[0]
    out_shape = im.shape(out, node)
    if len(values) == 1:
        if tuple(values[0].shape) != tuple(out_shape):
            raise OnnxImportError("internal: one input of another shape", node)
        im.alias(out, values[0])
        return
    acc = im.view(values[0])
    shape = tuple(values[0].shape)
    for k, v in enumerate(values[1:], 1):
        shape = tuple(np.broadcast_shapes(shape, tuple(v.shape))) if -1 not in shape and \
            -1 not in v.shape else out_shape
        if k == len(values) - 1:
            im.op(node, op_type, [acc, im.view(v)], out, None)
        else:
            acc = im.m.op(op_type, acc, im.view(v), shape=shape, dtype=values[0].dtype)


def _scalar(v: _Value | None) -> float | None:
    if v is None or v.const is None or v.const.size != 1:
        return None
    return float(v.const.reshape(-1)[0])


def _gelu_pattern(im: _Importer, node: Any, x: _Value, y: _Value) -> bool:
    """x / sqrt2 (or x * 1/sqrt2) → Erf → + 1 → * x → * 0.5 (the last two in either order,
    or * 0.5 first): PyTorch's export of the exact GELU. One GELU node when it matches."""
    if node.op_type not in ("Div", "Mul"):
        return False
    c = _scalar(y)
    if c is None or x.const is not None:
        return False
    if not (node.op_type == "Div" and abs(c - _SQRT2) < 1e-6 or
            node.op_type == "Mul" and abs(c - 1 / _SQRT2) < 1e-6):
        return False
    source = node.input[0]
    erf = im.sole_consumer(node.output[0])
    if erf is None or erf.op_type != "Erf":
        return False
    add = im.sole_consumer(erf.output[0])
    if add is None or add.op_type != "Add":
        return False
    one = im.values.get(add.input[1] if add.input[0] == erf.output[0] else add.input[0])
    if _scalar(one) != 1.0:
        return False
    first = im.sole_consumer(add.output[0])
    if first is None or first.op_type != "Mul":
        return False
    other = first.input[1] if first.input[0] == add.output[0] else first.input[0]
    chain = [erf, add, first]
    if other == source:  # (1 + erf) * x, then * 0.5
        second = im.sole_consumer(first.output[0])
        if second is None or second.op_type != "Mul":
            return False
        half = second.input[1] if second.input[0] == first.output[0] else second.input[0]
        if _scalar(im.values.get(half)) != 0.5:
            return False
        chain.append(second)
    elif _scalar(im.values.get(other)) == 0.5:  # (1 + erf) * 0.5, then * x
        second = im.sole_consumer(first.output[0])
        if second is None or second.op_type != "Mul":
            return False
        xs = second.input[1] if second.input[0] == first.output[0] else second.input[0]
        if xs != source:
            return False
        chain.append(second)
    else:
        return False
    for n in chain:
        im.skip.add(id(n))
    im.op(node, "GELU", [im.view(x, x.perm)], chain[-1].output[0], x.perm, approximate=False)
    return True


@_handles("Where")
def _where(im: _Importer, node: Any, a: _Attrs) -> None:
    values = [im.need(node, k) for k in range(3)]
    out = node.output[0]
    rank = len(im.shape(out, node))
    perm = _common_perm(values, rank)
    im.op(node, "WHERE", _operands_in(im, values, perm, rank), out, perm)


@_handles("Cast")
def _cast(im: _Importer, node: Any, a: _Attrs) -> None:
    from onnx import helper

    a.get("saturate")
    target = np.dtype(helper.tensor_dtype_to_np_dtype(int(a.get("to"))))
    if target not in _OH_TYPES:
        raise OnnxImportError(f"target type {target} has no OH_NN data type", node)
    x = im.need(node, 0)
    if target == x.dtype:
        im.alias(node.output[0], x)
        return
    im.op(node, "CAST", [im.view(x, x.perm), np.asarray([int(_OH_TYPES[target])], np.int32)],
          node.output[0], x.perm, dtype=target)


# -- convolution, pooling, resize, batch norm (NHWC) ----------------------------------------------


def _spatial_pads(im: _Importer, node: Any, a: _Attrs, hw: Sequence[int],
                  kernel: Sequence[int], strides: Sequence[int],
                  dilations: Sequence[int]) -> list[int] | None:
    """[top, bottom, left, right], or None for the device's SAME (TensorFlow's SAME_UPPER)."""
    auto = a.get("auto_pad", "NOTSET")
    pads = a.ints("pads")
    if auto == "NOTSET":
        pads = pads if pads is not None else [0, 0, 0, 0]
        if len(pads) != 4:
            raise OnnxImportError(f"pads {pads} do not have 4 entries (2-D)", node)
        if min(pads) < 0:
            raise OnnxImportError(f"negative pads {pads}", node)
        return [pads[0], pads[2], pads[1], pads[3]]
    if auto == "VALID":
        return [0, 0, 0, 0]
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise OnnxImportError(f"auto_pad {auto!r} is not NOTSET, VALID, SAME_UPPER or "
                              f"SAME_LOWER", node)
    if any(d < 0 for d in hw):
        if auto == "SAME_UPPER":
            return None
        raise OnnxImportError("auto_pad SAME_LOWER on a dynamic spatial size", node)
    out = []
    for size, k, s, d in zip(hw, kernel, strides, dilations):
        total = max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        out.extend([small, large] if auto == "SAME_UPPER" else [large, small])
    return out


def _conv_params(pads: list[int] | None, key: str = "padList") -> dict[str, Any]:
    return {"padMode": 0} if pads is None else {key: pads}


@_handles("Conv")
def _conv(im: _Importer, node: Any, a: _Attrs) -> None:
    x, w = im.need(node, 0), im.need(node, 1)
    b = im.get(node, 2)
    if len(x.shape) != 4:
        raise OnnxImportError(f"only 2-D convolutions are imported (input rank "
                              f"{len(x.shape)}, not 4)", node)
    if len(w.shape) != 4:
        raise OnnxImportError(f"weight rank {len(w.shape)}, not 4", node)
    out_c, group_c, kh, kw = w.shape
    group = int(a.get("group", 1))
    kernel = a.ints("kernel_shape", [kh, kw])
    if list(kernel) != [kh, kw]:
        raise OnnxImportError(f"kernel_shape {kernel} disagrees with the weight's {[kh, kw]}",
                              node)
    strides = a.ints("strides", [1, 1])
    dilations = a.ints("dilations", [1, 1])
    pads = _spatial_pads(im, node, a, x.shape[2:], kernel, strides, dilations)
    out = node.output[0]
    weight = w.const
    bias = b.const if b is not None else None
    # BatchNormalization reading only this Conv: folded into its weight and bias.
    bn = im.sole_consumer(out)
    if bn is not None and bn.op_type == "BatchNormalization" and bn.input[0] == out \
            and im.plan is None \
            and weight is not None and (b is None or bias is not None):
        bn_attrs = _Attrs(bn)
        params = [im._maybe_const(bn, k) for k in range(1, 5)]
        if all(isinstance(p, np.ndarray) for p in params) and \
                not bn_attrs.get("training_mode", 0) and len([o for o in bn.output if o]) == 1:
            eps = float(bn_attrs.get("epsilon", 1e-5))
            bn_attrs.get("momentum")
            if not bn_attrs.unread():
                scale, shift, mean, var = (np.asarray(p, np.float64) for p in params)
                factor = scale / np.sqrt(var + eps)
                folded_bias = (np.zeros(out_c) if bias is None else bias.astype(np.float64))
                weight = (weight.astype(np.float64) * factor[:, None, None, None]).astype(
                    w.dtype)
                bias = ((folded_bias - mean) * factor + shift).astype(w.dtype)
                im.skip.add(id(bn))
                out = bn.output[0]
    activation, out = im.fused_activation(out)
    if weight is not None and weight is w.const:
        w_op = im.weight(w, _NHWC)
    elif weight is not None:
        w_op = im.m.constant(np.ascontiguousarray(weight.transpose(0, 2, 3, 1)))
    else:
        w_op = im.view(w, _NHWC)
    if bias is not None:
        b_op = im.bias(b if b is not None and bias is b.const else None, bias, x, w_op)
    elif b is not None:
        b_op = im.view(b)
    else:
        b_op = im.m.constant(np.zeros(out_c, x.dtype))
    if x.shape[1] >= 0 and x.shape[1] != group * group_c:
        raise OnnxImportError(f"input has {x.shape[1]} channels, weight and group {group} "
                              f"need {group * group_c}", node)
    im.op(node, "CONV2D", [im.view(x, _NHWC), w_op, b_op], out, _NHWC, stride=strides,
          dilation=dilations, group=group, activationType=_FUSE[activation],
          **_conv_params(pads))


def _pooled_input(im: _Importer, node: Any) -> Any:
    """Input 0 of a pooling node, which must be 4-D (2-D pooling)."""
    x = im.need(node, 0)
    if len(x.shape) != 4:
        raise OnnxImportError(f"only 2-D pooling is imported (input rank {len(x.shape)})",
                              node)
    return x


@_handles("MaxPool", "AveragePool")
def _pool(im: _Importer, node: Any, a: _Attrs) -> None:
    x = _pooled_input(im, node)
    if len([o for o in node.output if o]) > 1:
        raise OnnxImportError("the Indices output is not computed", node)
    kernel = a.ints("kernel_shape")
    if kernel is None or len(kernel) != 2:
        raise OnnxImportError(f"kernel_shape {kernel} is not 2-D", node)
    strides = a.ints("strides", [1, 1])
    dilations = a.ints("dilations", [1, 1])
    if dilations != [1, 1]:
        raise OnnxImportError(f"dilations {dilations}: pooling has no dilation in OH_NN", node)
    ceil = int(a.get("ceil_mode", 0))
    if node.op_type == "MaxPool":
        a.get("storage_order")  # only shapes the Indices output, refused above
    pads = _spatial_pads(im, node, a, x.shape[2:], kernel, strides, dilations)
    source = im.view(x, _NHWC)
    if node.op_type == "AveragePool" and int(a.get("count_include_pad", 0)) and \
            (pads is None or any(pads)):
        if ceil:
            raise OnnxImportError("count_include_pad with ceil_mode: windows past the "
                                  "padding have no exact OH_NN form", node)
        if pads is None:
            raise OnnxImportError("count_include_pad with auto_pad SAME on a dynamic size",
                                  node)
        # The padding counts: pad with zeros first, then pool without padding.
        padded = [x.shape[0], x.shape[2] + pads[0] + pads[1] if x.shape[2] >= 0 else -1,
                  x.shape[3] + pads[2] + pads[3] if x.shape[3] >= 0 else -1, x.shape[1]]
        source = im.m.op("PAD", source, np.asarray([[0, 0], pads[0:2], pads[2:4], [0, 0]],
                                                   np.int64),
                         constantValue=0.0, paddingMode=0, shape=padded)
        pads = [0, 0, 0, 0]
    if pads is not None and (max(pads[:2]) >= kernel[0] or max(pads[2:]) >= kernel[1]):
        raise OnnxImportError(f"pads {pads} reach a kernel's size {kernel}", node)
    op_type = "MAX_POOL" if node.op_type == "MaxPool" else "AVG_POOL"
    im.op(node, op_type, [source], node.output[0], _NHWC, kernelSize=kernel, strides=strides,
          roundMode=ceil, **_conv_params(pads, "pad"))


@_handles("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(im: _Importer, node: Any, a: _Attrs) -> None:
    x = _pooled_input(im, node)
    op_type = "AVG_POOL" if node.op_type == "GlobalAveragePool" else "MAX_POOL"
    im.op(node, op_type, [im.view(x, _NHWC)], node.output[0], _NHWC, kernelSize=[1, 1],
          strides=[1, 1], **{"global": True})


@_handles("BatchNormalization")
def _batch_norm(im: _Importer, node: Any, a: _Attrs) -> None:
    if int(a.get("training_mode", 0)) or len([o for o in node.output if o]) > 1:
        raise OnnxImportError("training_mode=1 (batch statistics, running mean / variance "
                              "outputs) is training, not inference: refused", node)
    a.get("momentum")
    x = im.need(node, 0)
    rank = len(x.shape)
    if rank < 2:
        raise OnnxImportError("input of rank < 2 has no channel axis", node)
    perm = (0, *range(2, rank), 1)  # channels last
    params = [im.view(im.need(node, k)) for k in range(1, 5)]
    im.op(node, "BATCH_NORM", [im.view(x, perm), *params], node.output[0], perm,
          epsilon=float(a.get("epsilon", 1e-5)))


@_handles("Resize")
def _resize(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    out = node.output[0]
    shape = x.shape
    out_shape = im.shape(out, node)
    if len(shape) != 4 or any(d < 0 for d in shape[2:]) or any(d < 0 for d in out_shape[2:]):
        raise OnnxImportError("only 4-D inputs with static spatial sizes are resized", node)
    if out_shape[:2] != shape[:2] and -1 not in (*shape[:2], *out_shape[:2]):
        raise OnnxImportError("only the spatial dimensions (2 and 3) are resized", node)
    if a.get("antialias", 0) and (out_shape[2] < shape[2] or out_shape[3] < shape[3]):
        raise OnnxImportError("antialias when downsampling is not computed", node)
    if a.ints("axes") not in (None, [2, 3], [-2, -1]):
        raise OnnxImportError(f"axes {a.ints('axes')} (only the spatial ones)", node)
    policy = a.get("keep_aspect_ratio_policy", "stretch")
    if policy != "stretch":
        raise OnnxImportError(f"keep_aspect_ratio_policy {policy!r}", node)
    scales = im.const(node, 2, "scales")
    if scales is not None and scales.size:
        scales = [float(s) for s in np.asarray(scales).reshape(-1)[-2:]]
        for size, s, o in zip(shape[2:], scales, out_shape[2:]):
            if size * s != o:
                raise OnnxImportError(f"scale {s} of a size {size} is not a whole output "
                                      f"size: the coordinates would differ", node)
    mode = a.get("mode", "nearest")
    transform = a.get("coordinate_transformation_mode", "half_pixel")
    a.get("cubic_coeff_a")
    a.get("extrapolation_value")
    exclude = int(a.get("exclude_outside", 0))
    nearest_mode = a.get("nearest_mode", "round_prefer_floor")
    h, w = out_shape[2], out_shape[3]
    if mode == "linear":
        codes = {"asymmetric": 0, "align_corners": 1, "pytorch_half_pixel": 2}
        if transform == "half_pixel" and h > 1 and w > 1:
            code = 2  # equal to pytorch_half_pixel when no output length is 1
        elif transform in codes:
            code = codes[transform]
        else:
            raise OnnxImportError(f"coordinate_transformation_mode {transform!r} with "
                                  f"linear mode", node)
        im.op(node, "RESIZE_BILINEAR", [im.view(x, _NHWC)], out, _NHWC, newHeight=h,
              newWidth=w, coordinateTransformMode=code, excludeOutside=exclude,
              preserveAspectRatio=False)
        return
    if mode != "nearest":
        raise OnnxImportError(f"mode {mode!r}: OH_NN's Resize is bilinear, or nearest "
                              f"upsampling by whole factors", node)
    fh, fw = h // shape[2], w // shape[3]
    exact = h == fh * shape[2] and w == fw * shape[3] and fh >= 1 and fw >= 1
    repeat = (transform == "asymmetric" and nearest_mode == "floor") or (
        transform in ("half_pixel", "pytorch_half_pixel") and
        nearest_mode in ("round_prefer_floor", "round_prefer_ceil"))
    if not (exact and repeat):
        raise OnnxImportError(f"nearest mode is imported for whole upsampling factors with "
                              f"asymmetric/floor or half_pixel/round_prefer_*, not "
                              f"{transform}/{nearest_mode} from {list(shape[2:])} to "
                              f"{[h, w]}", node)
    # Nearest upsampling by whole factors: each pixel repeated, [N, H, 1, W, 1, C] * ones.
    n, c = shape[0], shape[1]
    source = im.view(x, _NHWC)
    if n < 0 and c < 0:
        raise OnnxImportError("nearest resize with dynamic batch and channels", node)
    split = im.m.op("RESHAPE", source, np.asarray([n, shape[2], 1, shape[3], 1, c], np.int64),
                    shape=(n, shape[2], 1, shape[3], 1, c))
    ones = np.ones((1, 1, fh, 1, fw, 1), x.dtype)
    wide = im.m.op("MUL", split, ones, shape=(n, shape[2], fh, shape[3], fw, c))
    im.op(node, "RESHAPE", [wide, np.asarray([n, h, w, c], np.int64)], out, _NHWC)


# -- linear algebra -------------------------------------------------------------------------------


@_handles("Gemm")
def _gemm(im: _Importer, node: Any, a: _Attrs) -> None:
    x, wv = im.need(node, 0), im.need(node, 1)
    c = im.get(node, 2)
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    trans_a, trans_b = int(a.get("transA", 0)), int(a.get("transB", 0))
    out = node.output[0]
    shape = im.shape(out, node)
    x_op = im.view(x, (1, 0) if trans_a else None)
    bias = None
    if c is not None and c.const is not None and c.const.ndim <= 2 and \
            c.const.size in (1, shape[1]) and (c.const.ndim < 2 or c.const.shape[0] == 1):
        bias = np.ascontiguousarray(np.broadcast_to(
            c.const.reshape(-1) * np.asarray(beta, c.dtype), (shape[1],)).astype(c.dtype))
        c = None
    if c is None and wv.const is not None:
        if alpha != 1.0:
            weight = wv.const if trans_b else wv.const.T  # [N, K]
            weight = (weight * np.asarray(alpha, weight.dtype)).astype(weight.dtype)
            w_op = im.m.constant(np.ascontiguousarray(weight))
        else:
            w_op = im.weight(wv, None if trans_b else (1, 0))
        activation, out = im.fused_activation(out)
        inputs = [x_op, w_op]
        if bias is not None:
            given = im.get(node, 2)
            inputs.append(im.bias(given if beta == 1.0 and given.const.shape == bias.shape
                                  else None, bias, x, w_op))
        im.op(node, "FULL_CONNECTION", inputs, out, None, hasBias=bias is not None,
              activationType=_FUSE[activation])
        return
    # The general form: MatMul, then alpha, then beta * C.
    steps: list[tuple[str, list[Any], dict[str, Any]]] = [
        ("MATMUL", [x_op, im.view(wv)], {"transposeA": False, "transposeB": bool(trans_b)})]
    if alpha != 1.0:
        steps.append(("MUL", [np.asarray(alpha, x.dtype)], {}))
    if bias is not None:
        steps.append(("ADD", [bias], {}))
    if c is not None:
        term = im.view(c) if beta == 1.0 else im.m.op(
            "MUL", im.view(c), np.asarray(beta, c.dtype), shape=c.shape, dtype=c.dtype)
        steps.append(("ADD", [term], {}))
    result = None
    for k, (op_type, args, params) in enumerate(steps):
        inputs = args if result is None else [result, *args]
        if k == len(steps) - 1:
            im.op(node, op_type, inputs, out, None, **params)
        else:
            result = im.m.op(op_type, *inputs, shape=shape, dtype=x.dtype, **params)


@_handles("MatMul")
def _matmul(im: _Importer, node: Any, a: _Attrs) -> None:
    x, wv = im.need(node, 0), im.need(node, 1)
    out = node.output[0]
    if wv.const is not None and wv.const.ndim == 2 and len(x.shape) >= 2 and \
            x.dtype.kind == "f":
        # A constant 2-D weight: FullConnection over the last axis, taking an Add of a
        # constant [N] bias that only this MatMul feeds.
        n_cols = wv.const.shape[1]
        bias = None
        add = im.sole_consumer(out)
        if add is not None and add.op_type == "Add":
            other = add.input[1] if add.input[0] == out else add.input[0]
            ov = im.values.get(other)
            if ov is not None and ov.const is not None and ov.const.dtype == x.dtype and \
                    ov.const.shape in ((n_cols,), (1, n_cols)) and not add.attribute:
                bias = ov.const.reshape(-1)
                im.skip.add(id(add))
                out = add.output[0]
        activation, out = im.fused_activation(out)
        inputs = [im.view(x), im.weight(wv, (1, 0))]
        if bias is not None:
            inputs.append(im.m.constant(np.ascontiguousarray(bias)))
        im.op(node, "FULL_CONNECTION", inputs, out, None, hasBias=bias is not None,
              useAxis=True, axis=len(x.shape) - 1, activationType=_FUSE[activation])
        return
    activation, out = im.fused_activation(out)
    im.op(node, "MATMUL", [im.view(x), im.view(wv)], out, None, transposeA=False,
          transposeB=False, activationType=_FUSE[activation])


# -- quantisation (QDQ) -----------------------------------------------------------------------------

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


@_handles("QuantizeLinear")
def _quantize(im: _Importer, node: Any, a: _Attrs) -> None:
    """A float tensor quantised: one QuantDTypeCast whose result carries the parameters; a
    DequantizeLinear's result quantised again with its own parameters is that tensor."""
    x = im.need(node, 0)
    q = _qparams(im, node, a, len(x.shape), True)
    if x.dtype != np.float32:
        raise OnnxImportError(f"an input of type {x.dtype} (float32 only)", node)
    out = node.output[0]
    if x.deq is not None and x.const is None and q.same(x.deq.quant):
        im.alias(out, x.deq)
        return
    operand = im.view(x, x.perm)
    axis = 0 if q.axis is None else _physical_axis(q.axis, x.perm)
    result = im.op(node, "QUANT_DTYPE_CAST", [operand], out, x.perm, dtype=q.dtype,
                   srcT=int(_OH_TYPES[x.dtype]), dstT=int(_OH_TYPES[q.dtype]), axis=axis)
    im.set_quant(result, q)
    im.values[out].quant = q


@_handles("DequantizeLinear")
def _dequantize(im: _Importer, node: Any, a: _Attrs) -> None:
    """No operation by itself: the result remembers the quantised tensor, which a quantised
    node reads as it is; a float reader gets it converted (Importer.dequantised)."""
    x = im.need(node, 0)
    q = _qparams(im, node, a, len(x.shape), False)
    if x.dtype != q.dtype:
        raise OnnxImportError(f"an input of type {x.dtype}, the zero point's is {q.dtype}",
                              node)
    out = node.output[0]
    dtype = im.dtype(out, node)
    if x.const is not None:
        src = _Value(x.shape, x.dtype, const=x.const, quant=q)
        im.values[out] = _Value(x.shape, dtype, const=q.real(x.const, dtype), deq=src)
        return
    if q.dtype == np.int32:
        raise OnnxImportError("an int32 tensor computed at run time (OH_NN converts int8 / "
                              "uint8 only)", node)
    if x.quant is None and x.deq is None and x.operand is not None:
        # a quantised model input (or a tensor nothing labelled): it takes the parameters
        for operand in {id(o): o for o in [x.operand, *x.views.values()]}.values():
            im.set_quant(operand, q)
        x.quant = q
    elif not q.same(x.quant):
        # Other parameters than the tensor carries: an identity copy that carries them.
        source = im.view(x, x.perm)
        copy = im.m.op("TRANSPOSE", source, np.arange(len(source.shape), dtype=np.int64),
                       shape=source.shape, dtype=x.dtype)
        im.set_quant(copy, q)
        x = _Value(x.shape, x.dtype, operand=copy, perm=x.perm, quant=q)
        x.views[x.perm] = copy
    im.values[out] = _Value(im.shape(out, node), dtype, perm=x.perm, deq=x)


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


# -- recurrent ------------------------------------------------------------------------------------

_LSTM_ACTIVATIONS = ["sigmoid", "tanh", "tanh"]


def _lstm_gates(a: np.ndarray, axis: int) -> np.ndarray:
    """ONNX's gate blocks i, o, f, c along `axis` in OH_NN's order i, f, g (= c), o."""
    i, o, f, c = np.split(a, 4, axis=axis)
    return np.ascontiguousarray(np.concatenate([i, f, c, o], axis=axis))


def _reversed_in_time(im: _Importer, operand: Operand) -> Operand:
    """operand[::-1] along axis 0 (a StridedSlice of stride -1, begin/end masked)."""
    rank = len(operand.shape)
    mask = (1 << rank) - 1
    zeros = np.zeros(rank, np.int64)
    return im.m.op("STRIDED_SLICE", operand, zeros, zeros,
                   np.asarray([-1] + [1] * (rank - 1), np.int64), beginMask=mask,
                   endMask=mask, ellipsisMask=0, newAxisMask=0, shrinkAxisMask=0,
                   shape=operand.shape, dtype=operand.dtype)


@_handles("LSTM")
def _lstm(im: _Importer, node: Any, a: _Attrs) -> None:
    """One OH_NN LSTM layer (numLayers 1): forward, reverse (the sequence reversed around a
    forward layer) or bidirectional. Weights reordered from ONNX's gates i, o, f, c to
    OH_NN's i, f, g, o; Y [seq, batch, D*H] is reshaped to [seq, batch, D, H], which is
    ONNX's Y [seq, D, batch, H] in layout (0, 2, 1, 3) (layout=1: batch first)."""
    x, w, r = im.need(node, 0), im.need(node, 1), im.need(node, 2)
    b, lens, h0, c0, peep = (im.get(node, k) for k in range(3, 8))
    direction = a.get("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise OnnxImportError(f"direction {direction!r}", node)
    dirs = 2 if direction == "bidirectional" else 1
    activations = a.get("activations")
    if activations is not None:
        names = [v.decode() if isinstance(v, bytes) else str(v) for v in activations]
        if [n.lower() for n in names] != _LSTM_ACTIVATIONS * dirs:
            raise OnnxImportError(f"activations {names}: OH_NN's LSTM computes Sigmoid, Tanh, "
                                  f"Tanh only", node)
    for name in ("activation_alpha", "activation_beta"):
        if a.get(name):
            raise OnnxImportError(f"{name} (the default activations take no parameters)", node)
    if a.get("clip") is not None:
        raise OnnxImportError("clip: OH_NN's LSTM does not clip the gates", node)
    if int(a.get("input_forget", 0)):
        raise OnnxImportError("input_forget (coupled input and forget gates) is not an OH_NN "
                              "LSTM", node)
    layout = int(a.get("layout", 0))
    if layout not in (0, 1):
        raise OnnxImportError(f"layout {layout}", node)
    if len(x.shape) != 3:
        raise OnnxImportError(f"input of rank {len(x.shape)}, not 3", node)
    if x.dtype.kind != "f":
        raise OnnxImportError(f"input of type {x.dtype}", node)
    for v, what in ((w, "W"), (r, "R"), (b, "B")):
        if v is not None and v.const is None:
            raise OnnxImportError(f"{what} must be a constant (its gates are reordered at "
                                  f"import)", node)
    seq, batch = (x.shape[1], x.shape[0]) if layout else (x.shape[0], x.shape[1])
    if w.const.ndim != 3 or r.const.ndim != 3 or w.const.shape[0] != dirs:
        raise OnnxImportError(f"W {list(w.const.shape)} / R {list(r.const.shape)} are not "
                              f"[{dirs}, 4*hidden, ...]", node)
    hidden = r.const.shape[2]
    size = a.get("hidden_size")
    if size is not None and int(size) != hidden:
        raise OnnxImportError(f"hidden_size {size} disagrees with R's {hidden}", node)
    if w.const.shape[1] != 4 * hidden or r.const.shape[:2] != (dirs, 4 * hidden):
        raise OnnxImportError(f"W {list(w.const.shape)} / R {list(r.const.shape)} do not hold "
                              f"4 gates of {hidden}", node)
    if lens is not None:
        full = lens.const is not None and seq >= 0 and bool(np.all(lens.const == seq))
        if not full:
            raise OnnxImportError("sequence_lens shorter than the sequence (or not constant): "
                                  "OH_NN's LSTM runs every step", node)
    if peep is not None and (peep.const is None or np.any(peep.const != 0)):
        raise OnnxImportError("peepholes (P): OH_NN's LSTM has no peephole connections", node)
    dtype = x.dtype
    weight_ih = _lstm_gates(w.const.astype(dtype), 1)
    weight_hh = _lstm_gates(r.const.astype(dtype), 1)
    if b is not None:
        if b.const.shape != (dirs, 8 * hidden):
            raise OnnxImportError(f"B {list(b.const.shape)} is not [{dirs}, {8 * hidden}]", node)
        bias = np.concatenate([_lstm_gates(half, 1) for half in
                               np.split(b.const.astype(dtype), 2, axis=1)], axis=1)
    else:
        bias = np.zeros((dirs, 8 * hidden), dtype)
    states = []
    state_perm = (1, 0, 2) if layout else None
    for v, what in ((h0, "initial_h"), (c0, "initial_c")):
        if v is None:
            if batch < 0:
                raise OnnxImportError(f"{what} absent with a dynamic batch: give it, or fix "
                                      f"the batch with input_shapes=", node)
            states.append(im.m.constant(np.zeros((dirs, batch, hidden), dtype)))
        else:
            states.append(im.view(v, state_perm))
    x_op = im.view(x, (1, 0, 2) if layout else None)
    if direction == "reverse":
        x_op = _reversed_in_time(im, x_op)
    outs = [o if k < len(node.output) else "" for k, o in enumerate(list(node.output)[:3])]
    outs += [""] * (3 - len(outs))
    state_shape = (dirs, batch, hidden)
    y, h_n, c_n = im.m.op(
        "LSTM", x_op, weight_ih, weight_hh, bias, *states, outputs=3,
        shapes=[(seq, batch, dirs * hidden), state_shape, state_shape], dtype=dtype,
        names=["", *(o if im.names(o, state_perm) else "" for o in outs[1:])],
        bidirectional=dirs == 2, hasBias=b is not None, inputSize=int(w.const.shape[2]),
        hiddenSize=hidden, numLayers=1, numDirections=dirs)
    for o, result in ((outs[1], h_n), (outs[2], c_n)):
        if o:
            if im.names(o, state_perm):
                im.named[result.index] = o
            im.put(o, result, state_perm, node, dtype)
    if outs[0]:
        if direction == "reverse":
            y = _reversed_in_time(im, y)
        y_perm = (1, 0, 2, 3) if layout else (0, 2, 1, 3)
        # -1 for one dynamic dimension; with two, 0 copies them (OH_NN's Reshape, as ONNX's)
        target = [seq, batch, dirs, hidden]
        if seq < 0 and batch < 0:
            target[:2] = [0, 0]
        im.op(node, "RESHAPE", [y, np.asarray(target, np.int64)], outs[0], y_perm)


# -- normalisation and softmax --------------------------------------------------------------------


@_handles("Softmax", "LogSoftmax")
def _softmax(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    axis = _axis(int(a.get("axis", -1)), len(x.shape), node)
    op_type = "SOFTMAX" if node.op_type == "Softmax" else "LOG_SOFTMAX"
    phys = _physical_axis(axis, x.perm)
    params = {"axis": [phys]} if op_type == "SOFTMAX" else {"axis": phys}
    im.op(node, op_type, [im.view(x, x.perm)], node.output[0], x.perm, **params)


@_handles("LayerNormalization")
def _layer_norm(im: _Importer, node: Any, a: _Attrs) -> None:
    stash = int(a.get("stash_type", 1))
    x = im.need(node, 0)
    rank = len(x.shape)
    axis = _axis(int(a.get("axis", -1)), rank, node)
    stats = [o for o in node.output[1:3] if o]
    if stats:
        _layer_norm_statistics(im, node, x, axis, float(a.get("epsilon", 1e-5)), stash)
    if axis == 0:
        raise OnnxImportError("axis 0 (normalising the whole tensor) is not an OH_NN "
                              "LayerNorm", node)
    param_shape = x.shape[axis:]
    params = []
    for k, fill in ((1, 1.0), (2, 0.0)):
        v = im.get(node, k)
        if v is None:
            params.append(im.m.constant(np.full(param_shape, fill, x.dtype)))
        elif v.const is not None and -1 not in param_shape:
            params.append(im.m.constant(np.ascontiguousarray(
                np.broadcast_to(v.const, param_shape).astype(x.dtype))))
        elif tuple(v.shape) == tuple(param_shape):
            params.append(im.view(v))
        else:
            raise OnnxImportError(f"scale/bias of shape {list(v.shape)}, not "
                                  f"{list(param_shape)}", node)
    im.op(node, "LAYER_NORM", [im.view(x), *params], node.output[0], None,
          beginNormAxis=axis, epsilon=float(a.get("epsilon", 1e-5)), beginParamsAxis=axis)


def _layer_norm_statistics(im: _Importer, node: Any, x: _Value, axis: int, epsilon: float,
                           stash: int) -> None:
    """LayerNormalization's optional outputs: Mean = ReduceMean(x) and InvStdDev =
    1 / sqrt(ReduceMean((x - Mean)^2) + epsilon) over the axes from `axis`, kept (the
    function body's arithmetic, in the input's float type)."""
    from onnx import TensorProto

    if x.dtype != np.float32 and stash == TensorProto.FLOAT:
        raise OnnxImportError(f"stash_type float32 statistics of a {x.dtype} input (OH_NN "
                              f"computes them in the input's type)", node)
    rank = len(x.shape)
    axes = np.asarray(list(range(axis, rank)), np.int64)
    kept = tuple(1 if i >= axis else d for i, d in enumerate(x.shape))
    operand = im.view(x)
    mean_name = node.output[1] if len(node.output) > 1 and node.output[1] else None
    inv_name = node.output[2] if len(node.output) > 2 and node.output[2] else None
    if mean_name:
        mean = im.op(node, "REDUCE_MEAN", [operand, axes], mean_name, None, keepDims=True)
    else:
        mean = im.m.op("REDUCE_MEAN", operand, axes, shape=kept, keepDims=True)
    if inv_name:
        centred = im.m.op("SUB", operand, mean, shape=x.shape)
        square = im.m.op("MUL", centred, centred, shape=x.shape)
        var = im.m.op("REDUCE_MEAN", square, axes, shape=kept, keepDims=True)
        shifted = im.m.op("ADD", var, np.asarray(epsilon, x.dtype), shape=kept)
        im.op(node, "RSQRT", [shifted], inv_name, None)


# -- reductions -----------------------------------------------------------------------------------

_REDUCE = {"ReduceMean": "REDUCE_MEAN", "ReduceSum": "REDUCE_SUM", "ReduceMax": "REDUCE_MAX",
           "ReduceMin": "REDUCE_MIN", "ReduceProd": "REDUCE_PROD", "ReduceL2": "REDUCE_L2"}


@_handles(*_REDUCE)
def _reduce(im: _Importer, node: Any, a: _Attrs) -> None:
    reduce_into(im, node, a, im.need(node, 0), _REDUCE[node.op_type], node.output[0])


def reduce_into(im: _Importer, node: Any, a: _Attrs, x: _Value, op_type: str,
                out: str) -> None:
    """The OH_NN reduction `op_type` of x over the node's axes (attribute, constant input, or
    an input given at run time, which the OH_NN reductions read at each run) into `out`."""
    rank = len(x.shape)
    axes = a.ints("axes")
    keep = int(a.get("keepdims", 1))
    noop = int(a.get("noop_with_empty_axes", 0))
    if axes is None:
        given = im.get(node, 1)
        if given is not None and given.const is None:
            _reduce_run_time_axes(im, node, x, given, op_type, out, keep, noop)
            return
        axes = None if given is None else [int(v) for v in np.asarray(given.const).reshape(-1)]
    if not axes:
        if noop:
            im.alias(out, x)
            return
        axes = list(range(rank))
    axes = sorted({_axis(ax, rank, node) for ax in axes})
    perm = x.perm
    phys = [_physical_axis(ax, perm) for ax in axes]
    if keep or perm is None:
        out_perm = perm
    else:
        out_perm = tuple(p - sum(ax < p for ax in axes) for p in perm if p not in axes)
    im.op(node, op_type, [im.view(x, perm), np.asarray(phys, np.int64)], out, out_perm,
          keepDims=bool(keep))


def _reduce_run_time_axes(im: _Importer, node: Any, x: _Value, axes: _Value, op_type: str,
                          out: str, keep: int, noop: int) -> None:
    """Axes fed at run time: the OH_NN reduction reads them (negative ones too) at each run,
    on x in the ONNX layout; the result's rank is known from keepdims and the axes' length."""
    if len(axes.shape) != 1 or axes.shape[0] < 0:
        raise OnnxImportError("run-time axes of unknown length (the result's rank depends on "
                              "it)", node)
    if axes.shape[0] == 0:
        if noop:
            im.alias(out, x)
            return
        raise OnnxImportError("empty run-time axes (every axis) are not read at run time",
                              node)
    if out not in im.shapes:
        rank = len(x.shape) if keep else len(x.shape) - axes.shape[0]
        im.shapes[out] = (-1,) * rank
    im.op(node, op_type, [im.view(x), im.view(axes)], out, None, keepDims=bool(keep))


# -- shape and data movement ------------------------------------------------------------------------


@_handles("Transpose")
def _transpose(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    rank = len(x.shape)
    q = a.ints("perm", list(reversed(range(rank))))
    if sorted(q) != list(range(rank)):
        raise OnnxImportError(f"perm {q} is not a permutation of {rank} axes", node)
    im.values[node.output[0]] = _transposed(x, q, im.shape(node.output[0], node))


def _transposed(x: _Value, q: Sequence[int], shape: tuple[int, ...]) -> _Value:
    """x.transpose(q) as the same operand in another recorded layout (no operation); a
    DequantizeLinear's result not yet converted stays one, of the transposed tensor."""
    if x.deq is not None and x.operand is None and x.const is None:
        src = x.deq
        quant = src.quant if src.quant.axis is None else src.quant.moved(
            list(q).index(src.quant.axis))
        moved = _transposed(src, q, shape)
        moved.quant = quant
        return _Value(shape, x.dtype, perm=moved.perm, deq=moved)
    rank = len(q)
    # out = onnx_x.transpose(q); the operand holds onnx_x.transpose(p) = out.transpose(r).
    p = x.perm if x.perm is not None else tuple(range(rank))
    inv_q = _inverse(q)
    r = tuple(inv_q[p[i]] for i in range(rank))
    v = _Value(shape, x.dtype, operand=x.operand, perm=None if _identity(r) else r,
               quant=x.quant)
    v.views[v.perm] = x.operand
    return v


@_handles("Reshape")
def _reshape(im: _Importer, node: Any, a: _Attrs) -> None:
    x, shape_v = im.need(node, 0), im.need(node, 1)
    out_shape = im.shape(node.output[0], node)
    allowzero = int(a.get("allowzero", 0))
    if shape_v.const is not None:
        target = [int(d) for d in np.asarray(shape_v.const).reshape(-1)]
        if allowzero and 0 in target:
            raise OnnxImportError("allowzero with a 0 in the shape (an empty tensor)", node)
        if all(d >= 0 for d in out_shape):
            target = list(out_shape)
        im.op(node, "RESHAPE", [im.view(x), np.asarray(target, np.int64)], node.output[0],
              None)
        return
    # A shape computed at run time (from a Shape of a dynamic tensor): the inferred shape
    # where it has at most one unknown dimension, else the shape tensor itself (OH_NN's
    # Reshape reads a run-time shape; 0 copies a dimension, -1 infers one, as in ONNX).
    if allowzero:
        raise OnnxImportError("allowzero with a shape computed at run time (a 0 would copy a "
                              "dimension in OH_NN)", node)
    target = _reshape_target(out_shape)
    shape_in = np.asarray(target, np.int64) if target is not None else im.view(shape_v)
    im.op(node, "RESHAPE", [im.view(x), shape_in], node.output[0], None)


@_handles("Flatten")
def _flatten(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    axis = int(a.get("axis", 1))
    rank = len(x.shape)
    if not -rank <= axis <= rank:
        raise OnnxImportError(f"axis {axis} is outside [-{rank}, {rank}]", node)
    target = _reshape_target(im.shape(node.output[0], node))
    if target is not None and im.plan is not None:  # a Reshape, which the C API quantises
        im.op(node, "RESHAPE", [im.view(x), np.asarray(target, np.int64)], node.output[0],
              None)
        return
    im.op(node, "FLATTEN", [im.view(x)], node.output[0], None, axis=axis + rank
          if axis < 0 else axis)


@_handles("Squeeze")
def _squeeze(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    rank = len(x.shape)
    given = im.const(node, 1, "axes")
    if given is None:
        axes = [i for i, d in enumerate(x.shape) if d == 1]
        if any(d < 0 for d in x.shape):
            raise OnnxImportError("Squeeze without axes on a tensor with dynamic dimensions",
                                  node)
    else:
        axes = sorted({_axis(int(v), rank, node) for v in np.asarray(given).reshape(-1)})
    if not axes:
        im.alias(node.output[0], x)
        return
    perm = x.perm
    phys = [_physical_axis(ax, perm) for ax in axes]
    out_perm = None if perm is None else tuple(
        p - sum(ax < p for ax in axes) for p in perm if p not in axes)
    im.op(node, "SQUEEZE", [im.view(x, perm)], node.output[0], out_perm, axis=phys)


@_handles("Unsqueeze")
def _unsqueeze(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    axes_v = im.need(node, 1) if len(node.input) > 1 else None
    if axes_v is not None and axes_v.const is None:
        # one axis fed at run time: OH_NN's ExpandDims reads it at each run (negative
        # counting from the end of the output, as ONNX's)
        if axes_v.shape != (1,):
            raise OnnxImportError(f"run-time axes of shape {list(axes_v.shape)} (one axis is "
                                  f"read at run time; several must be constants)", node)
        im.run_time_shape(node.output[0], (-1,) * (len(x.shape) + 1))
        im.op(node, "EXPAND_DIMS", [im.view(x), im.view(axes_v)], node.output[0], None)
        return
    given = im.const(node, 1, "axes")
    out_shape = im.shape(node.output[0], node)
    rank = len(out_shape)
    axes = sorted({_axis(int(v), rank, node) for v in np.asarray(given).reshape(-1)})
    target = _reshape_target(out_shape)
    if target is not None:
        im.op(node, "RESHAPE", [im.view(x), np.asarray(target, np.int64)], node.output[0],
              None)
        return
    source = im.view(x)
    shape = list(x.shape)
    for k, ax in enumerate(axes):
        shape.insert(ax, 1)
        if k == len(axes) - 1:
            im.op(node, "EXPAND_DIMS", [source, np.asarray([ax], np.int64)], node.output[0],
                  None)
        else:
            source = im.m.op("EXPAND_DIMS", source, np.asarray([ax], np.int64),
                             shape=tuple(shape), dtype=x.dtype)


@_handles("Concat")
def _concat(im: _Importer, node: Any, a: _Attrs) -> None:
    values = [im.need(node, k) for k in range(len(node.input))]
    # an empty constant adds nothing to a concatenation
    values = [v for v in values if v.const is None or v.const.size] or values[:1]
    out = node.output[0]
    rank = len(im.shape(out, node))
    axis = _axis(int(a.get("axis")), rank, node)
    perm = _common_perm(values, rank)
    operands = _operands_in(im, values, perm, rank)
    if len(operands) == 1:
        im.alias(out, values[0])
        return
    im.op(node, "CONCAT", operands, out, perm, axis=_physical_axis(axis, perm))


@_handles("Split")
def _split(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    rank = len(x.shape)
    axis = _axis(int(a.get("axis", 0)), rank, node)
    outs = list(node.output)
    sizes = im.const(node, 1, "split")
    a.get("num_outputs")
    if sizes is not None:
        sizes = [int(s) for s in np.asarray(sizes).reshape(-1)]
    else:
        sizes = [im.shape(o, node)[axis] for o in outs]
        if any(s < 0 for s in sizes):
            sizes = []
    perm = x.perm
    shapes = [_permuted(im.shape(o, node), perm) for o in outs]
    results = im.m.op("SPLIT", im.view(x, perm), outputs=len(outs), shapes=shapes,
                      dtype=x.dtype, axis=_physical_axis(axis, perm), outputNum=len(outs),
                      sizeSplits=sizes or None,
                      names=[o if im.name_outputs and o in im.outputs and perm is None else ""
                             for o in outs])
    results = results if isinstance(results, tuple) else (results,)
    for o, r in zip(outs, results):
        if o:
            im.put(o, r, perm, node, x.dtype)


@_handles("Slice")
def _slice(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    rank = len(x.shape)
    starts = [int(v) for v in np.asarray(im.const(node, 1, "starts")).reshape(-1)]
    ends = [int(v) for v in np.asarray(im.const(node, 2, "ends")).reshape(-1)]
    axes_c = im.const(node, 3, "axes")
    steps_c = im.const(node, 4, "steps")
    axes = list(range(len(starts))) if axes_c is None else \
        [_axis(int(v), rank, node) for v in np.asarray(axes_c).reshape(-1)]
    steps = [1] * len(starts) if steps_c is None else \
        [int(v) for v in np.asarray(steps_c).reshape(-1)]
    if 0 in steps:
        raise OnnxImportError("a step of 0", node)
    perm = x.perm
    begin, end, stride = [0] * rank, [0] * rank, [1] * rank
    begin_mask = end_mask = (1 << rank) - 1
    for s, e, ax, st in zip(starts, ends, axes, steps):
        j = _physical_axis(ax, perm)
        begin[j] = max(min(s, _INT64_MAX // 2), -_INT64_MAX // 2)
        end[j] = max(min(e, _INT64_MAX // 2), -_INT64_MAX // 2)
        stride[j] = st
        begin_mask &= ~(1 << j)
        end_mask &= ~(1 << j)
    im.op(node, "STRIDED_SLICE", [im.view(x, perm), np.asarray(begin, np.int64),
                                  np.asarray(end, np.int64), np.asarray(stride, np.int64)],
          node.output[0], perm, beginMask=begin_mask, endMask=end_mask, ellipsisMask=0,
          newAxisMask=0, shrinkAxisMask=0)


@_handles("Gather")
def _gather(im: _Importer, node: Any, a: _Attrs) -> None:
    x, idx = im.need(node, 0), im.need(node, 1)
    axis = _axis(int(a.get("axis", 0)), len(x.shape), node)
    if idx.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise OnnxImportError(f"indices of type {idx.dtype}", node)
    if idx.const is not None:
        size = x.shape[axis]
        if size >= 0 and ((idx.const < -size) | (idx.const >= size)).any():
            raise OnnxImportError(f"an index outside [-{size}, {size})", node)
    if idx.const is not None and idx.const.ndim == 0:
        # A scalar index (Shape -> Gather(0) in PyTorch's exports): a rank-0 constant is a
        # [1] tensor in OH_NN, so Gather [k], then Squeeze the gathered axis.
        kept = tuple(1 if i == axis else d for i, d in enumerate(x.shape))
        gathered = im.m.op("GATHER", im.view(x), idx.const.reshape(1),
                           np.asarray([axis], np.int64), shape=kept, dtype=x.dtype)
        im.op(node, "SQUEEZE", [gathered], node.output[0], None, axis=[axis])
        return
    im.op(node, "GATHER", [im.view(x), im.view(idx), np.asarray([axis], np.int64)],
          node.output[0], None)


@_handles("Pad")
def _pad(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    rank = len(x.shape)
    mode = a.get("mode", "constant")
    codes = {"constant": 0, "reflect": 1}
    if mode not in codes:
        raise OnnxImportError(f"mode {mode!r} (OH_NN pads constant or reflect; 'edge' has "
                              f"no OH_NN form)", node)
    pads = [int(v) for v in np.asarray(im.const(node, 1, "pads")).reshape(-1)]
    value = im.const(node, 2, "constant_value")
    axes_c = im.const(node, 3, "axes")
    axes = list(range(rank)) if axes_c is None else \
        [_axis(int(v), rank, node) for v in np.asarray(axes_c).reshape(-1)]
    if len(pads) != 2 * len(axes):
        raise OnnxImportError(f"pads {pads} need 2 x {len(axes)} entries", node)
    if min(pads, default=0) < 0:
        raise OnnxImportError(f"negative pads {pads} (cropping)", node)
    perm = x.perm
    amounts = [[0, 0] for _ in range(rank)]
    for k, ax in enumerate(axes):
        amounts[_physical_axis(ax, perm)] = [pads[k], pads[k + len(axes)]]
    fill = 0.0 if value is None or not np.asarray(value).size else \
        float(np.asarray(value).reshape(-1)[0])
    im.op(node, "PAD", [im.view(x, perm), np.asarray(amounts, np.int64)], node.output[0], perm,
          constantValue=fill, paddingMode=codes[mode])


@_handles("Expand")
def _expand(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    shape_v = im.need(node, 1)
    if shape_v.const is None:
        raise OnnxImportError("shape (input 1) must be a constant: OH_NN's BroadcastTo takes "
                              "its shape as a parameter, not a tensor", node)
    target = shape_v.const
    out_shape = im.shape(node.output[0], node)
    if any(d < 0 for d in out_shape) and -1 not in x.shape:
        # inference lost the shape (a function body's): the broadcast itself tells it
        try:
            out_shape = tuple(np.broadcast_shapes(
                tuple(x.shape), tuple(int(d) for d in np.asarray(target).reshape(-1))))
        except ValueError:
            raise OnnxImportError(f"shape {np.asarray(target).tolist()} does not broadcast "
                                  f"with the input's {list(x.shape)}", node) from None
        im.shapes[node.output[0]] = out_shape
    if any(d < 0 for d in out_shape):
        raise OnnxImportError("Expand to a shape with dynamic dimensions", node)
    im.op(node, "BROADCAST_TO", [im.view(x)], node.output[0], None,
          OH_NN_BROADCAST_TO_SHAPE=list(out_shape))


@_handles("Tile")
def _tile(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    reps = im.need(node, 1)
    if reps.const is not None:
        im.op(node, "TILE", [im.view(x), np.asarray(reps.const, np.int64).reshape(-1)],
              node.output[0], None)
        return
    # repeats fed at run time: OH_NN's Tile reads its multiples at each run
    if reps.shape != (len(x.shape),):
        raise OnnxImportError(f"repeats of shape {list(reps.shape)}, not [{len(x.shape)}]", node)
    im.run_time_shape(node.output[0], (-1,) * len(x.shape))
    im.op(node, "TILE", [im.view(x), im.view(reps)], node.output[0], None)


from nnrt.client import onnx_ops  # noqa: E402,F401 - registers the operators mapped there

from nnrt.client.onnx_ops.functions import BY_FUNCTION_BODY  # noqa: E402

SUPPORTED_OPERATORS: tuple[str, ...] = tuple(sorted(
    {*_HANDLERS, *BY_FUNCTION_BODY, "Shape", "Size", "Constant", "ConstantOfShape", "Range"}))


# -- the entry point -----------------------------------------------------------------------------


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
    from ..onnx_ops.functions import expand_functions

    proto = expand_functions(proto, set(_HANDLERS))
    importer = _Importer(proto, input_shapes, name_outputs)
    try:
        return importer.run()
    except BaseException:
        importer.m.close()
        raise
