"""OH_NNModel (capi.md Appendix A, 2.15, 2.16): the lowering to HDI, GetAvailableOperations
against a real CPU driver, the deprecated AddTensor, and building from several threads (the
condition tables of 2.6–2.13: test_model_building.py)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from nnrt.client.capi import enums as E
from nnrt.client.capi.enums import (
    OH_NN_CONNECTION_EXCEPTION,
    OH_NN_FAILED,
    OH_NN_INT8,
    OH_NN_INVALID_PARAMETER,
    OH_NN_OPERATION_FORBIDDEN,
    OH_NN_SUCCESS,
)
from nnrt.client.capi.model import (
    OH_NNModel,
    OH_NNModel_AddTensor,
    OH_NNModel_AddTensorToModel,
    OH_NNModel_Construct,
    OH_NNModel_Destroy,
    OH_NNModel_GetAvailableOperations,
    OH_NNModel_SetTensorQuantParams,
    OH_NNModel_SetTensorType,
)
from nnrt.client.capi.structs import OH_NN_QuantParam, OH_NN_Tensor
from nnrt.client.core.device import registry
from nnrt.client.core.driver import DriverGone
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from tests.client.capi.conftest import run_lowered
from tests.client.capi.util_capi import Graph, desc
from tests.client.capi.test_model_building import BAD_MODELS, F32, add_graph, finished_add, quant
from tests.conftest import in_threads


# -- Appendix A: the lowering ----------------------------------------------------------------


class TestLowering:
    def test_parameters_folded_tensors_renumbered(self):
        g = Graph()
        act = g.param(E.OH_NN_ADD_ACTIVATIONTYPE, OH_NN_INT8, [E.OH_NN_FUSED_RELU])      # 0
        x = g.tensor(F32, [2, 3], name="x")                                               # 1
        w = g.constant(np.ones((2, 3), np.float32))                                       # 2
        axis = g.param(E.OH_NN_SOFTMAX_AXIS, E.OH_NN_INT64, [-1])                         # 3
        s = g.tensor(F32, [2, 3])                                                         # 4
        y = g.tensor(F32, [2, 3], name="y")                                               # 5
        g.add_op(E.OH_NN_OPS_ADD, [x, w], [s], [act])
        g.add_op(E.OH_NN_OPS_SOFTMAX, [s], [y], [axis])
        lowered = g.finish([x], [y]).lowered()
        hdi = lowered.hdi
        model = hdi.model()
        assert model.name == "NNR_Model"
        assert [t.name for t in model.allTensors] == ["Tensor: 1", "Tensor: 2", "Tensor: 4", "Tensor: 5"]
        assert list(model.inputIndex) == [0] and list(model.outputIndex) == [3]
        add, softmax = model.nodes
        assert (add.name, add.nodeType, list(add.inputIndex), list(add.outputIndex)) == \
            ("Add:0", na.NODE_TYPE_ADD_FUSION, [0, 1], [2])
        assert add.add_fusion.activationType == ht.ACTIVATION_TYPE_RELU  # not dropped (upstream bug)
        assert (softmax.name, list(softmax.inputIndex), list(softmax.outputIndex)) == ("Softmax:1", [2], [3])
        assert list(softmax.softmax.axis) == [-1]
        (sub,) = model.subGraph
        assert (sub.name, list(sub.inputIndices), list(sub.outputIndices), list(sub.nodeIndices)) == \
            ("NNRt_SubGraph", [0], [3], [0, 1])
        assert list(hdi.constants) == [1]
        np.testing.assert_array_equal(hdi.constants[1], np.ones((2, 3), np.float32))
        assert [(d.name, d.data_type, d.shape, d.format) for d in lowered.inputs] == [("x", F32, [2, 3], 0)]
        assert [d.name for d in lowered.outputs] == ["y"]

    def test_tensor_types_formats_and_quant_params(self):
        g = Graph()
        a = g.tensor(E.OH_NN_INT8, [1, 2, 2, 1], fmt=E.OH_NN_FORMAT_NCHW, quant=[(8, 3, 0.5)])
        b = g.tensor(E.OH_NN_INT8, [1, 2, 2, 1], fmt=E.OH_NN_FORMAT_NHWC, quant=[(8, -1, 0.25)])
        c = g.tensor(E.OH_NN_INT8, [1, 2, 2, 1], fmt=E.OH_NN_FORMAT_ND, quant=[(8, 0, 1.0)])
        d = g.tensor(E.OH_NN_INT8, [1, 2, 2, 1])
        g.add_op(E.OH_NN_OPS_ADD, [a, b], [c])
        g.add_op(E.OH_NN_OPS_SUB, [c, b], [d])
        model = g.finish([a, b], [d]).lowered().hdi.model()
        tensors = model.allTensors
        assert [t.format for t in tensors] == [ht.FORMAT_NCHW, ht.FORMAT_NHWC, ht.FORMAT_NONE, ht.FORMAT_NONE]
        assert {t.dataType for t in tensors} == {ht.DATA_TYPE_INT8}
        assert [(q.numBits, q.zeroPoint, q.scale) for q in tensors[0].quantParams] == [(8, 3, 0.5)]
        assert [(q.numBits, q.zeroPoint, q.scale) for q in tensors[1].quantParams] == [(8, -1, 0.25)]
        assert list(tensors[3].quantParams) == []
        # quantType: the first output had quant params at AddOperation time (Add), not (Sub).
        assert [n.quantType for n in model.nodes] == [ht.QUANT_TYPE_ALL, ht.QUANT_TYPE_NONE]

    def test_quant_type_is_taken_at_add_operation_time(self):
        g = Graph()
        x, y = g.tensor(F32, [2]), g.tensor(F32, [2])
        g.add_op(E.OH_NN_OPS_RELU, [x], [y])
        assert OH_NNModel_SetTensorQuantParams(g.model, y, quant()) == 0  # too late
        (node,) = g.finish([x], [y]).lowered().hdi.nodes
        assert node.quantType == ht.QUANT_TYPE_NONE

    def test_every_parameter_kind_leaves_the_graph(self):
        # Upstream leaks FullConnection HAS_BIAS/USE_AXIS, pooling GLOBAL and reduce COEFF.
        g = Graph()
        x = g.tensor(F32, [2, 4])
        w = g.constant(np.ones((3, 4), np.float32))
        b = g.constant(np.zeros(3, np.float32))
        has_bias = g.param(E.OH_NN_FULL_CONNECTION_HAS_BIAS, E.OH_NN_BOOL, [True])
        use_axis = g.param(E.OH_NN_FULL_CONNECTION_USE_AXIS, E.OH_NN_BOOL, [True])
        h = g.tensor(F32, [2, 3])
        g.add_op(E.OH_NN_OPS_FULL_CONNECTION, [x, w, b], [h], [has_bias, use_axis])
        p_in = g.tensor(F32, [1, 2, 2, 3])
        glob = g.param(E.OH_NN_MAX_POOL_GLOBAL, E.OH_NN_BOOL, [True])
        p_out = g.tensor(F32, [1, 1, 1, 3])
        g.add_op(E.OH_NN_OPS_MAX_POOL, [p_in], [p_out], [glob])
        axes = g.constant(np.array([1], np.int32), E.OH_NN_INT32)
        coeff = g.param(E.OH_NN_REDUCE_SUM_COEFF, F32, [2.0])
        r = g.tensor(F32, [2])
        g.add_op(E.OH_NN_OPS_REDUCE_SUM, [h, axes], [r], [coeff])
        model = g.finish([x, p_in], [r, p_out]).lowered().hdi.model()
        kept = [int(t.name.split(": ")[1]) for t in model.allTensors]
        assert not {has_bias, use_axis, glob, coeff} & set(kept)
        assert kept == [x, w, b, h, p_in, p_out, axes, r]
        fc, pool, reduce = model.nodes
        assert (fc.full_connection.hasBias, fc.full_connection.useAxis) == (True, True)
        assert pool.max_pool_fusion.__getattribute__("global") is True
        assert reduce.reduce_fusion.coeff == 2.0

    def test_a_parameter_tensor_also_used_as_data_stays(self):
        g = Graph()
        x, y = g.tensor(F32, [2]), g.tensor(F32, [2])
        s = g.tensor(OH_NN_INT8, [1], [0])
        assert OH_NNModel_SetTensorType(g.model, s, E.OH_NN_ADD_ACTIVATIONTYPE) == 0
        z = g.tensor(F32, [2])
        g.add_op(E.OH_NN_OPS_ADD, [x, y], [z], [s])
        assert OH_NNModel_SetTensorType(g.model, s, E.OH_NN_TENSOR) == 0
        out = g.tensor(OH_NN_INT8, [1])
        g.add_op(E.OH_NN_OPS_NEG, [s], [out])
        model = g.finish([x, y], [z, out]).lowered().hdi.model()
        assert len(model.allTensors) == 5
        assert list(model.nodes[1].inputIndex) == [2]

    def test_lowered_is_stable(self):
        m = finished_add()
        assert m.lowered() is m.lowered()


# -- 2.15 ------------------------------------------------------------------------------------


def mixed_model() -> OH_NNModel:
    """Add (the CPU driver computes it), then a Mul whose operands cannot broadcast ([2, 3]
    by [4]: no device can run it, whatever operators it has)."""
    g = Graph()
    x = g.tensor(F32, [2, 3])
    w = g.constant(np.ones((2, 3), np.float32))
    s = g.tensor(F32, [2, 3])
    g.add_op(E.OH_NN_OPS_ADD, [x, w], [s])
    bad = g.constant(np.ones(4, np.float32))
    y = g.tensor(F32, [2, 3])
    g.add_op(E.OH_NN_OPS_MUL, [s, bad], [y])
    return g.finish([x], [y])


class TestGetAvailableOperations:
    @pytest.mark.parametrize("kind", BAD_MODELS)
    def test_bad_model(self, kind):
        assert OH_NNModel_GetAvailableOperations(BAD_MODELS[kind](), 0) == (OH_NN_INVALID_PARAMETER, None)

    def test_bad_device_id(self):
        assert OH_NNModel_GetAvailableOperations(finished_add(), "0") == (OH_NN_INVALID_PARAMETER, None)

    def test_not_finished(self):
        g, *_ = add_graph()
        assert OH_NNModel_GetAvailableOperations(g.model, 0) == (OH_NN_OPERATION_FORBIDDEN, None)

    def test_no_device_at_all(self, capi_no_device):
        assert OH_NNModel_GetAvailableOperations(finished_add(), 0) == (OH_NN_FAILED, None)

    def test_unknown_device(self, capi_runtime):
        assert OH_NNModel_GetAvailableOperations(finished_add(), 12345) == (OH_NN_FAILED, None)

    def test_driver_query_fails(self, capi_runtime):
        # A node reads a tensor nobody computes: the driver refuses the model (INVALID_MODEL).
        g = Graph()
        x, loose, y = g.tensor(F32, [2]), g.tensor(F32, [2]), g.tensor(F32, [2])
        g.add_op(E.OH_NN_OPS_ADD, [x, loose], [y])
        assert OH_NNModel_GetAvailableOperations(g.finish([x], [y]), 0) == (OH_NN_FAILED, None)

    def test_driver_gone(self, capi_runtime, monkeypatch):
        device = registry().get(0)

        def gone(*_):
            raise DriverGone("test: the driver died")

        monkeypatch.setattr(type(device.client()), "get_supported_operation", gone)
        assert OH_NNModel_GetAvailableOperations(finished_add(), 0) == \
            (OH_NN_CONNECTION_EXCEPTION, None)

    def test_unreachable_device(self, capi_runtime, monkeypatch):
        device = registry().get(0)
        monkeypatch.setattr(type(device), "client", lambda self: (_ for _ in ()).throw(DriverGone("x")))
        assert OH_NNModel_GetAvailableOperations(finished_add(), 0) == \
            (OH_NN_CONNECTION_EXCEPTION, None)

    def test_success_one_flag_per_operation(self, capi_runtime):
        m = mixed_model()
        assert OH_NNModel_GetAvailableOperations(m, 0) == (OH_NN_SUCCESS, [True, False])
        device_id = registry().devices()[0].id
        assert OH_NNModel_GetAvailableOperations(m, device_id) == (OH_NN_SUCCESS, [True, False])

    def test_lowered_add_runs_on_the_driver(self, capi_runtime):
        g, x, _, y, z = add_graph(E.OH_NN_FUSED_RELU)
        m = g.finish([x, y], [z])
        a = np.array([[1, -2, 3], [-4, 5, -6]], np.float32)
        b = np.array([[0.5, 0.5, -4], [1, -9, 7]], np.float32)
        (out,) = run_lowered(registry().get(0).client(), m, [a, b])
        np.testing.assert_array_equal(out, np.maximum(a + b, 0))


# -- 2.16 ------------------------------------------------------------------------------------


class TestAddTensor:
    @pytest.mark.parametrize("kind", BAD_MODELS)
    def test_bad_model(self, kind):
        assert OH_NNModel_AddTensor(BAD_MODELS[kind](), OH_NN_Tensor(F32, 1, [2])) == 2

    def test_null_tensor(self):
        assert OH_NNModel_AddTensor(OH_NNModel_Construct(), None) == OH_NN_INVALID_PARAMETER

    def test_finished(self):
        assert OH_NNModel_AddTensor(finished_add(), OH_NN_Tensor(F32, 1, [2])) == OH_NN_OPERATION_FORBIDDEN

    @pytest.mark.parametrize("data_type", [-1, 13])
    def test_data_type_out_of_range(self, data_type):
        assert OH_NNModel_AddTensor(OH_NNModel_Construct(), OH_NN_Tensor(data_type, 1, [2])) == 2

    @pytest.mark.parametrize("kind", [-1, 163])
    def test_tensor_type_out_of_range(self, kind):
        t = OH_NN_Tensor(F32, 1, [2], None, kind)
        assert OH_NNModel_AddTensor(OH_NNModel_Construct(), t) == OH_NN_INVALID_PARAMETER

    @pytest.mark.parametrize("count, dims", [(1, None), (0, [2]), (3, [1, 2])])
    def test_dimensions_and_count_disagree(self, count, dims):
        t = OH_NN_Tensor(F32, count, dims)
        assert OH_NNModel_AddTensor(OH_NNModel_Construct(), t) == OH_NN_INVALID_PARAMETER

    @pytest.mark.parametrize("count, dims", [(201, [1] * 201), (2, [2, 0]), (1, [-3]),
                                             (2, [65536, 16384])])
    def test_rank_dimension_or_byte_length(self, count, dims):
        t = OH_NN_Tensor(F32, count, dims)
        assert OH_NNModel_AddTensor(OH_NNModel_Construct(), t) == OH_NN_INVALID_PARAMETER

    @pytest.mark.parametrize("qp", [OH_NN_QuantParam(1, None, [1.0], [0]),
                                    OH_NN_QuantParam(1, [8], None, [0]),
                                    OH_NN_QuantParam(1, [8], [1.0], None),
                                    OH_NN_QuantParam(2, [8], [1.0], [0])])
    def test_quant_param_array_missing(self, qp):
        t = OH_NN_Tensor(OH_NN_INT8, 1, [2], qp)
        assert OH_NNModel_AddTensor(OH_NNModel_Construct(), t) == OH_NN_INVALID_PARAMETER

    def test_num_bits_not_8(self):
        t = OH_NN_Tensor(OH_NN_INT8, 1, [2], OH_NN_QuantParam(1, [4], [1.0], [0]))
        assert OH_NNModel_AddTensor(OH_NNModel_Construct(), t) == OH_NN_INVALID_PARAMETER

    def test_success(self):
        m = OH_NNModel_Construct()
        qp = OH_NN_QuantParam(quantCount=2, numBits=[8, 8], scale=[0.5, 0.25], zeroPoint=[1, 2])
        assert OH_NNModel_AddTensor(m, OH_NN_Tensor(OH_NN_INT8, 2, [3, -1], qp, E.OH_NN_TENSOR)) == 0
        assert OH_NNModel_AddTensor(m, OH_NN_Tensor(OH_NN_INT8, 0, None, None,
                                                     E.OH_NN_ADD_ACTIVATIONTYPE)) == 0
        a, b = m.tensors
        assert (a.data_type, a.shape, a.quant, a.name) == (OH_NN_INT8, [3, -1],
                                                           [(8, 1, 0.5), (8, 2, 0.25)], "Tensor: 0")
        assert (b.shape, b.tensor_type, b.quant) == ([], E.OH_NN_ADD_ACTIVATIONTYPE, [])


# -- threads ---------------------------------------------------------------------------------


def test_concurrent_add_tensor_gives_dense_indices():
    m = OH_NNModel_Construct()
    barrier = threading.Barrier(4)

    def worker():
        barrier.wait(5)
        for _ in range(50):
            assert OH_NNModel_AddTensorToModel(m, desc([1])) == OH_NN_SUCCESS

    threads = in_threads(worker, [()] * 4, timeout=10)
    assert not any(t.is_alive() for t in threads)
    assert len(m.tensors) == 200
    assert [t.name for t in m.tensors] == [f"Tensor: {i}" for i in range(200)]


def test_destroy_while_building_gives_clean_codes():
    m = OH_NNModel_Construct()
    d = desc([1])
    codes: set[int] = set()
    stop = threading.Event()

    def worker():
        while not stop.is_set():
            codes.add(OH_NNModel_AddTensorToModel(m, d))
            codes.add(OH_NNModel_SetTensorType(m, 0, 0))

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    OH_NNModel_Destroy(m)
    stop.set()
    for t in threads:
        t.join(10)
        assert not t.is_alive()
    assert codes <= {OH_NN_SUCCESS, OH_NN_INVALID_PARAMETER}
    assert OH_NNModel_AddTensorToModel(m, d) == OH_NN_INVALID_PARAMETER
