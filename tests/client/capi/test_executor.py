"""OH_NNExecutor_* (capi.md 1.36–1.46): one test per condition-table row, with the exact code,
and runs on a real CPU driver checked against numpy."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from nnrt.client import capi
from nnrt.client.core.prepared_model import DimRanges
from nnrt.protos import hdi_pb2 as pb
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common.errors import NNRT_NOT_SUPPORT, NNRT_SUCCESS
from tests.client.capi.util_capi import F32, W, add_model
from tests.client.capi.util_executor import (
    array,
    compile_model,
    make_executor,
    tensor,
    two_output_model,
    use_runtime,
)
from tests.conftest import in_threads

OK = capi.OH_NN_SUCCESS
INVALID = capi.OH_NN_INVALID_PARAMETER
RNG = np.random.default_rng(7)


def destroyed_executor():
    executor = make_executor()
    capi.OH_NNExecutor_Destroy(executor)
    return executor


def test_package_exports_every_c_function():
    assert len(capi.C_FUNCTIONS) == len(set(capi.C_FUNCTIONS)) == 75
    missing = [name for name in capi.C_FUNCTIONS if not callable(getattr(capi, name, None))]
    assert missing == []
    assert set(capi.C_FUNCTIONS) <= set(capi.__all__)
    for name in ("OH_NNExecutor", "OH_NNCompilation", "OH_NNModel", "NN_Tensor", "NN_TensorDesc",
                 "NN_QuantParam", "OH_NN_Memory", "OH_NN_Tensor", "OH_NN_ReturnCode"):
        assert name in capi.__all__ and hasattr(capi, name)
    assert capi.OH_NN_SUCCESS == capi.OH_NN_ReturnCode.OH_NN_SUCCESS == 0


# -- 1.36 OH_NNExecutor_Construct ---------------------------------------------------------------


def test_construct_null_compilation(rt):
    assert capi.OH_NNExecutor_Construct(None) is None


def test_construct_wrong_handle_type(rt):
    model = add_model()
    assert capi.OH_NNExecutor_Construct(model) is None
    assert capi.OH_NNExecutor_Construct(object()) is None
    capi.OH_NNModel_Destroy(model)


def test_construct_destroyed_compilation(rt):
    compilation = compile_model(add_model())
    capi.OH_NNCompilation_Destroy(compilation)
    assert capi.OH_NNExecutor_Construct(compilation) is None


def test_construct_build_never_attempted(rt):
    model = add_model()
    compilation = capi.OH_NNCompilation_Construct(model)
    assert capi.OH_NNExecutor_Construct(compilation) is None
    capi.OH_NNCompilation_Destroy(compilation)
    capi.OH_NNModel_Destroy(model)


def test_construct_after_failed_build(rt):
    model = add_model()
    compilation = capi.OH_NNCompilation_Construct(model)
    assert capi.OH_NNCompilation_SetDevice(compilation, 12345) == OK  # no such device
    assert capi.OH_NNCompilation_Build(compilation) != OK
    assert capi.OH_NNExecutor_Construct(compilation) is None
    capi.OH_NNCompilation_Destroy(compilation)
    capi.OH_NNModel_Destroy(model)


@pytest.mark.multiprocess
def test_construct_device_not_registered(runtime_dir, monkeypatch):
    from tests.conftest import start_driver

    driver = start_driver(runtime_dir)
    with use_runtime(monkeypatch, runtime_dir):
        compilation = compile_model(add_model())
        driver.stop()
        assert capi.OH_NNExecutor_Construct(compilation) is None
        capi.OH_NNCompilation_Destroy(compilation)


def test_construct_many_executors_outlive_the_compilation(rt, io):
    compilation = compile_model(add_model())
    executors = [capi.OH_NNExecutor_Construct(compilation) for _ in range(3)]
    assert all(isinstance(e, capi.OH_NNExecutor) for e in executors)
    assert len({id(e) for e in executors}) == 3
    capi.OH_NNCompilation_Destroy(compilation)
    tin, tout, x = io
    for e in executors:
        assert capi.OH_NNExecutor_RunSync(e, [tin], 1, [tout], 1) == OK
        np.testing.assert_allclose(array(tout), x + W, rtol=1e-6)
        capi.OH_NNExecutor_Destroy(e)


# -- 1.37 OH_NNExecutor_GetOutputShape ----------------------------------------------------------


def test_get_output_shape_null_executor(rt):
    assert capi.OH_NNExecutor_GetOutputShape(None, 0) == (INVALID, None)


def test_get_output_shape_wrong_or_destroyed_handle(rt):
    assert capi.OH_NNExecutor_GetOutputShape(object(), 0) == (INVALID, None)
    assert capi.OH_NNExecutor_GetOutputShape(destroyed_executor(), 0) == (INVALID, None)


@pytest.mark.parametrize("index", [1, 2**32, -1, "0", None])
def test_get_output_shape_index_out_of_range(ex, index):
    assert capi.OH_NNExecutor_GetOutputShape(ex, index) == (INVALID, None)


def test_get_output_shape_compiled_then_actual(rt):
    executor = make_executor(add_model((-1, 3)))
    assert capi.OH_NNExecutor_GetOutputShape(executor, 0) == (OK, [-1, 3])
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    tin, tout = tensor([5, 3], x), tensor([5, 3])
    assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == OK
    code, shape = capi.OH_NNExecutor_GetOutputShape(executor, 0)
    assert (code, shape) == (OK, [5, 3])
    np.testing.assert_allclose(array(tout), x + np.array([0.5, -1.0, 2.0], np.float32))
    capi.OH_NNExecutor_Destroy(executor)
    capi.OH_NNTensor_Destroy(tin)
    capi.OH_NNTensor_Destroy(tout)


# -- 1.38 OH_NNExecutor_Destroy -----------------------------------------------------------------


def test_destroy_null_and_foreign_do_nothing(rt):
    assert capi.OH_NNExecutor_Destroy(None) is None
    assert capi.OH_NNExecutor_Destroy(object()) is None


def test_destroy_twice_and_use_after_destroy(rt, io):
    executor = make_executor()
    assert capi.OH_NNExecutor_Destroy(executor) is None
    assert capi.OH_NNExecutor_Destroy(executor) is None
    tin, tout, _ = io
    assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == INVALID
    assert capi.OH_NNExecutor_GetInputCount(executor) == (INVALID, None)
    assert capi.OH_NNExecutor_CreateInputTensorDesc(executor, 0) is None
    # the tensors used with it stay valid
    assert capi.OH_NNTensor_GetSize(tin) == (OK, 24)


# -- 1.39 / 1.40 counts -------------------------------------------------------------------------


def test_get_input_count_null(rt):
    assert capi.OH_NNExecutor_GetInputCount(None) == (INVALID, None)
    assert capi.OH_NNExecutor_GetInputCount(destroyed_executor()) == (INVALID, None)


def test_get_output_count_null(rt):
    assert capi.OH_NNExecutor_GetOutputCount(None) == (INVALID, None)
    assert capi.OH_NNExecutor_GetOutputCount(object()) == (INVALID, None)


def test_counts(rt):
    executor = make_executor(two_output_model())
    assert capi.OH_NNExecutor_GetInputCount(executor) == (OK, 2)
    assert capi.OH_NNExecutor_GetOutputCount(executor) == (OK, 2)
    capi.OH_NNExecutor_Destroy(executor)


# -- 1.41 / 1.42 tensor descriptors -------------------------------------------------------------


def test_create_input_tensor_desc_null(rt):
    assert capi.OH_NNExecutor_CreateInputTensorDesc(None, 0) is None
    assert capi.OH_NNExecutor_CreateOutputTensorDesc(None, 0) is None


@pytest.mark.parametrize("index", [1, 7, -1])
def test_create_tensor_desc_index_out_of_range(ex, index):
    assert capi.OH_NNExecutor_CreateInputTensorDesc(ex, index) is None
    assert capi.OH_NNExecutor_CreateOutputTensorDesc(ex, index) is None


def test_create_tensor_descs_describe_the_model(rt):
    executor = make_executor(add_model((-1, 3)))
    d = capi.OH_NNExecutor_CreateInputTensorDesc(executor, 0)
    assert isinstance(d, capi.NN_TensorDesc)
    assert capi.OH_NNTensorDesc_GetDataType(d) == (OK, F32)
    assert capi.OH_NNTensorDesc_GetShape(d) == (OK, [-1, 3])
    code, name = capi.OH_NNTensorDesc_GetName(d)
    assert code == OK and isinstance(name, str)
    # a new descriptor each time, owned by the caller
    d2 = capi.OH_NNExecutor_CreateInputTensorDesc(executor, 0)
    assert d2 is not d
    assert capi.OH_NNTensorDesc_Destroy(d) == OK
    assert capi.OH_NNTensorDesc_Destroy(d2) == OK
    out = capi.OH_NNExecutor_CreateOutputTensorDesc(executor, 0)
    assert capi.OH_NNTensorDesc_GetShape(out) == (OK, [-1, 3])
    capi.OH_NNTensorDesc_Destroy(out)
    # after a run, the output descriptor carries the actual shape
    tin, tout = tensor([4, 3], np.ones((4, 3), np.float32)), tensor([4, 3])
    assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == OK
    out = capi.OH_NNExecutor_CreateOutputTensorDesc(executor, 0)
    assert capi.OH_NNTensorDesc_GetShape(out) == (OK, [4, 3])
    capi.OH_NNTensorDesc_Destroy(out)
    for t in (tin, tout):
        capi.OH_NNTensor_Destroy(t)
    capi.OH_NNExecutor_Destroy(executor)


# -- 1.43 OH_NNExecutor_GetInputDimRange --------------------------------------------------------


def test_get_input_dim_range_null(rt):
    assert capi.OH_NNExecutor_GetInputDimRange(None, 0) == (INVALID, None, None)
    assert capi.OH_NNExecutor_GetInputDimRange(destroyed_executor(), 0) == (INVALID, None, None)


def test_get_input_dim_range_query_fails(ex, monkeypatch):
    ex._build_ranges = ([], [])  # make the executor ask the driver
    ex._ranges = None
    monkeypatch.setattr(ex._client, "get_input_dim_ranges",
                        lambda model_id: pb.GetInputDimRangesReply(returnCode=NNRT_NOT_SUPPORT))
    assert capi.OH_NNExecutor_GetInputDimRange(ex, 0) == (capi.OH_NN_OPERATION_FORBIDDEN,
                                                          None, None)


def test_get_input_dim_range_inconsistent_answer(ex):
    ex._ranges = DimRanges("ok", [[2, 3]], [[2, 3], [1]])
    assert capi.OH_NNExecutor_GetInputDimRange(ex, 0) == (INVALID, None, None)
    ex._ranges = DimRanges("ok", [[2, 3]], [[2]])
    assert capi.OH_NNExecutor_GetInputDimRange(ex, 0) == (INVALID, None, None)


@pytest.mark.parametrize("index", [1, -1])
def test_get_input_dim_range_index_out_of_range(ex, index):
    assert capi.OH_NNExecutor_GetInputDimRange(ex, index) == (INVALID, None, None)


def test_get_input_dim_range(rt, ex):
    assert capi.OH_NNExecutor_GetInputDimRange(ex, 0) == (OK, [2, 3], [2, 3])
    dynamic = make_executor(add_model((-1, 3)))
    code, lows, highs = capi.OH_NNExecutor_GetInputDimRange(dynamic, 0)
    assert code == OK and lows == [1, 3] and highs[1] == 3 and highs[0] >= 1000
    capi.OH_NNExecutor_Destroy(dynamic)


def test_get_input_dim_range_asks_the_driver_when_the_build_had_none(ex):
    ex._build_ranges = ([], [])
    ex._ranges = None
    assert capi.OH_NNExecutor_GetInputDimRange(ex, 0) == (OK, [2, 3], [2, 3])


# -- 1.44 / 1.45 callbacks ------------------------------------------------------------------------


@pytest.mark.parametrize("setter", [capi.OH_NNExecutor_SetOnRunDone,
                                    capi.OH_NNExecutor_SetOnServiceDied])
def test_set_callback_rows(ex, setter):
    assert setter(None, lambda *a: None) == INVALID
    assert setter(ex, None) == INVALID
    assert setter(ex, "not callable") == INVALID
    assert setter(destroyed_executor(), lambda *a: None) == INVALID
    assert setter(ex, lambda *a: None) == OK  # header contract (upstream: 4)
    assert setter(ex, lambda *a: None) == OK  # replaces


# -- 1.46 OH_NNExecutor_RunSync -------------------------------------------------------------------


def test_run_sync_null_executor(io):
    tin, tout, _ = io
    assert capi.OH_NNExecutor_RunSync(None, [tin], 1, [tout], 1) == INVALID
    assert capi.OH_NNExecutor_RunSync(object(), [tin], 1, [tout], 1) == INVALID


def test_run_sync_null_inputs(ex, io):
    _, tout, _ = io
    assert capi.OH_NNExecutor_RunSync(ex, None, 1, [tout], 1) == INVALID


@pytest.mark.parametrize("count", [0, 201, 2, -1, 1.0])
def test_run_sync_bad_input_count(ex, io, count):
    tin, tout, _ = io
    assert capi.OH_NNExecutor_RunSync(ex, [tin], count, [tout], 1) == INVALID


def test_run_sync_null_outputs(ex, io):
    tin, _, _ = io
    assert capi.OH_NNExecutor_RunSync(ex, [tin], 1, None, 1) == INVALID


@pytest.mark.parametrize("count", [0, 201, 2])
def test_run_sync_bad_output_count(ex, io, count):
    tin, tout, _ = io
    assert capi.OH_NNExecutor_RunSync(ex, [tin], 1, [tout], count) == INVALID


def test_run_sync_input_count_differs_from_model(ex, io):
    tin, tout, _ = io
    assert capi.OH_NNExecutor_RunSync(ex, [tin, tin], 2, [tout], 1) == INVALID


def test_run_sync_output_count_differs_from_model(ex, io):
    tin, tout, _ = io
    assert capi.OH_NNExecutor_RunSync(ex, [tin], 1, [tout, tout], 2) == INVALID


def test_run_sync_smaller_count_uses_first_elements(ex, io):
    tin, tout, x = io
    assert capi.OH_NNExecutor_RunSync(ex, [tin, None], 1, [tout, None], 1) == OK
    np.testing.assert_allclose(array(tout), x + W, rtol=1e-6)


def test_run_sync_range_list_length_differs(ex, io):
    tin, tout, _ = io
    ex._ranges = DimRanges("ok", [[2, 3], [1]], [[2, 3], [1]])
    assert capi.OH_NNExecutor_RunSync(ex, [tin], 1, [tout], 1) == INVALID


def test_run_sync_null_input_with_ranges_is_null_ptr(ex, io):
    _, tout, _ = io
    assert capi.OH_NNExecutor_RunSync(ex, [None], 1, [tout], 1) == capi.OH_NN_NULL_PTR


@pytest.mark.parametrize("shape", [[2, 4], [1, 3], [2, -1], [2, 3, 1]])
def test_run_sync_input_outside_ranges(ex, io, shape):
    tin, tout, _ = io
    desc = capi.OH_NNTensor_GetTensorDesc(tin)
    assert capi.OH_NNTensorDesc_SetShape(desc, shape, len(shape)) == OK
    assert capi.OH_NNExecutor_RunSync(ex, [tin], 1, [tout], 1) == INVALID


def test_run_sync_null_input_without_ranges(ex, io):
    _, tout, _ = io
    ex._ranges = DimRanges("unsupported")
    assert capi.OH_NNExecutor_RunSync(ex, [None], 1, [tout], 1) == INVALID


def test_run_sync_null_output(ex, io):
    tin, _, _ = io
    assert capi.OH_NNExecutor_RunSync(ex, [tin], 1, [None], 1) == INVALID


def test_run_sync_wrong_or_destroyed_tensor_handle(ex, io):
    tin, tout, _ = io
    assert capi.OH_NNExecutor_RunSync(ex, [object()], 1, [tout], 1) == INVALID
    assert capi.OH_NNExecutor_RunSync(ex, [tin], 1, [capi.OH_NNTensor_GetTensorDesc(tout)],
                                      1) == INVALID
    dead = tensor([2, 3])
    capi.OH_NNTensor_Destroy(dead)
    assert capi.OH_NNExecutor_RunSync(ex, [tin], 1, [dead], 1) == INVALID


def test_run_sync_region_smaller_than_descriptor_is_failed(rt):
    executor = make_executor(add_model((-1, 3)))
    tin, tout = tensor([1, 3], np.ones((1, 3), np.float32)), tensor([1, 3])
    desc = capi.OH_NNTensor_GetTensorDesc(tin)
    assert capi.OH_NNTensorDesc_SetShape(desc, [4, 3], 2) == OK  # within range, 48 > 12 bytes
    assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == capi.OH_NN_FAILED
    assert capi.OH_NNTensorDesc_SetShape(desc, [1, 3], 2) == OK
    out_desc = capi.OH_NNTensor_GetTensorDesc(tout)
    assert capi.OH_NNTensorDesc_SetShape(out_desc, [2, 3], 2) == OK
    assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == capi.OH_NN_FAILED
    for t in (tin, tout):
        capi.OH_NNTensor_Destroy(t)
    capi.OH_NNExecutor_Destroy(executor)


def test_run_sync_driver_refuses_is_unavailable_device(ex, io):
    _, tout, _ = io
    wrong = tensor([2, 3], np.zeros((2, 3), np.int32), capi.OH_NN_INT32)  # driver: bad dataType
    assert capi.OH_NNExecutor_RunSync(ex, [wrong], 1, [tout], 1) == capi.OH_NN_UNAVAILABLE_DEVICE
    capi.OH_NNTensor_Destroy(wrong)


def _fake_run(monkeypatch, ex, reply):
    monkeypatch.setattr(ex._client, "run", lambda *a, **k: reply)


def test_run_sync_no_output_shapes_is_unavailable_device(ex, io, monkeypatch):
    tin, tout, _ = io
    _fake_run(monkeypatch, ex, pb.RunReply(returnCode=NNRT_SUCCESS))
    assert capi.OH_NNExecutor_RunSync(ex, [tin], 1, [tout], 1) == capi.OH_NN_UNAVAILABLE_DEVICE


def test_run_sync_wrong_number_of_output_shapes(ex, io, monkeypatch):
    tin, tout, _ = io
    _fake_run(monkeypatch, ex, pb.RunReply(outputDims=[ht.Int32Array(values=[2, 3])] * 2))
    assert capi.OH_NNExecutor_RunSync(ex, [tin], 1, [tout], 1) == INVALID


@pytest.mark.parametrize("dims", [[], list(range(1, 12))])
def test_run_sync_unstorable_output_shape(ex, io, monkeypatch, dims):
    tin, tout, _ = io
    _fake_run(monkeypatch, ex, pb.RunReply(outputDims=[ht.Int32Array(values=dims)]))
    assert capi.OH_NNExecutor_RunSync(ex, [tin], 1, [tout], 1) == INVALID


def test_run_sync_success(ex, io):
    tin, tout, x = io
    assert capi.OH_NNExecutor_RunSync(ex, [tin], 1, [tout], 1) == OK
    np.testing.assert_allclose(array(tout), x + W, rtol=1e-6)
    assert capi.OH_NNTensorDesc_GetShape(capi.OH_NNTensor_GetTensorDesc(tout)) == (OK, [2, 3])
    assert capi.OH_NNExecutor_GetOutputShape(ex, 0) == (OK, [2, 3])


def test_run_sync_two_outputs(rt):
    executor = make_executor(two_output_model())
    a = RNG.standard_normal((2, 3)).astype(np.float32)
    b = RNG.standard_normal((2, 3)).astype(np.float32)
    ta, tb, ts, tp = tensor([2, 3], a), tensor([2, 3], b), tensor([2, 3]), tensor([2, 3])
    assert capi.OH_NNExecutor_RunSync(executor, [ta, tb], 2, [ts, tp], 2) == OK
    expected_sum = np.array([[float(a[i, j]) + float(b[i, j]) for j in range(3)] for i in range(2)])
    expected_prod = np.array([[float(a[i, j]) * float(b[i, j]) for j in range(3)]
                              for i in range(2)])
    np.testing.assert_allclose(array(ts), expected_sum, rtol=1e-6)
    np.testing.assert_allclose(array(tp), expected_prod, rtol=1e-6)
    for t in (ta, tb, ts, tp):
        capi.OH_NNTensor_Destroy(t)
    capi.OH_NNExecutor_Destroy(executor)


def test_run_sync_dynamic_output_shape_written_back(rt):
    executor = make_executor(add_model((-1, 3)))
    tin = tensor([3, 3], np.arange(9, dtype=np.float32).reshape(3, 3))
    out_desc = capi.OH_NNExecutor_CreateOutputTensorDesc(executor, 0)
    tout = capi.OH_NNTensor_CreateWithSize(0, out_desc, 1024)  # shape [-1, 3]: sized by hand
    capi.OH_NNTensorDesc_Destroy(out_desc)
    assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == OK
    assert capi.OH_NNTensorDesc_GetShape(capi.OH_NNTensor_GetTensorDesc(tout)) == (OK, [3, 3])
    expected = np.arange(9, dtype=np.float32).reshape(3, 3) + np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(array(tout), expected)
    for t in (tin, tout):
        capi.OH_NNTensor_Destroy(t)
    capi.OH_NNExecutor_Destroy(executor)


def test_run_sync_same_tensors_see_every_descriptor_change(rt):
    """What a run keeps of its tensors (the IOTensor sent, the byte size, the shapes found
    within the ranges) follows their descriptors from one run to the next."""
    executor = make_executor(add_model((-1, 3)))
    d = capi.OH_NNExecutor_CreateOutputTensorDesc(executor, 0)
    capi.OH_NNTensorDesc_SetShape(d, [3, 3], 2)
    tin, tout = capi.OH_NNTensor_Create(0, d), capi.OH_NNTensor_Create(0, d)  # 36 bytes each
    capi.OH_NNTensorDesc_Destroy(d)
    in_desc = capi.OH_NNTensor_GetTensorDesc(tin)
    bias = np.array([0.5, -1.0, 2.0], np.float32)
    for rows in (3, 1, 2, 3, 2):
        capi.OH_NNTensorDesc_SetShape(in_desc, [rows, 3], 2)
        x = RNG.standard_normal((rows, 3)).astype(np.float32)
        array(tin)[...] = x
        for _ in range(2):  # twice: the second run reuses what the first one built
            assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == OK
            assert capi.OH_NNTensorDesc_GetShape(capi.OH_NNTensor_GetTensorDesc(tout)) == \
                (OK, [rows, 3])
            np.testing.assert_allclose(array(tout), x + bias, rtol=1e-6)
    # the region holds 3 rows: 4 is refused after runs that fitted
    capi.OH_NNTensorDesc_SetShape(in_desc, [4, 3], 2)
    assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == capi.OH_NN_FAILED
    capi.OH_NNTensorDesc_SetShape(in_desc, [2, 3], 2)
    assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == OK
    # a data type the driver refuses reaches it (the kept IOTensor is built again) ...
    capi.OH_NNTensorDesc_SetDataType(in_desc, capi.OH_NN_INT32)
    assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == \
        capi.OH_NN_UNAVAILABLE_DEVICE
    capi.OH_NNTensorDesc_SetDataType(in_desc, F32)
    assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == OK
    # ... and so does a name or a format (the driver ignores both: the run still succeeds)
    capi.OH_NNTensorDesc_SetName(in_desc, "renamed")
    capi.OH_NNTensorDesc_SetFormat(in_desc, capi.OH_NN_FORMAT_ND)
    assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == OK
    from nnrt.client.capi.tensor import io_bytes
    client, _ = executor.session()
    sent = ht.IOTensor.FromString(io_bytes(tin, client))
    assert (sent.name, list(sent.dimensions)) == ("renamed", [2, 3])
    for t in (tin, tout):
        capi.OH_NNTensor_Destroy(t)
    capi.OH_NNExecutor_Destroy(executor)


# -- thread safety ----------------------------------------------------------------------------------


def test_run_sync_from_many_threads(ex):
    errors = []

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        tin, tout = tensor([2, 3]), tensor([2, 3])
        try:
            for _ in range(20):
                x = rng.standard_normal((2, 3)).astype(np.float32)
                array(tin)[...] = x
                code = capi.OH_NNExecutor_RunSync(ex, [tin], 1, [tout], 1)
                if code != OK or not np.allclose(array(tout), x + W, rtol=1e-6):
                    errors.append((seed, code))
        finally:
            capi.OH_NNTensor_Destroy(tin)
            capi.OH_NNTensor_Destroy(tout)

    threads = in_threads(worker, [(s,) for s in range(6)], timeout=30)
    assert not any(t.is_alive() for t in threads)
    assert errors == []


def test_destroy_while_other_threads_run(rt, io):
    tin, tout, _ = io
    executor = make_executor()
    codes, failures = [], []
    start = threading.Barrier(5)

    def runner() -> None:
        start.wait(5)
        for _ in range(30):
            try:
                codes.append(capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1))
            except Exception as exc:  # a crash is the failure this test looks for
                failures.append(exc)

    threads = [threading.Thread(target=runner) for _ in range(4)]
    for t in threads:
        t.start()
    start.wait(5)
    capi.OH_NNExecutor_Destroy(executor)
    for t in threads:
        t.join(30)
    assert failures == []
    assert set(codes) <= {OK, INVALID}
    assert len(codes) == 120
    assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == INVALID
    assert capi.OH_NNExecutor_GetOutputShape(executor, 0) == (INVALID, None)
