"""OH_NNModel_AddOperation per operation (capi.md 2.11 row 10, capi_ops.json) and the
lowering of every one of the 108 operations to its typed HDI node (the operations run by a
real CPU driver: test_operations_on_cpu.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from nnrt.client.capi import enums as E
from nnrt.client.capi.enums import (
    OH_NN_BOOL,
    OH_NN_FAILED,
    OH_NN_FLOAT32,
    OH_NN_INT8,
    OH_NN_INT32,
    OH_NN_INT64,
    OH_NN_INVALID_PARAMETER,
    OH_NN_SUCCESS,
)
from nnrt.client.capi.model import OH_NNModel_Finish, OH_NNModel_SpecifyInputsAndOutputs
from nnrt.client.capi.operation_table import OPERATIONS, ParamSpec
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.protos.generate import oneof_member
from tests.client.capi.conftest import HDI_TYPES
from tests.client.capi.util_capi import Graph, u32

F32 = OH_NN_FLOAT32
O = E.OH_NN_OperationType
ALL_OPS = sorted(OPERATIONS)


def op_id(value: int) -> str:
    return OPERATIONS[value].name[len("OH_NN_OPS_"):]


# -- the expectations, stated here independently of operations.py ----------------------------

FUSE = {0: 0, 1: 1, 2: 3}  # OH_NN_FuseType -> HDI ActivationType (capi.md 3.6)
# (operation, attribute) -> (value written into the parameter tensor, value on the wire).
SPECIAL_VALUES: dict[tuple[int, str], tuple[Any, Any]] = {
    (O.OH_NN_OPS_AVG_POOL, "roundMode"): (1, 1),
    (O.OH_NN_OPS_MAX_POOL, "roundMode"): (1, 1),  # forwarded (upstream drops it)
    (O.OH_NN_OPS_ELTWISE, "mode"): (2, 2),
    (O.OH_NN_OPS_PAD, "paddingMode"): (2, 2),
    (O.OH_NN_OPS_RESIZE_BILINEAR, "coordinateTransformMode"): (1, 1),
    (O.OH_NN_OPS_DEPTH_TO_SPACE, "mode"): (1, "CRD"),
    (O.OH_NN_OPS_LRN, "normRegion"): (0, "ACROSS_CHANNELS"),
    (O.OH_NN_OPS_QUANT_DTYPE_CAST, "srcT"): (E.OH_NN_INT8, 32),  # HDI numbering
    (O.OH_NN_OPS_QUANT_DTYPE_CAST, "dstT"): (F32, 43),
    (O.OH_NN_OPS_CONSTANT_OF_SHAPE, "dataType"): (E.OH_NN_INT32, 34),
    (O.OH_NN_OPS_LAYER_NORM, "beginNormAxis"): (1, 1),
    (O.OH_NN_OPS_LAYER_NORM, "beginParamsAxis"): (1, 1),
}
# Defaults where nnrt deliberately differs from upstream (semantics.md, the header).
OUR_DEFAULTS: dict[tuple[int, str], Any] = {
    **{(op, "coeff"): 1.0 for op in (O.OH_NN_OPS_REDUCE_MEAN, O.OH_NN_OPS_REDUCE_PROD,
                                     O.OH_NN_OPS_REDUCE_ALL, O.OH_NN_OPS_REDUCE_MAX,
                                     O.OH_NN_OPS_REDUCE_MIN, O.OH_NN_OPS_REDUCE_SUM,
                                     O.OH_NN_OPS_REDUCE_L2)},
    (O.OH_NN_OPS_TOP_K, "axis"): -1,
    (O.OH_NN_OPS_L2_NORMALIZE, "axis"): [0],
    (O.OH_NN_OPS_DEPTH_TO_SPACE, "mode"): "DCR",
    (O.OH_NN_OPS_LRN, "normRegion"): "ACROSS_CHANNELS",
    (O.OH_NN_OPS_CLIP, "max"): float("inf"),  # semantics.md: a missing bound is unbounded
    (O.OH_NN_OPS_CLIP, "min"): float("-inf"),
}
REQUIRED = {O.OH_NN_OPS_SCALE: OH_NN_INVALID_PARAMETER,          # refused at AddOperation
            O.OH_NN_OPS_QUANT_DTYPE_CAST: OH_NN_FAILED}            # refused at Finish
LAYOUT_OPS = (O.OH_NN_OPS_AVG_POOL, O.OH_NN_OPS_MAX_POOL, O.OH_NN_OPS_DEPTH_TO_SPACE,
              O.OH_NN_OPS_SPACE_TO_DEPTH, O.OH_NN_OPS_DETECTION_POST_PROCESS)


def param_case(op: int, p: ParamSpec) -> tuple[int, list, list[int] | None, Any]:
    """(data type, values, shape, expected attribute value) of one valid parameter."""
    if p.kind == "pad":
        if p.dtype == OH_NN_INT8:
            return OH_NN_INT8, [0], [1], ht.PAD_MODE_SAME  # OH 0 ('same') -> HDI SAME(1)
        return OH_NN_INT64, [1, 2, 3, 4], [4], [1, 2, 3, 4]
    if p.field == "activationType":
        return OH_NN_INT8, [2], [1], FUSE[2]
    shape: list[int] | None = [1]
    if p.kind == "scalar_0d":
        shape = None
    if (op, p.field) in SPECIAL_VALUES:
        raw, wire = SPECIAL_VALUES[(op, p.field)]
        return p.dtype, [raw], shape, wire
    if p.kind in ("list", "list_1d2"):
        values = [0.25, 1.5] if p.dtype == F32 else [2, 3]
        return p.dtype, values, [2], values
    if p.kind in ("pairs4", "pairs_2d4"):
        return p.dtype, [1, 2, 3, 4], [2, 2], [[1, 2], [3, 4]]
    value = {OH_NN_BOOL: True, F32: 0.25, OH_NN_INT64: 3, OH_NN_INT32: 3, OH_NN_INT8: 1}[p.dtype]
    return p.dtype, [value], shape, value


def operands(op: int) -> tuple[list[tuple], list[tuple]]:
    """Minimal operands: inputs as (type, shape, constant or None), outputs as (type, shape)."""
    spec = OPERATIONS[op]
    x = (F32, [1, 4, 4, 2], None)
    if op in (O.OH_NN_OPS_CONV2D, O.OH_NN_OPS_CONV2D_TRANSPOSE):
        ins = [x, (F32, [3, 2, 2, 2], None), (F32, [3], None)]
    elif op == O.OH_NN_OPS_DEPTHWISE_CONV2D_NATIVE:
        ins = [x, (F32, [4, 2, 2, 1], None), (F32, [4], None)]
    elif op == O.OH_NN_OPS_LAYER_NORM:
        ins = [(F32, [2, 3, 4], None), (F32, [3, 4], None), (F32, [3, 4], None)]
    elif op == O.OH_NN_OPS_CAST:
        ins = [(F32, [2], None), (OH_NN_INT32, [1], np.array([E.OH_NN_INT8], np.int32))]
    elif op == O.OH_NN_OPS_FULL_CONNECTION:
        ins = [x, x, x]
    else:
        lo, hi = spec.inputs
        ins = [x] * (lo + (1 if hi is None else 0))
    lo, hi = spec.outputs
    outs = [(F32, [1, 4, 4, 2])] * (lo + (1 if hi is None else 0))
    return ins, outs


def as_dict(msg: Any) -> dict[str, Any]:
    out = {}
    for fd in msg.DESCRIPTOR.fields:
        value = getattr(msg, fd.name)
        if fd.is_repeated:
            value = [list(v.values) for v in value] if fd.message_type else list(value)
        out[fd.name] = value
    return out


def expected_attrs(op: int, given: dict[str, Any], ins: list[tuple]) -> dict[str, Any]:
    spec = OPERATIONS[op]
    message = getattr(na, spec.attr_struct)()
    fields = message.DESCRIPTOR.fields_by_name
    want = as_dict(message)
    want.update(spec.fixed)

    def put(name, value):
        if fields[name].is_repeated and not isinstance(value, list):
            value = [value]  # one axis -> one-element list (Softmax, Unsqueeze)
        want[name] = value

    for p in spec.params.values():
        default = OUR_DEFAULTS.get((op, p.field), p.default)
        if default is not None:
            put(p.field, default)
    for name, value in given.items():
        put(name, value)
    # Derived from the operands.
    if op in (O.OH_NN_OPS_CONV2D, O.OH_NN_OPS_CONV2D_TRANSPOSE):
        w = ins[1][1]
        want.update(kernelSize=[w[1], w[2]], inChannel=w[3], outChannel=w[0])
    if op == O.OH_NN_OPS_DEPTHWISE_CONV2D_NATIVE:
        w = ins[1][1]
        want.update(kernelSize=[w[1], w[2]], inChannel=ins[0][1][3], group=ins[0][1][3],
                    outChannel=w[0])
    if op in LAYOUT_OPS:
        want["format"] = ht.FORMAT_NHWC  # the input is untagged: NHWC (capi.md 5.2)
    if op == O.OH_NN_OPS_FULL_CONNECTION and "hasBias" not in given:
        want["hasBias"] = len(ins) == 3
    if op == O.OH_NN_OPS_FULL_CONNECTION and "axis" in given:
        want["useAxis"] = True
    return want


def assert_attrs_equal(have: dict, want: dict) -> None:
    assert have.keys() == want.keys()
    for name, value in want.items():
        if isinstance(value, float) or (isinstance(value, list) and value
                                        and isinstance(value[0], float)):
            np.testing.assert_array_equal(np.float32(have[name]), np.float32(value), err_msg=name)
        else:
            assert have[name] == value, name


def build(op: int, with_params: bool, quant_output: bool = False):
    """The minimal model of `op`: some parameter tensors first, data tensors between."""
    spec = OPERATIONS[op]
    g = Graph()
    given: dict[str, Any] = {}
    params: list[int] = []
    cases = list(spec.params.values()) if with_params else []
    for k, p in enumerate(cases):
        if k == len(cases) // 2:
            break
        dt, values, shape, wire = param_case(op, p)
        params.append(g.param(p.tensor_type, dt, values, shape))
        given[p.field] = wire
    ins, outs = operands(op)
    in_idx = [g.tensor(dt, shape, data) for dt, shape, data in ins]
    for p in cases[len(cases) // 2:]:
        dt, values, shape, wire = param_case(op, p)
        params.append(g.param(p.tensor_type, dt, values, shape))
        given[p.field] = wire
    out_idx = [g.tensor(dt, shape, quant=[(8, 1, 0.5)] if quant_output and k == 0 else None)
               for k, (dt, shape) in enumerate(outs)]
    return g, given, ins, in_idx, out_idx, params


def finish(g: Graph, ins: list[tuple], in_idx: list[int], out_idx: list[int]) -> int:
    model_inputs = [i for i, (_, _, data) in zip(in_idx, ins) if data is None]
    assert OH_NNModel_SpecifyInputsAndOutputs(g.model, u32(model_inputs), u32(out_idx)) == 0
    return OH_NNModel_Finish(g.model)


def check_lowering(op: int, with_params: bool, quant_output: bool) -> None:
    spec = OPERATIONS[op]
    g, given, ins, in_idx, out_idx, params = build(op, with_params, quant_output)
    code = g.op(op, in_idx, out_idx, params)
    if not with_params and op in REQUIRED:
        if REQUIRED[op] == OH_NN_INVALID_PARAMETER:
            assert code == OH_NN_INVALID_PARAMETER
            return
        assert code == OH_NN_SUCCESS
        assert finish(g, ins, in_idx, out_idx) == REQUIRED[op]
        return
    assert code == OH_NN_SUCCESS
    assert finish(g, ins, in_idx, out_idx) == OH_NN_SUCCESS
    lowered = g.model.lowered()
    model = lowered.hdi.model()
    # Parameter tensors are gone, the others renumbered in order.
    n_in, n_out = len(in_idx), len(out_idx)
    assert [t.name for t in model.allTensors] == [f"Tensor: {i}" for i in in_idx + out_idx]
    (node,) = model.nodes
    assert node.name == f"{spec.prefix}:0"
    assert node.nodeType == spec.node_type
    assert list(node.inputIndex) == list(range(n_in))
    assert list(node.outputIndex) == list(range(n_in, n_in + n_out))
    member = node.WhichOneof("nodeAttr")
    if op == O.OH_NN_OPS_QUANT_DTYPE_CAST:
        assert member == "quant_dtype_cast_v2"
    else:
        assert member == oneof_member(na.NodeType.Name(spec.node_type))
    quantised = quant_output and spec.quant_from_first_output
    assert node.quantType == (ht.QUANT_TYPE_ALL if quantised else ht.QUANT_TYPE_NONE)
    assert_attrs_equal(as_dict(getattr(node, member)), expected_attrs(op, given, ins))
    if op == O.OH_NN_OPS_CAST:  # semantics.md: the target type in HDI numbering
        assert lowered.hdi.constants[1].tolist() == [HDI_TYPES[E.OH_NN_INT8]]
        assert g.model.tensors[in_idx[1]].data.tolist() == [E.OH_NN_INT8]  # model unchanged


@pytest.mark.parametrize("op", ALL_OPS, ids=op_id)
def test_lowering_with_every_parameter(op):
    if not OPERATIONS[op].params:
        pytest.skip("no parameters")
    check_lowering(op, with_params=True, quant_output=True)


@pytest.mark.parametrize("op", ALL_OPS, ids=op_id)
def test_lowering_with_defaults(op):
    check_lowering(op, with_params=False, quant_output=False)


# -- row 10: the operator-specific checks, for every operation -------------------------------


def valid_parts(op: int):
    g, _, ins, in_idx, out_idx, params = build(op, with_params=True)
    return g, in_idx, out_idx, params


@pytest.mark.parametrize("op", ALL_OPS, ids=op_id)
def test_too_few_inputs(op):
    g, in_idx, out_idx, params = valid_parts(op)
    lo = 2 if op == O.OH_NN_OPS_FULL_CONNECTION else OPERATIONS[op].inputs[0]
    if lo <= 1:
        pytest.skip("one input at least: refused by the model-level rule 3")
    assert g.op(op, in_idx[:lo - 1], out_idx, params) == OH_NN_INVALID_PARAMETER


@pytest.mark.parametrize("op", ALL_OPS, ids=op_id)
def test_too_many_inputs(op):
    g, in_idx, out_idx, params = valid_parts(op)
    hi = 3 if op == O.OH_NN_OPS_FULL_CONNECTION else OPERATIONS[op].inputs[1]
    if hi is None:
        pytest.skip("any number of inputs")
    extra = [g.tensor(F32, [1]) for _ in range(hi + 1 - len(in_idx))]
    assert g.op(op, in_idx + extra, out_idx, params) == OH_NN_INVALID_PARAMETER


@pytest.mark.parametrize("op", ALL_OPS, ids=op_id)
def test_wrong_number_of_outputs(op):
    g, in_idx, out_idx, params = valid_parts(op)
    lo, hi = OPERATIONS[op].outputs
    if hi is not None:
        extra = [g.tensor(F32, [1]) for _ in range(hi + 1 - len(out_idx))]
        assert g.op(op, in_idx, out_idx + extra, params) == OH_NN_INVALID_PARAMETER
    if lo > 1:
        assert g.op(op, in_idx, out_idx[:lo - 1], params) == OH_NN_INVALID_PARAMETER


@pytest.mark.parametrize("op", ALL_OPS, ids=op_id)
def test_more_parameter_tensors_than_accepted(op):
    g, in_idx, out_idx, params = valid_parts(op)
    spec = OPERATIONS[op]
    if spec.params:
        extra = params[0]  # the same tensor twice: max_params + 1 parameters
    else:
        extra = g.param(E.OH_NN_ADD_ACTIVATIONTYPE, OH_NN_INT8, [0])
    assert g.op(op, in_idx, out_idx, params + [extra]) == OH_NN_INVALID_PARAMETER


@pytest.mark.parametrize("op", [v for v in ALL_OPS if OPERATIONS[v].params], ids=op_id)
def test_parameter_of_a_type_the_operation_does_not_take(op):
    g, in_idx, out_idx, params = valid_parts(op)
    foreign = E.OH_NN_MUL_ACTIVATION_TYPE if op != O.OH_NN_OPS_MUL else E.OH_NN_ADD_ACTIVATIONTYPE
    bad = g.param(foreign, OH_NN_INT8, [0])
    assert g.op(op, in_idx, out_idx, params[1:] + [bad]) == OH_NN_INVALID_PARAMETER


@pytest.mark.parametrize("op", [v for v in ALL_OPS if OPERATIONS[v].params], ids=op_id)
def test_parameter_without_data(op):
    g, in_idx, out_idx, params = valid_parts(op)
    p = next(iter(OPERATIONS[op].params.values()))
    dt, _, shape, _ = param_case(op, p)
    empty = g.tensor(dt, shape, tensor_type=p.tensor_type)
    assert g.op(op, in_idx, out_idx, params[1:] + [empty]) == OH_NN_INVALID_PARAMETER


@pytest.mark.parametrize("op", [v for v in ALL_OPS if OPERATIONS[v].params], ids=op_id)
def test_parameter_of_the_wrong_data_type(op):
    g, in_idx, out_idx, params = valid_parts(op)
    p = next(iter(OPERATIONS[op].params.values()))
    dt, values, shape, _ = param_case(op, p)
    wrong = E.OH_NN_FLOAT64 if dt != E.OH_NN_FLOAT64 else F32
    bad = g.param(p.tensor_type, wrong, values, shape)
    assert g.op(op, in_idx, out_idx, params[1:] + [bad]) == OH_NN_INVALID_PARAMETER


ONE_ELEMENT = [(v, p) for v in ALL_OPS for p in OPERATIONS[v].params.values() if p.kind == "one"]


@pytest.mark.parametrize("op, p", ONE_ELEMENT, ids=[p.name for _, p in ONE_ELEMENT])
def test_scalar_parameter_with_two_elements(op, p):
    g, in_idx, out_idx, params = valid_parts(op)
    dt, values, _, _ = param_case(op, p)
    bad = g.param(p.tensor_type, dt, values * 2, [2])
    others = [i for i in params if g.model.tensors[i].tensor_type != p.tensor_type]
    assert g.op(op, in_idx, out_idx, others + [bad]) == OH_NN_INVALID_PARAMETER


# (operation, parameter type, data type, values, shape) refused for their value or shape.
BAD_VALUES = [
    (O.OH_NN_OPS_ADD, E.OH_NN_ADD_ACTIVATIONTYPE, OH_NN_INT8, [3], [1]),
    (O.OH_NN_OPS_CONV2D, E.OH_NN_CONV2D_ACTIVATION_TYPE, OH_NN_INT8, [-1], [1]),
    (O.OH_NN_OPS_AVG_POOL, E.OH_NN_AVG_POOL_PAD_MODE, OH_NN_INT8, [3], [1]),
    (O.OH_NN_OPS_AVG_POOL, E.OH_NN_AVG_POOL_PAD, OH_NN_INT64, [1, 2, 3], [3]),
    (O.OH_NN_OPS_MAX_POOL, E.OH_NN_MAX_POOL_PAD, OH_NN_INT8, [1, 1, 1, 1], [4]),
    (O.OH_NN_OPS_MAX_POOL, E.OH_NN_MAX_POOL_PAD_MODE, OH_NN_INT64, [1], [1]),
    (O.OH_NN_OPS_MAX_POOL, E.OH_NN_MAX_POOL_ROUND_MODE, OH_NN_INT32, [2], [1]),
    (O.OH_NN_OPS_AVG_POOL, E.OH_NN_AVG_POOL_ROUND_MODE, OH_NN_INT32, [-1], [1]),
    (O.OH_NN_OPS_ELTWISE, E.OH_NN_ELTWISE_MODE, OH_NN_INT8, [4], [1]),
    (O.OH_NN_OPS_PAD, E.OH_NN_PAD_PADDING_MODE, OH_NN_INT32, [4], [1]),
    (O.OH_NN_OPS_RESIZE_BILINEAR, E.OH_NN_RESIZE_BILINEAR_COORDINATE_TRANSFORM_MODE, OH_NN_INT8,
     [3], [1]),
    (O.OH_NN_OPS_DEPTH_TO_SPACE, E.OH_NN_DEPTH_TO_SPACE_MODE, OH_NN_INT32, [2], [1]),
    (O.OH_NN_OPS_LRN, E.OH_NN_LRN_NORM_REGION, OH_NN_INT32, [1], [1]),
    (O.OH_NN_OPS_QUANT_DTYPE_CAST, E.OH_NN_QUANT_DTYPE_CAST_SRC_T, OH_NN_INT64, [13], [1]),
    (O.OH_NN_OPS_CONSTANT_OF_SHAPE, E.OH_NN_CONSTANT_OF_SHAPE_DATA_TYPE, OH_NN_INT64, [-1], [1]),
    (O.OH_NN_OPS_SPACE_TO_BATCH_ND, E.OH_NN_SPACE_TO_BATCH_ND_BLOCK_SHAPE, OH_NN_INT64, [2, 2],
     [1, 2]),
    (O.OH_NN_OPS_SPACE_TO_BATCH_ND, E.OH_NN_SPACE_TO_BATCH_ND_BLOCK_SHAPE, OH_NN_INT64, [2, 2, 2],
     [3]),
    (O.OH_NN_OPS_SPACE_TO_BATCH_ND, E.OH_NN_SPACE_TO_BATCH_ND_PADDINGS, OH_NN_INT64, [1, 2, 3, 4],
     [4]),
    (O.OH_NN_OPS_BATCH_TO_SPACE_ND, E.OH_NN_BATCH_TO_SPACE_ND_CROPS, OH_NN_INT64, [1, 2], [2]),
    (O.OH_NN_OPS_LAYER_NORM, E.OH_NN_LAYER_NORM_EPSILON, F32, [0.1], [1]),  # must be 0-d
    (O.OH_NN_OPS_LAYER_NORM, E.OH_NN_LAYER_NORM_BEGIN_NORM_AXIS, OH_NN_INT64, [0], None),
    (O.OH_NN_OPS_LAYER_NORM, E.OH_NN_LAYER_NORM_BEGIN_NORM_AXIS, OH_NN_INT64, [3], None),
    (O.OH_NN_OPS_LAYER_NORM, E.OH_NN_LAYER_NORM_BEGIN_NORM_AXIS, OH_NN_INT64, [2], None),  # gamma
    (O.OH_NN_OPS_LAYER_NORM, E.OH_NN_LAYER_NORM_ELEMENTWISE_AFFINE, OH_NN_BOOL, [True], None),
]


@pytest.mark.parametrize("op, tensor_type, dt, values, shape", BAD_VALUES,
                         ids=[f"{op_id(b[0])}-{E.OH_NN_TensorType(b[1]).name}" for b in BAD_VALUES])
def test_refused_parameter_value(op, tensor_type, dt, values, shape):
    g, in_idx, out_idx, params = valid_parts(op)
    bad = g.param(tensor_type, dt, values, shape)
    assert g.op(op, in_idx, out_idx, [bad]) == OH_NN_INVALID_PARAMETER


def test_pad_and_pad_mode_are_interchangeable():
    g, in_idx, out_idx, _ = valid_parts(O.OH_NN_OPS_CONV2D)
    as_list = g.param(E.OH_NN_CONV2D_PAD_MODE, OH_NN_INT64, [1, 1, 2, 2])
    as_mode = g.param(E.OH_NN_CONV2D_PAD, OH_NN_INT8, [1])
    g.add_op(O.OH_NN_OPS_CONV2D, in_idx, out_idx, [as_list, as_mode])
    attrs = g.model.operations[0].attrs
    assert (list(attrs.padList), attrs.padMode) == ([1, 1, 2, 2], ht.PAD_MODE_VALID)


def test_pooling_accepts_the_other_poolings_parameter_types():
    g, in_idx, out_idx, _ = valid_parts(O.OH_NN_OPS_AVG_POOL)
    kernel = g.param(E.OH_NN_MAX_POOL_KERNEL_SIZE, OH_NN_INT64, [2, 2])
    g.add_op(O.OH_NN_OPS_AVG_POOL, in_idx, out_idx, [kernel])
    assert list(g.model.operations[0].attrs.kernelSize) == [2, 2]


def test_repeated_parameter_type_later_wins():
    g = Graph()
    x, y = g.tensor(F32, [2]), g.tensor(F32, [2])
    first = g.param(E.OH_NN_SOFTMAX_AXIS, OH_NN_INT64, [0])
    second = g.param(E.OH_NN_SOFTMAX_AXIS, OH_NN_INT64, [-1])
    assert g.op(O.OH_NN_OPS_SOFTMAX, [x], [y], [first, second]) == OH_NN_INVALID_PARAMETER  # max 1
    g2, in_idx, out_idx, _ = valid_parts(O.OH_NN_OPS_MAX_POOL)
    a = g2.param(E.OH_NN_MAX_POOL_STRIDE, OH_NN_INT64, [1, 1])
    b = g2.param(E.OH_NN_MAX_POOL_STRIDE, OH_NN_INT64, [2, 2])
    g2.add_op(O.OH_NN_OPS_MAX_POOL, in_idx, out_idx, [a, b])
    assert list(g2.model.operations[0].attrs.strides) == [2, 2]


def test_first_element_rule_reads_the_first_of_several():
    g, in_idx, out_idx, _ = valid_parts(O.OH_NN_OPS_ADD)
    act = g.param(E.OH_NN_ADD_ACTIVATIONTYPE, OH_NN_INT8, [1, 2, 0])
    g.add_op(O.OH_NN_OPS_ADD, in_idx, out_idx, [act])
    assert g.model.operations[0].attrs.activationType == ht.ACTIVATION_TYPE_RELU


@pytest.mark.parametrize("op, weight_shape", [(O.OH_NN_OPS_CONV2D, [3, 2, 2]),
                                              (O.OH_NN_OPS_CONV2D_TRANSPOSE, [3, 2, 2, 2, 1]),
                                              (O.OH_NN_OPS_DEPTHWISE_CONV2D_NATIVE, [4, 4])])
def test_convolution_weight_must_be_4d(op, weight_shape):
    g = Graph()
    x, w, b, y = (g.tensor(F32, [1, 4, 4, 2]), g.tensor(F32, weight_shape), g.tensor(F32, [3]),
                  g.tensor(F32, [1, 4, 4, 3]))
    assert g.op(op, [x, w, b], [y]) == OH_NN_INVALID_PARAMETER


def test_depthwise_input_must_be_4d_and_nchw_channels_count():
    g = Graph()
    x3, w, b, y = (g.tensor(F32, [4, 4, 2]), g.tensor(F32, [4, 2, 2, 1]), g.tensor(F32, [4]),
                   g.tensor(F32, [1, 4, 4, 4]))
    assert g.op(O.OH_NN_OPS_DEPTHWISE_CONV2D_NATIVE, [x3, w, b], [y]) == OH_NN_INVALID_PARAMETER
    nchw = g.tensor(F32, [1, 2, 5, 5], fmt=E.OH_NN_FORMAT_NCHW)
    g.add_op(O.OH_NN_OPS_DEPTHWISE_CONV2D_NATIVE, [nchw, w, b], [y])
    attrs = g.model.operations[0].attrs
    assert (attrs.group, attrs.inChannel, attrs.outChannel) == (2, 2, 4)


def test_layout_attribute_follows_an_nchw_input():
    g = Graph()
    x, y = g.tensor(F32, [1, 2, 4, 4], fmt=E.OH_NN_FORMAT_NCHW), g.tensor(F32, [1, 2, 2, 2])
    g.add_op(O.OH_NN_OPS_MAX_POOL, [x], [y])
    assert g.model.operations[0].attrs.format == ht.FORMAT_NCHW


def test_cast_target_must_be_a_known_constant():
    g = Graph()
    x, y = g.tensor(F32, [2]), g.tensor(OH_NN_INT32, [2])
    unset = g.tensor(OH_NN_INT32, [1])
    assert g.op(O.OH_NN_OPS_CAST, [x, unset], [y]) == OH_NN_INVALID_PARAMETER
    bad = g.tensor(OH_NN_INT32, [1], [13])
    assert g.op(O.OH_NN_OPS_CAST, [x, bad], [y]) == OH_NN_INVALID_PARAMETER
    short = g.tensor(OH_NN_INT8, [2], [4, 0])
    assert g.op(O.OH_NN_OPS_CAST, [x, short], [y]) == OH_NN_INVALID_PARAMETER
    wide = g.tensor(OH_NN_INT64, [1], [E.OH_NN_FLOAT16])
    g.add_op(O.OH_NN_OPS_CAST, [x, wide], [y])
    assert g.model.operations[0].constants[wide].tolist() == [HDI_TYPES[E.OH_NN_FLOAT16]]


def test_full_connection_use_axis_false_with_an_axis_in_either_order():
    for order in (0, 1):
        g, in_idx, out_idx, _ = valid_parts(O.OH_NN_OPS_FULL_CONNECTION)
        no = g.param(E.OH_NN_FULL_CONNECTION_USE_AXIS, OH_NN_BOOL, [False])
        axis = g.param(E.OH_NN_FULL_CONNECTION_AXIS, OH_NN_INT64, [1])
        params = [no, axis] if order == 0 else [axis, no]
        assert g.op(O.OH_NN_OPS_FULL_CONNECTION, in_idx, out_idx, params) == OH_NN_INVALID_PARAMETER


def test_full_connection_has_bias_follows_the_operands_unless_given():
    g = Graph()
    x, w, y = g.tensor(F32, [2, 4]), g.tensor(F32, [3, 4]), g.tensor(F32, [2, 3])
    g.add_op(O.OH_NN_OPS_FULL_CONNECTION, [x, w], [y])
    assert g.model.operations[0].attrs.hasBias is False
    b = g.tensor(F32, [3])
    no = g.param(E.OH_NN_FULL_CONNECTION_HAS_BIAS, OH_NN_BOOL, [False])
    g.add_op(O.OH_NN_OPS_FULL_CONNECTION, [x, w, b], [y], [no])
    assert g.model.operations[1].attrs.hasBias is False
    assert g.op(O.OH_NN_OPS_FULL_CONNECTION, [x, w, b, b], [y]) == OH_NN_INVALID_PARAMETER


def test_lstm_projection_size_is_read_as_int64():
    g, in_idx, out_idx, _ = valid_parts(O.OH_NN_OPS_LSTM)
    proj = g.param(E.OH_NN_LSTM_PROJ_SIZE, OH_NN_INT64, [5])
    g.add_op(O.OH_NN_OPS_LSTM, in_idx, out_idx, [proj])
    assert g.model.operations[0].attrs.projSize == 5


def test_space_to_batch_sends_both_padding_rows():
    g, in_idx, out_idx, _ = valid_parts(O.OH_NN_OPS_SPACE_TO_BATCH_ND)
    pads = g.param(E.OH_NN_SPACE_TO_BATCH_ND_PADDINGS, OH_NN_INT64, [1, 2, 3, 4], [2, 2])
    g.add_op(O.OH_NN_OPS_SPACE_TO_BATCH_ND, in_idx, out_idx, [pads])
    assert [list(r.values) for r in g.model.operations[0].attrs.paddings] == [[1, 2], [3, 4]]
