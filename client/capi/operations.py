"""OH_NNModel_AddOperation's per-operation checks and the lowering to typed HDI nodes.

The data — operand counts, accepted parameter tensors, HDI node types, constant attributes —
is the generated `operation_table.py` (from capi_ops.json). This module is the behaviour:

* `check_operation` runs the operator-specific checks of capi.md 2.11 row 10 at
  AddOperation time (the operator reads its parameter tensors then) and assembles the
  node's attribute message at once: parameter values folded into attribute fields, enum
  translations (fused activation 3.6, pad mode, pad/eltwise/round/padding modes, data
  types), attributes derived from operand shapes (convolution kernel and channels, the
  layout of pooling-like operators) and the per-operation special cases of the spec's
  `notes`;
* `Operation.node(...)` turns one checked operation into its `Node` (Appendix A step 3).

The upstream lowering bugs listed in capi_ops.json are not reproduced: Add forwards its
fused activation, MaxPool its round mode, SpaceToBatchND both padding rows, LSTM reads
projSize as int64, the GLOBAL / HAS_BIAS / USE_AXIS / COEFF tensors are folded like every
other parameter (model.py drops every parameter tensor from the device graph), TopK's
axis defaults to -1 and L2Normalize's axis to [0] as the header says, DepthToSpace's mode
to "DCR", Scale without axis is refused at AddOperation. semantics.md decides the rest:
data-type codes carried as data (Cast target, QuantDTypeCast srcT/dstT, ConstantOfShape
dataType) reach the driver in HDI numbering, ReduceFusion.coeff defaults to 1.0, a Clip
bound left out is infinite, and the `format` of pooling-like nodes is the input's real
layout (capi.md 5.2).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from google.protobuf.descriptor import FieldDescriptor

from nnrt.common.hdi_model import DATA_TYPES
from nnrt.client.capi.enums import (
    OH_NN_FAILED,
    OH_NN_FORMAT_NCHW,
    OH_NN_INT8,
    OH_NN_INT64,
    OH_NN_INVALID_PARAMETER,
    OH_NN_OperationType,
)
from nnrt.client.capi.operation_table import OPERATIONS, OpSpec, ParamSpec
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na

__all__: list[str] = []  # no C functions here: OH_NNModel_AddOperation is in model.py

O = OH_NN_OperationType

# -- enum translations (capi.md 3.6, Appendix A) ---------------------------------------------

# OH_NN_FuseType → HDI ActivationType.
FUSE_TYPES = {0: ht.ACTIVATION_TYPE_NO_ACTIVATION, 1: ht.ACTIVATION_TYPE_RELU,
              2: ht.ACTIVATION_TYPE_RELU6}
# OH pad mode (one-element *_PAD_MODE tensor) → HDI PadMode.
PAD_MODES = {0: ht.PAD_MODE_SAME, 1: ht.PAD_MODE_VALID, 2: ht.PAD_MODE_VALID}
DEPTH_TO_SPACE_MODES = {0: "DCR", 1: "CRD"}
LRN_NORM_REGIONS = {0: "ACROSS_CHANNELS"}


class OperationError(Exception):
    """A check of AddOperation failed; `code` is the OH_NN_ReturnCode to return."""

    def __init__(self, why: str, code: int = OH_NN_INVALID_PARAMETER) -> None:
        super().__init__(why)
        self.code = code


def _refuse(why: str) -> OperationError:
    return OperationError(why)


@dataclass
class ModelTensor:
    """One tensor of an OH_NNModel (OH_NN numbering throughout)."""

    data_type: int  # OH_NN_DataType
    shape: list[int]  # [] = scalar; -1 = dynamic
    format: int = 0  # OH_NN_Format
    name: str = ""
    tensor_type: int = 0  # OH_NN_TensorType
    quant: list[tuple[int, int, float]] = field(default_factory=list)  # (numBits, zeroPoint, scale)
    data: np.ndarray | None = None

    @property
    def dynamic(self) -> bool:
        return any(d < 0 for d in self.shape)


@dataclass
class Operation:
    """One successful AddOperation: its operands and its (already assembled) attributes."""

    spec: OpSpec
    inputs: list[int]
    outputs: list[int]
    params: list[int]
    attrs: Any  # the node_attrs_pb2 message of spec.attr_struct
    quant_type: int = ht.QUANT_TYPE_NONE
    finish_error: tuple[int, str] | None = None  # Finish fails with this (code, why)
    constants: dict[int, np.ndarray] = field(default_factory=dict)  # tensor → data on the wire

    def node(self, position: int, renumber: Mapping[int, int]) -> na.Node:
        """The HDI Node of this operation at `position`, tensor indices renumbered."""
        node = na.Node(
            name=f"{self.spec.prefix}:{position}",
            nodeType=self.spec.node_type,
            inputIndex=[renumber[i] for i in self.inputs],
            outputIndex=[renumber[i] for i in self.outputs],
            quantType=self.quant_type,
        )
        getattr(node, ATTR_MEMBERS[self.spec.attr_struct]).CopyFrom(self.attrs)
        return node


# The Node.nodeAttr member of each attribute struct (QuantDTypeCastV2 travels in its own
# member under NODE_TYPE_QUANT_DTYPE_CAST, hdi.md 5.3.1).
ATTR_MEMBERS: dict[str, str] = {
    f.message_type.name: f.name for f in na.Node.DESCRIPTOR.oneofs_by_name["nodeAttr"].fields
}

# -- parameters --------------------------------------------------------------------------------


def _accepted(spec: OpSpec) -> dict[int, ParamSpec]:
    """The parameter tensor types an operation accepts (capi_ops.json `params`).

    Upstream's pooling table is shared: AvgPool accepts the MaxPool types and vice versa.
    """
    accepted = dict(spec.params)
    other = {O.OH_NN_OPS_AVG_POOL: O.OH_NN_OPS_MAX_POOL,
             O.OH_NN_OPS_MAX_POOL: O.OH_NN_OPS_AVG_POOL}.get(spec.value)
    if other is not None:
        for tensor_type, p in OPERATIONS[other].params.items():
            accepted.setdefault(tensor_type, p)
    return accepted


ACCEPTED: dict[int, dict[int, ParamSpec]] = {v: _accepted(s) for v, s in OPERATIONS.items()}

# Operand counts where ours is stricter than upstream (which checks only the index range).
COUNT_OVERRIDES: dict[int, tuple[tuple[int, int | None], tuple[int, int | None]]] = {
    O.OH_NN_OPS_FULL_CONNECTION: ((2, 3), (1, 1)),
}

# Defaults where ours differs from upstream (semantics.md, or the header where the notes
# say to follow it), or where the spec states the default in words.
_REDUCE = (O.OH_NN_OPS_REDUCE_MEAN, O.OH_NN_OPS_REDUCE_PROD, O.OH_NN_OPS_REDUCE_ALL,
           O.OH_NN_OPS_REDUCE_MAX, O.OH_NN_OPS_REDUCE_MIN, O.OH_NN_OPS_REDUCE_SUM,
           O.OH_NN_OPS_REDUCE_L2)
DEFAULT_OVERRIDES: dict[tuple[int, str], Any] = {
    **{(op, "coeff"): 1.0 for op in _REDUCE},
    (O.OH_NN_OPS_TOP_K, "axis"): -1,
    (O.OH_NN_OPS_L2_NORMALIZE, "axis"): [0],
    (O.OH_NN_OPS_DEPTH_TO_SPACE, "mode"): "DCR",
    (O.OH_NN_OPS_LRN, "normRegion"): "ACROSS_CHANNELS",
    # semantics.md: a missing Clip bound is unbounded on that side (upstream: 0.0).
    (O.OH_NN_OPS_CLIP, "max"): math.inf,
    (O.OH_NN_OPS_CLIP, "min"): -math.inf,
}


def _in_range(lo: int, hi: int) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if not lo <= int(value) <= hi:
            raise _refuse(f"value {value} is outside {lo}..{hi}")
        return int(value)
    return check


def _lookup(table: Mapping[int, Any]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        try:
            return table[int(value)]
        except KeyError:
            raise _refuse(f"value {value} is not one of {sorted(table)}") from None
    return check


def _hdi_data_type(value: Any) -> int:
    """An OH_NN_DataType carried as data → its HDI DataType code (semantics.md)."""
    entry = DATA_TYPES.get(int(value))
    if entry is None:
        raise _refuse(f"data type {value} is not an OH_NN_DataType (0..12)")
    return entry[0]


_POOLS = (O.OH_NN_OPS_AVG_POOL, O.OH_NN_OPS_MAX_POOL)
# (operation, attribute field) → translation of the parameter value; raises when refused.
VALUE_RULES: dict[tuple[int, str], Callable[[Any], Any]] = {
    **{(op, "roundMode"): _in_range(0, 1) for op in _POOLS},
    (O.OH_NN_OPS_ELTWISE, "mode"): _in_range(0, 3),
    (O.OH_NN_OPS_PAD, "paddingMode"): _in_range(0, 3),
    (O.OH_NN_OPS_RESIZE_BILINEAR, "coordinateTransformMode"): _in_range(0, 2),
    (O.OH_NN_OPS_DEPTH_TO_SPACE, "mode"): _lookup(DEPTH_TO_SPACE_MODES),
    (O.OH_NN_OPS_LRN, "normRegion"): _lookup(LRN_NORM_REGIONS),
    (O.OH_NN_OPS_QUANT_DTYPE_CAST, "srcT"): _hdi_data_type,
    (O.OH_NN_OPS_QUANT_DTYPE_CAST, "dstT"): _hdi_data_type,
    (O.OH_NN_OPS_CONSTANT_OF_SHAPE, "dataType"): _hdi_data_type,
}


def _values(t: ModelTensor) -> np.ndarray:
    return np.asarray(t.data).reshape(-1)


def _read_param(spec: OpSpec, p: ParamSpec, t: ModelTensor, where: str) -> tuple[str, Any]:
    """(attribute field, raw value) of one parameter tensor; OperationError when refused."""
    if t.data is None:
        raise _refuse(f"{where}: parameter tensor has no data")
    flat = _values(t).tolist()  # Python scalars
    n = len(flat)
    if p.kind == "pad":
        # *_PAD and *_PAD_MODE: one routine, the element count decides (capi_ops.json notes).
        if n == 1:
            if t.data_type != OH_NN_INT8:
                raise _refuse(f"{where}: a pad mode must be OH_NN_INT8")
            mode = int(flat[0])
            if mode not in PAD_MODES:
                raise _refuse(f"{where}: pad mode {mode} is not 0..2")
            return _pad_field(spec, OH_NN_INT8), PAD_MODES[mode]
        if n == 4:
            if t.data_type != OH_NN_INT64:
                raise _refuse(f"{where}: a pad list must be OH_NN_INT64")
            return _pad_field(spec, OH_NN_INT64), flat
        raise _refuse(f"{where}: {n} elements; a pad mode has 1, a pad list 4")
    if t.data_type != p.dtype:
        raise _refuse(f"{where}: data type {t.data_type}, {p.name} needs {p.dtype}")
    if p.kind == "first":
        value: Any = flat[0]
    elif p.kind == "one":
        if n != 1:
            raise _refuse(f"{where}: {n} elements, {p.name} needs exactly 1")
        value = flat[0]
    elif p.kind == "scalar_0d":
        if t.shape:
            raise _refuse(f"{where}: {p.name} must be a 0-d scalar (no shape), has {t.shape}")
        value = flat[0]
    elif p.kind == "list":
        value = list(flat)
    elif p.kind == "list_1d2":
        if len(t.shape) != 1 or n != 2:
            raise _refuse(f"{where}: {p.name} must be 1-D with 2 elements, has {t.shape}")
        value = list(flat)
    elif p.kind == "pairs4":
        if n != 4:
            raise _refuse(f"{where}: {p.name} needs 4 values, has {n}")
        value = [list(flat[:2]), list(flat[2:])]
    elif p.kind == "pairs_2d4":
        if len(t.shape) != 2 or n != 4:
            raise _refuse(f"{where}: {p.name} must be 2-D with 4 elements, has {t.shape}")
        value = [list(flat[:2]), list(flat[2:])]
    else:  # pragma: no cover - the generator only emits the kinds above
        raise AssertionError(p.kind)
    if p.field == "activationType":  # every activationType parameter is an OH_NN_FuseType
        fuse = int(value)
        if fuse not in FUSE_TYPES:
            raise _refuse(f"{where}: fused activation {fuse} is not 0..2")
        return p.field, FUSE_TYPES[fuse]
    rule = VALUE_RULES.get((spec.value, p.field))
    if rule is not None:
        try:
            value = rule(value)
        except OperationError as exc:
            raise _refuse(f"{where}: {p.name}: {exc}") from None
    return p.field, value


def _pad_field(spec: OpSpec, dtype: int) -> str:
    """The attribute a pad-kind parameter fills: the INT8 one → padMode, INT64 → the list."""
    return next(p.field for p in ACCEPTED[spec.value].values() if p.kind == "pad" and p.dtype == dtype)


# -- attribute messages --------------------------------------------------------------------


def _assign(msg: Any, name: str, value: Any) -> None:
    """Set one attribute field, converting to its proto type (a scalar into a list field
    becomes a one-element list, as upstream does for Softmax and Unsqueeze axes)."""
    fd = msg.DESCRIPTOR.fields_by_name[name]
    if fd.is_repeated:
        target = getattr(msg, name)
        del target[:]
        values = value if isinstance(value, (list, tuple)) else [value]
        if fd.message_type is not None:  # Int64Array rows
            for row in values:
                target.add(values=[int(v) for v in row])
        else:
            target.extend(_convert(fd, v) for v in values)
    else:
        setattr(msg, name, _convert(fd, value))


def _convert(fd: FieldDescriptor, value: Any) -> Any:
    if fd.cpp_type == FieldDescriptor.CPPTYPE_BOOL:
        return bool(value)
    if fd.cpp_type in (FieldDescriptor.CPPTYPE_FLOAT, FieldDescriptor.CPPTYPE_DOUBLE):
        return float(value)
    if fd.cpp_type == FieldDescriptor.CPPTYPE_STRING:
        return str(value)
    return int(value)


def _layout(t: ModelTensor) -> int:
    """The `format` attribute of pooling-like nodes: the input's real layout (capi.md 5.2)."""
    return ht.FORMAT_NCHW if t.format == OH_NN_FORMAT_NCHW else ht.FORMAT_NHWC


