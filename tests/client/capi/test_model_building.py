"""OH_NNModel (capi.md 2.6–2.13): one test per condition-table row of building a model (the
lowering to HDI, GetAvailableOperations, AddTensor and threads: test_model_lowering.py)."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.client.capi import enums as E
from nnrt.client.capi.enums import (
    OH_NN_FAILED,
    OH_NN_FLOAT32,
    OH_NN_INT8,
    OH_NN_INVALID_PARAMETER,
    OH_NN_OPERATION_FORBIDDEN,
    OH_NN_SUCCESS,
)
from nnrt.client.capi.model import (
    OH_NNModel,
    OH_NNModel_AddOperation,
    OH_NNModel_AddTensor,
    OH_NNModel_AddTensorToModel,
    OH_NNModel_Construct,
    OH_NNModel_Destroy,
    OH_NNModel_Finish,
    OH_NNModel_GetAvailableOperations,
    OH_NNModel_SetTensorData,
    OH_NNModel_SetTensorQuantParams,
    OH_NNModel_SetTensorType,
    OH_NNModel_SpecifyInputsAndOutputs,
)
from nnrt.client.capi.quant_param import (
    OH_NNQuantParam_Create,
    OH_NNQuantParam_Destroy,
    OH_NNQuantParam_SetNumBits,
    OH_NNQuantParam_SetScales,
    OH_NNQuantParam_SetZeroPoints,
)
from nnrt.client.capi.structs import OH_NN_Tensor, OH_NN_UInt32Array
from nnrt.client.capi.tensor_desc import (
    OH_NNTensorDesc_Create,
    OH_NNTensorDesc_Destroy,
    OH_NNTensorDesc_SetShape,
)
from tests.client.capi.util_capi import Graph, desc, u32

F32 = OH_NN_FLOAT32


def quant(bits=(8,), zero_points=(0,), scales=(0.5,)):
    qp = OH_NNQuantParam_Create()
    OH_NNQuantParam_SetNumBits(qp, list(bits), len(bits))
    OH_NNQuantParam_SetZeroPoints(qp, list(zero_points), len(zero_points))
    OH_NNQuantParam_SetScales(qp, list(scales), len(scales))
    return qp


def add_graph(fuse: int = 0) -> tuple[Graph, int, int, int, int]:
    """x[2,3] + y[2,3] -> z, with an activation parameter tensor between them."""
    g = Graph()
    x = g.tensor(F32, [2, 3])
    act = g.param(E.OH_NN_ADD_ACTIVATIONTYPE, OH_NN_INT8, [fuse])
    y = g.tensor(F32, [2, 3])
    z = g.tensor(F32, [2, 3])
    g.add_op(E.OH_NN_OPS_ADD, [x, y], [z], [act])
    return g, x, act, y, z


def finished_add() -> OH_NNModel:
    g, x, _, y, z = add_graph()
    return g.finish([x, y], [z])


def destroyed_model() -> OH_NNModel:
    m = OH_NNModel_Construct()
    OH_NNModel_Destroy(m)
    return m


BAD_MODELS = {"NULL": lambda: None, "destroyed": destroyed_model,
              "wrong type": OH_NNTensorDesc_Create}


# -- 2.6 / 2.14 ------------------------------------------------------------------------------


def test_construct_is_an_empty_building_model():
    m = OH_NNModel_Construct()
    assert isinstance(m, OH_NNModel)
    assert not m.finished and m.tensors == [] and m.operations == []
    with pytest.raises(ValueError):
        m.lowered()


class TestDestroy:
    def test_null_does_nothing(self):
        assert OH_NNModel_Destroy(None) is None

    def test_wrong_type_does_nothing(self):
        d = OH_NNTensorDesc_Create()
        assert OH_NNModel_Destroy(d) is None
        assert not d.destroyed

    def test_twice_does_nothing(self):
        m = OH_NNModel_Construct()
        assert OH_NNModel_Destroy(m) is None
        assert OH_NNModel_Destroy(m) is None
        assert m.destroyed

    def test_later_use_is_invalid(self):
        m = finished_add()
        OH_NNModel_Destroy(m)
        assert OH_NNModel_AddTensorToModel(m, desc([1])) == OH_NN_INVALID_PARAMETER
        assert OH_NNModel_Finish(m) == OH_NN_INVALID_PARAMETER
        assert OH_NNModel_GetAvailableOperations(m, 0) == (OH_NN_INVALID_PARAMETER, None)


# -- 2.7 -------------------------------------------------------------------------------------


class TestAddTensorToModel:
    @pytest.mark.parametrize("kind", BAD_MODELS)
    def test_bad_model(self, kind):
        assert OH_NNModel_AddTensorToModel(BAD_MODELS[kind](), desc([1])) == OH_NN_INVALID_PARAMETER

    def test_null_desc(self):
        assert OH_NNModel_AddTensorToModel(OH_NNModel_Construct(), None) == OH_NN_INVALID_PARAMETER

    def test_destroyed_desc(self):
        d = desc([1])
        OH_NNTensorDesc_Destroy(d)
        assert OH_NNModel_AddTensorToModel(OH_NNModel_Construct(), d) == OH_NN_INVALID_PARAMETER

    def test_after_finish_is_forbidden(self):  # ours (capi.md 5.2)
        m = finished_add()
        assert OH_NNModel_AddTensorToModel(m, desc([1])) == OH_NN_OPERATION_FORBIDDEN
        assert len(m.tensors) == 4

    @pytest.mark.parametrize("shape", [[2, 0], [-2, 3], [1, -5]])
    def test_zero_or_below_minus_one(self, shape):
        m = OH_NNModel_Construct()
        assert OH_NNModel_AddTensorToModel(m, desc(shape)) == OH_NN_INVALID_PARAMETER
        assert m.tensors == []

    def test_byte_length_over_uint32_max(self):
        m = OH_NNModel_Construct()
        assert OH_NNModel_AddTensorToModel(m, desc([65536, 16384])) == OH_NN_INVALID_PARAMETER
        assert OH_NNModel_AddTensorToModel(m, desc([65536, 16383, 4], E.OH_NN_UINT8)) == 0

    def test_dynamic_dimension_counts_as_one_in_the_byte_length(self):
        m = OH_NNModel_Construct()
        assert OH_NNModel_AddTensorToModel(m, desc([-1, 65536, 16383])) == OH_NN_SUCCESS

    def test_success_takes_type_shape_format_and_name(self):
        m = OH_NNModel_Construct()
        assert OH_NNModel_AddTensorToModel(m, desc([1, -1, 3], F32, "in", E.OH_NN_FORMAT_NCHW)) == 0
        assert OH_NNModel_AddTensorToModel(m, desc(None, OH_NN_INT8)) == 0
        a, b = m.tensors
        assert (a.data_type, a.shape, a.format, a.name, a.tensor_type) == (F32, [1, -1, 3], 1, "in", 0)
        assert (b.data_type, b.shape, b.name, b.quant, b.data) == (OH_NN_INT8, [], "Tensor: 1", [], None)

    def test_descriptor_stays_the_callers(self):
        d = desc([2])
        m = OH_NNModel_Construct()
        assert OH_NNModel_AddTensorToModel(m, d) == 0
        OH_NNTensorDesc_SetShape(d, [5], 1)
        assert m.tensors[0].shape == [2] and not d.destroyed


# -- 2.8 -------------------------------------------------------------------------------------


def model_with(*descs) -> OH_NNModel:
    m = OH_NNModel_Construct()
    for d in descs:
        assert OH_NNModel_AddTensorToModel(m, d) == 0
    return m


class TestSetTensorData:
    data = np.arange(6, dtype=np.float32)

    @pytest.mark.parametrize("kind", BAD_MODELS)
    def test_bad_model(self, kind):
        assert OH_NNModel_SetTensorData(BAD_MODELS[kind](), 0, self.data, 24) == OH_NN_INVALID_PARAMETER

    def test_null_buffer(self):
        assert OH_NNModel_SetTensorData(model_with(desc([6])), 0, None, 24) == OH_NN_INVALID_PARAMETER

    def test_not_a_buffer(self):
        assert OH_NNModel_SetTensorData(model_with(desc([6])), 0, [1.0] * 6, 24) == OH_NN_INVALID_PARAMETER

    def test_zero_length(self):
        assert OH_NNModel_SetTensorData(model_with(desc([6])), 0, self.data, 0) == OH_NN_INVALID_PARAMETER

    def test_finished(self):
        assert OH_NNModel_SetTensorData(finished_add(), 0, self.data, 24) == OH_NN_OPERATION_FORBIDDEN

    @pytest.mark.parametrize("index", [1, -1, 1 << 40, "0"])
    def test_index_out_of_range(self, index):
        assert OH_NNModel_SetTensorData(model_with(desc([6])), index, self.data, 24) == OH_NN_INVALID_PARAMETER

    def test_already_has_data(self):
        m = model_with(desc([6]))
        assert OH_NNModel_SetTensorData(m, 0, self.data, 24) == OH_NN_SUCCESS
        assert OH_NNModel_SetTensorData(m, 0, self.data, 24) == OH_NN_INVALID_PARAMETER

    def test_dynamic_tensor(self):
        assert OH_NNModel_SetTensorData(model_with(desc([-1, 6])), 0, self.data, 24) == \
            OH_NN_OPERATION_FORBIDDEN

    @pytest.mark.parametrize("length", [20, 28])
    def test_length_not_the_byte_length(self, length):
        data = np.zeros(7, np.float32)
        assert OH_NNModel_SetTensorData(model_with(desc([6])), 0, data, length) == OH_NN_INVALID_PARAMETER

    def test_length_larger_than_the_buffer(self):
        assert OH_NNModel_SetTensorData(model_with(desc([6])), 0, bytes(20), 24) == OH_NN_INVALID_PARAMETER

    def test_success_copies(self):
        m = model_with(desc([2, 3]))
        source = self.data.copy()
        assert OH_NNModel_SetTensorData(m, 0, source, 24) == OH_NN_SUCCESS
        source[:] = -1
        np.testing.assert_array_equal(m.tensors[0].data, np.arange(6, dtype=np.float32).reshape(2, 3))

    def test_any_buffer_object_and_longer_buffers(self):
        m = model_with(desc([2], OH_NN_INT8), desc([3]), desc(None, E.OH_NN_INT64))
        assert OH_NNModel_SetTensorData(m, 0, bytearray(b"\x01\x02\x03"), 2) == OH_NN_SUCCESS
        strided = np.arange(6, dtype=np.float32)[::2]
        assert OH_NNModel_SetTensorData(m, 1, strided, 12) == OH_NN_SUCCESS
        assert OH_NNModel_SetTensorData(m, 2, memoryview(np.array([7], np.int64)), 8) == OH_NN_SUCCESS
        assert m.tensors[0].data.tolist() == [1, 2]
        assert m.tensors[1].data.tolist() == [0, 2, 4]
        assert m.tensors[2].data.shape == () and int(m.tensors[2].data) == 7


# -- 2.9 -------------------------------------------------------------------------------------


class TestSetTensorQuantParams:
    @pytest.mark.parametrize("kind", BAD_MODELS)
    def test_bad_model(self, kind):
        assert OH_NNModel_SetTensorQuantParams(BAD_MODELS[kind](), 0, quant()) == OH_NN_INVALID_PARAMETER

    def test_null_quant_param(self):
        assert OH_NNModel_SetTensorQuantParams(model_with(desc([1])), 0, None) == OH_NN_INVALID_PARAMETER

    def test_destroyed_quant_param(self):
        qp = quant()
        OH_NNQuantParam_Destroy(qp)
        assert OH_NNModel_SetTensorQuantParams(model_with(desc([1])), 0, qp) == OH_NN_INVALID_PARAMETER

    def test_finished(self):
        assert OH_NNModel_SetTensorQuantParams(finished_add(), 0, quant()) == OH_NN_OPERATION_FORBIDDEN

    def test_index_out_of_range(self):
        assert OH_NNModel_SetTensorQuantParams(model_with(desc([1])), 1, quant()) == OH_NN_INVALID_PARAMETER

    @pytest.mark.parametrize("bits, zps, scales", [((8, 8), (0,), (1.0,)), ((8,), (0, 1), (1.0,)),
                                                   ((8,), (0,), (1.0, 2.0))])
    def test_counts_differ(self, bits, zps, scales):
        m = model_with(desc([2]))
        assert OH_NNModel_SetTensorQuantParams(m, 0, quant(bits, zps, scales)) == OH_NN_INVALID_PARAMETER

    def test_bit_width_not_8_clears(self):
        m = model_with(desc([2]))
        assert OH_NNModel_SetTensorQuantParams(m, 0, quant()) == OH_NN_SUCCESS
        assert OH_NNModel_SetTensorQuantParams(m, 0, quant((4,))) == OH_NN_INVALID_PARAMETER
        assert m.tensors[0].quant == []

    def test_success_copies_and_empty_clears(self):
        m = model_with(desc([2]))
        qp = quant((8, 8), (1, -2), (0.5, 0.25))
        assert OH_NNModel_SetTensorQuantParams(m, 0, qp) == OH_NN_SUCCESS
        OH_NNQuantParam_SetScales(qp, [9.0, 9.0], 2)
        assert m.tensors[0].quant == [(8, 1, 0.5), (8, -2, 0.25)]
        assert OH_NNModel_SetTensorQuantParams(m, 0, OH_NNQuantParam_Create()) == OH_NN_SUCCESS
        assert m.tensors[0].quant == []


# -- 2.10 ------------------------------------------------------------------------------------


class TestSetTensorType:
    @pytest.mark.parametrize("kind", BAD_MODELS)
    def test_bad_model(self, kind):
        assert OH_NNModel_SetTensorType(BAD_MODELS[kind](), 0, 1) == OH_NN_INVALID_PARAMETER

    @pytest.mark.parametrize("value", [-1, 163, None])
    def test_type_out_of_range(self, value):
        assert OH_NNModel_SetTensorType(model_with(desc([1])), 0, value) == OH_NN_INVALID_PARAMETER

    def test_finished(self):
        assert OH_NNModel_SetTensorType(finished_add(), 0, 1) == OH_NN_OPERATION_FORBIDDEN

    def test_index_out_of_range(self):
        assert OH_NNModel_SetTensorType(model_with(desc([1])), 1, 1) == OH_NN_INVALID_PARAMETER

    @pytest.mark.parametrize("value", [0, 1, 162])
    def test_success(self, value):
        m = model_with(desc([1]))
        assert OH_NNModel_SetTensorType(m, 0, value) == OH_NN_SUCCESS
        assert m.tensors[0].tensor_type == value


# -- 2.11 (generic rows; the operator-specific row 10 is in test_operations_lowering.py) ---


def three_tensors() -> Graph:
    g = Graph()
    for _ in range(3):
        g.tensor(F32, [2])
    g.param(E.OH_NN_ADD_ACTIVATIONTYPE, OH_NN_INT8, [0])  # 3
    return g


class TestAddOperation:
    def add(self, g, op=E.OH_NN_OPS_ADD, params=u32([3]), ins=u32([0, 1]), outs=u32([2])):
        return OH_NNModel_AddOperation(g.model, op, params, ins, outs)

    @pytest.mark.parametrize("kind", BAD_MODELS)
    def test_row1_bad_model(self, kind):
        assert OH_NNModel_AddOperation(BAD_MODELS[kind](), 1, u32([]), u32([0, 1]), u32([2])) == 2

    @pytest.mark.parametrize("which", ["params", "ins", "outs"])
    def test_row1_null_array(self, which):
        assert self.add(three_tensors(), **{which: None}) == OH_NN_INVALID_PARAMETER

    def test_row1_array_not_a_struct(self):
        assert self.add(three_tensors(), ins=[0, 1]) == OH_NN_INVALID_PARAMETER

    def test_row2_finished(self):
        m = finished_add()
        code = OH_NNModel_AddOperation(m, E.OH_NN_OPS_ADD, u32([1]), u32([0, 2]), u32([3]))
        assert code == OH_NN_OPERATION_FORBIDDEN

    @pytest.mark.parametrize("which, size", [("ins", 0), ("outs", 0), ("ins", 201), ("outs", 201)])
    def test_row3_size_zero_or_over_200(self, which, size):
        arr = OH_NN_UInt32Array(data=[0] * size if size else None, size=size)
        assert self.add(three_tensors(), **{which: arr}) == OH_NN_INVALID_PARAMETER

    @pytest.mark.parametrize("which", ["ins", "outs"])
    def test_row4_data_null_with_size(self, which):
        assert self.add(three_tensors(), **{which: OH_NN_UInt32Array(None, 1)}) == 2

    def test_row4_size_larger_than_data(self):
        assert self.add(three_tensors(), ins=OH_NN_UInt32Array([0], 2)) == OH_NN_INVALID_PARAMETER

    def test_row4_non_null_empty_params(self):
        assert self.add(three_tensors(), params=OH_NN_UInt32Array([], 0)) == OH_NN_INVALID_PARAMETER

    @pytest.mark.parametrize("which, arr", [("ins", u32([0, 9])), ("outs", u32([9])),
                                            ("ins", OH_NN_UInt32Array([0, -1], 2))])
    def test_row5_index_out_of_range(self, which, arr):
        assert self.add(three_tensors(), **{which: arr}) == OH_NN_INVALID_PARAMETER

    @pytest.mark.parametrize("which, arr", [("ins", u32([0, 3])), ("outs", u32([3]))])
    def test_row6_operand_not_a_data_tensor(self, which, arr):
        assert self.add(three_tensors(), **{which: arr}) == OH_NN_INVALID_PARAMETER

    def test_row7_same_tensor_in_and_out(self):
        assert self.add(three_tensors(), outs=u32([1])) == OH_NN_INVALID_PARAMETER

    def test_row8_param_index_out_of_range(self):
        assert self.add(three_tensors(), params=u32([7])) == OH_NN_INVALID_PARAMETER

    def test_row8_param_data_null_with_size(self):
        assert self.add(three_tensors(), params=OH_NN_UInt32Array(None, 1)) == OH_NN_INVALID_PARAMETER

    @pytest.mark.parametrize("op", [0, 109, -1, "ADD", 1.0])
    def test_row9_not_an_operation(self, op):
        assert self.add(three_tensors(), op=op) == OH_NN_INVALID_PARAMETER

    def test_row10_operator_specific(self):
        g = three_tensors()
        assert self.add(g, ins=u32([0])) == OH_NN_INVALID_PARAMETER  # Add needs 2 inputs
        assert g.model.operations == []

    def test_success(self):
        g = three_tensors()
        assert self.add(g) == OH_NN_SUCCESS
        assert self.add(g, params=u32(None)) == OH_NN_SUCCESS  # parameters are optional
        assert len(g.model.operations) == 2


# -- 2.12 ------------------------------------------------------------------------------------


class TestSpecifyInputsAndOutputs:
    def spec(self, m, ins=u32([0, 1]), outs=u32([2])):
        return OH_NNModel_SpecifyInputsAndOutputs(m, ins, outs)

    @pytest.mark.parametrize("kind", BAD_MODELS)
    def test_bad_model(self, kind):
        assert self.spec(BAD_MODELS[kind]()) == OH_NN_INVALID_PARAMETER

    @pytest.mark.parametrize("which", ["ins", "outs"])
    def test_null_array(self, which):
        assert self.spec(three_tensors().model, **{which: None}) == OH_NN_INVALID_PARAMETER

    def test_finished(self):
        assert self.spec(finished_add()) == OH_NN_OPERATION_FORBIDDEN

    def test_twice(self):
        m = three_tensors().model
        assert self.spec(m) == OH_NN_SUCCESS
        assert self.spec(m) == OH_NN_OPERATION_FORBIDDEN

    @pytest.mark.parametrize("ins, outs", [
        (u32(None), u32([2])),                              # rule 3: empty
        (u32([0]), OH_NN_UInt32Array([0] * 201, 201)),      # rule 3: over 200
        (OH_NN_UInt32Array(None, 2), u32([2])),             # rule 4
        (OH_NN_UInt32Array([0], 3), u32([2])),              # rule 4: size > data
        (u32([0, 5]), u32([2])),                            # rule 5
        (u32([0, 3]), u32([2])),                            # rule 6: a parameter tensor
        (u32([0, 1]), u32([1])),                            # rule 7
    ])
    def test_rules_3_to_7(self, ins, outs):
        m = three_tensors().model
        assert self.spec(m, ins, outs) == OH_NN_INVALID_PARAMETER
        assert m.inputs is None
        assert self.spec(m) == OH_NN_SUCCESS  # a failed call does not count

    def test_success_keeps_the_order(self):
        m = three_tensors().model
        assert self.spec(m, u32([1, 0]), u32([2])) == OH_NN_SUCCESS
        assert (m.inputs, m.outputs) == ([1, 0], [2])


# -- 2.13 ------------------------------------------------------------------------------------


class TestFinish:
    @pytest.mark.parametrize("kind", BAD_MODELS)
    def test_bad_model(self, kind):
        assert OH_NNModel_Finish(BAD_MODELS[kind]()) == OH_NN_INVALID_PARAMETER

    def test_already_finished(self):
        assert OH_NNModel_Finish(finished_add()) == OH_NN_OPERATION_FORBIDDEN

    def test_no_tensor(self):
        assert OH_NNModel_Finish(OH_NNModel_Construct()) == OH_NN_OPERATION_FORBIDDEN

    def test_no_operation(self):
        g = three_tensors()
        assert OH_NNModel_SpecifyInputsAndOutputs(g.model, u32([0, 1]), u32([2])) == 0
        assert OH_NNModel_Finish(g.model) == OH_NN_OPERATION_FORBIDDEN

    def test_inputs_and_outputs_not_specified(self):
        g, *_ = add_graph()
        assert OH_NNModel_Finish(g.model) == OH_NN_OPERATION_FORBIDDEN
        assert not g.model.finished

    def test_node_attributes_cannot_be_produced(self):
        g = Graph()
        x, y = g.tensor(E.OH_NN_INT8, [2]), g.tensor(F32, [2])
        src = g.param(E.OH_NN_QUANT_DTYPE_CAST_SRC_T, E.OH_NN_INT64, [E.OH_NN_INT8])
        g.add_op(E.OH_NN_OPS_QUANT_DTYPE_CAST, [x], [y], [src])  # no dstT: accepted here
        assert OH_NNModel_SpecifyInputsAndOutputs(g.model, u32([x]), u32([y])) == 0
        assert OH_NNModel_Finish(g.model) == OH_NN_FAILED
        assert not g.model.finished

    def test_success_freezes(self):
        m = finished_add()
        assert m.finished
        assert OH_NNModel_SetTensorType(m, 0, 0) == OH_NN_OPERATION_FORBIDDEN
        assert OH_NNModel_AddOperation(m, 1, u32([]), u32([0, 2]), u32([3])) == OH_NN_OPERATION_FORBIDDEN
        assert OH_NNModel_SpecifyInputsAndOutputs(m, u32([0]), u32([3])) == OH_NN_OPERATION_FORBIDDEN
        assert OH_NNModel_AddTensor(m, OH_NN_Tensor(F32, 1, [1])) == OH_NN_OPERATION_FORBIDDEN
