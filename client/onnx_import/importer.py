"""The importer's core: `_Importer` walks the graph in order, keeps each tensor as a
`_Value`, folds constants, plans QDQ and fusions, and hands each node to the handler
registered for its op_type with `_handles` (the modules beside this one)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .. import capi
from ..api.dtypes import _OH_TYPES
from ..api.model import Model
from ..api.operand import Operand
from .loading import OnnxImportError, _onnx
from .quant_plan import _FUSES_ACTIVATION, _qparams, _QUANTISABLE, _QuantPlan
from .values import (_Attrs, _identity, _inverse, _moves_only_units, _permuted, _physical_axis,
                     _Quant, _reshape_target, _Value)


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