# -- per-operation special cases -----------------------------------------------------------

Given = dict[str, Any]
Hook = Callable[["_Context"], None]


@dataclass
class _Context:
    spec: OpSpec
    tensors: Sequence[ModelTensor]
    inputs: list[int]
    outputs: list[int]
    given: Given  # attribute field → value, from the parameter tensors
    attrs: dict[str, Any]  # attribute field → value to send (defaults, given, derived)
    finish_error: tuple[int, str] | None = None
    constants: dict[int, np.ndarray] = field(default_factory=dict)

    def operand(self, k: int) -> ModelTensor:
        return self.tensors[self.inputs[k]]


def _conv(ctx: _Context) -> None:
    weight = ctx.operand(1)
    if len(weight.shape) != 4:
        raise _refuse(f"weight must be 4-D, has shape {weight.shape}")
    ctx.attrs["kernelSize"] = [weight.shape[1], weight.shape[2]]
    ctx.attrs["inChannel"] = weight.shape[3]
    ctx.attrs["outChannel"] = weight.shape[0]


def _depthwise(ctx: _Context) -> None:
    x, weight = ctx.operand(0), ctx.operand(1)
    if len(x.shape) != 4:
        raise _refuse(f"input must be 4-D, has shape {x.shape}")
    if len(weight.shape) != 4:
        raise _refuse(f"weight must be 4-D, has shape {weight.shape}")
    channels = x.shape[1] if x.format == OH_NN_FORMAT_NCHW else x.shape[3]
    if channels < 1:
        raise _refuse("the input's channel dimension must be known (not dynamic)")
    ctx.attrs.update(kernelSize=[weight.shape[1], weight.shape[2]], group=channels,
                     inChannel=channels, outChannel=weight.shape[0])


def _with_layout(ctx: _Context) -> None:
    ctx.attrs["format"] = _layout(ctx.operand(0))


def _full_connection(ctx: _Context) -> None:
    # useAxis = false together with an axis -> refused; an axis implies useAxis.
    if "axis" in ctx.given:
        if "useAxis" in ctx.given and not ctx.given["useAxis"]:
            raise _refuse("an axis is given but useAxis is false")
        ctx.attrs["useAxis"] = True
    if "hasBias" not in ctx.given:
        # Ours: a bias operand means a bias (upstream defaults to false even then).
        ctx.attrs["hasBias"] = len(ctx.inputs) == 3


def _scale(ctx: _Context) -> None:
    if "axis" not in ctx.given:
        raise _refuse("OH_NN_SCALE_AXIS is required (upstream crashes at Finish without it)")


def _quant_dtype_cast(ctx: _Context) -> None:
    missing = [f for f in ("srcT", "dstT") if f not in ctx.given]
    if missing:
        # capi.md 2.13: AddOperation succeeds, Finish cannot build the node.
        ctx.finish_error = (OH_NN_FAILED, f"QuantDTypeCast without {' and '.join(missing)}")


def _layer_norm(ctx: _Context) -> None:
    shape = ctx.operand(0).shape
    axis = int(ctx.attrs.get("beginNormAxis", 1))
    if not 1 <= axis < len(shape):
        raise _refuse(f"beginNormAxis {axis} is outside [1, {len(shape)})")
    want = shape[axis:]
    for k, what in ((1, "gamma"), (2, "beta")):
        have = ctx.operand(k).shape
        if len(have) != len(want) or any(a != b and a >= 0 and b >= 0 for a, b in zip(have, want)):
            raise _refuse(f"{what} shape {have} is not input.shape[{axis}:] = {want}")


def _cast(ctx: _Context) -> None:
    index = ctx.inputs[1]
    target = ctx.tensors[index]
    if target.data is None:
        raise _refuse("the target type (second input) must be a constant set before AddOperation")
    raw = np.ascontiguousarray(target.data).reshape(-1).view(np.uint8)
    if raw.size < 4:
        raise _refuse("the target type needs 4 bytes (an OH_NN_DataType)")
    value = int(raw[:4].view(np.int32)[0])
    if value not in DATA_TYPES:
        raise _refuse(f"target type {value} is not an OH_NN_DataType (0..12)")
    # semantics.md: the driver sees the HDI code, written where the OH value was.
    wire = np.array(target.data, copy=True)
    wire.reshape(-1).view(np.uint8)[:4] = np.array([DATA_TYPES[value][0]], np.int32).view(np.uint8)
    ctx.constants[index] = wire


def _pad(ctx: _Context) -> None:
    ctx.attrs["paddings"] = []  # the amounts travel as the second input tensor


HOOKS: dict[int, Hook] = {
    O.OH_NN_OPS_CONV2D: _conv,
    O.OH_NN_OPS_CONV2D_TRANSPOSE: _conv,
    O.OH_NN_OPS_DEPTHWISE_CONV2D_NATIVE: _depthwise,
    O.OH_NN_OPS_AVG_POOL: _with_layout,
    O.OH_NN_OPS_MAX_POOL: _with_layout,
    O.OH_NN_OPS_DEPTH_TO_SPACE: _with_layout,
    O.OH_NN_OPS_SPACE_TO_DEPTH: _with_layout,
    O.OH_NN_OPS_DETECTION_POST_PROCESS: _with_layout,
    O.OH_NN_OPS_FULL_CONNECTION: _full_connection,
    O.OH_NN_OPS_SCALE: _scale,
    O.OH_NN_OPS_QUANT_DTYPE_CAST: _quant_dtype_cast,
    O.OH_NN_OPS_LAYER_NORM: _layer_norm,
    O.OH_NN_OPS_CAST: _cast,
    O.OH_NN_OPS_PAD: _pad,
}

# Every derived attribute of the table has its hook (checked by the tests too).
for _spec in OPERATIONS.values():
    if _spec.derived and _spec.value not in HOOKS:  # pragma: no cover
        raise RuntimeError(f"{_spec.name}: no lowering for {_spec.derived}")


def _count_ok(n: int, rule: tuple[int, int | None]) -> bool:
    lo, hi = rule
    return n >= lo and (hi is None or n <= hi)


def check_operation(op_type: int, tensors: Sequence[ModelTensor], params: list[int],
                    inputs: list[int], outputs: list[int]) -> Operation:
    """capi.md 2.11 rows 9 and 10: the Operation, or OperationError with the code.

    The caller has checked rows 1–8 (index ranges, tensor types of the operands).
    """
    spec = OPERATIONS.get(op_type) if isinstance(op_type, int) else None
    if spec is None:
        raise _refuse(f"operation type {op_type} is not an OH_NN_OperationType")
    in_rule, out_rule = COUNT_OVERRIDES.get(spec.value, (spec.inputs, spec.outputs))
    if not _count_ok(len(inputs), in_rule):
        raise _refuse(f"{spec.name}: {len(inputs)} inputs, needs {in_rule}")
    if not _count_ok(len(outputs), out_rule):
        raise _refuse(f"{spec.name}: {len(outputs)} outputs, needs {out_rule}")
    if len(params) > spec.max_params:
        raise _refuse(f"{spec.name}: {len(params)} parameter tensors, accepts {spec.max_params}")
    accepted = ACCEPTED[spec.value]
    given: Given = {}
    for index in params:
        t = tensors[index]
        where = f"{spec.name}: parameter tensor {index}"
        p = accepted.get(t.tensor_type)
        if p is None:
            raise _refuse(f"{where}: tensor type {t.tensor_type} is not a parameter of it")
        name, value = _read_param(spec, p, t, where)
        given[name] = value  # a repeated parameter type: the later one wins
    attrs: dict[str, Any] = dict(spec.fixed)
    for p in spec.params.values():
        default = DEFAULT_OVERRIDES.get((spec.value, p.field), p.default)
        if default is not None:
            attrs[p.field] = default
    attrs.update(given)
    ctx = _Context(spec, tensors, inputs, outputs, given, attrs)
    hook = HOOKS.get(spec.value)
    if hook is not None:
        try:
            hook(ctx)
        except OperationError as exc:
            raise _refuse(f"{spec.name}: {exc}") from None
    message = getattr(na, spec.attr_struct)()
    for name, value in attrs.items():
        _assign(message, name, value)
    quant = spec.quant_from_first_output and bool(tensors[outputs[0]].quant)
    return Operation(spec, list(inputs), list(outputs), list(params), message,
                     ht.QUANT_TYPE_ALL if quant else ht.QUANT_TYPE_NONE,
                     ctx.finish_error, ctx.constants)
