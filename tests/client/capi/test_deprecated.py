"""The deprecated executor API (capi.md 2.17–2.25): one test per condition-table row with the
exact code, and runs through SetInput/SetOutput and the memory variants on a real driver."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.client import capi
from nnrt.client.core.prepared_model import DimRanges
from nnrt.protos import hdi_pb2 as pb
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common.errors import NNRT_DEVICE_ERROR
from tests.client.capi.util_capi import W, add_model
from tests.client.capi.util_executor import make_executor

OK = capi.OH_NN_SUCCESS
INVALID = capi.OH_NN_INVALID_PARAMETER
F32 = capi.OH_NN_FLOAT32
DYN_W = np.array([0.5, -1.0, 2.0], np.float32)
X = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5


def t(dims=(2, 3), data_type=F32, **kw) -> capi.OH_NN_Tensor:
    dims = list(dims) if dims is not None else None
    return capi.OH_NN_Tensor(dataType=data_type, dimensionCount=len(dims) if dims else 0,
                             dimensions=dims, **kw)


@pytest.fixture
def dyn(rt):
    executor = make_executor(add_model((-1, 3)))
    yield executor
    capi.OH_NNExecutor_Destroy(executor)


def no_ranges(ex) -> None:
    ex._ranges = DimRanges("unsupported")


def fake_reply(monkeypatch, ex, reply) -> None:
    monkeypatch.setattr(ex._client, "run", lambda *a, **k: reply)


# -- 2.17 OH_NNExecutor_SetInput ------------------------------------------------------------------


def test_set_input_null_executor(rt):
    assert capi.OH_NNExecutor_SetInput(None, 0, t(), X, X.nbytes) == INVALID


def test_set_input_null_tensor(ex):
    assert capi.OH_NNExecutor_SetInput(ex, 0, None, X, X.nbytes) == INVALID


def test_set_input_null_buffer(ex):
    assert capi.OH_NNExecutor_SetInput(ex, 0, t(), None, 24) == INVALID
    assert capi.OH_NNExecutor_SetInput(ex, 0, t(), 12345, 24) == INVALID  # no buffer protocol


def test_set_input_zero_length(ex):
    assert capi.OH_NNExecutor_SetInput(ex, 0, t(), X, 0) == INVALID


def test_set_input_length_beyond_buffer(ex):
    assert capi.OH_NNExecutor_SetInput(ex, 0, t(), X, X.nbytes + 1) == INVALID


def test_set_input_range_query_fails(ex):
    ex._ranges = DimRanges("failed")
    assert capi.OH_NNExecutor_SetInput(ex, 0, t(), X, X.nbytes) == capi.OH_NN_UNAVAILABLE_DEVICE


def test_set_input_index_beyond_ranges(ex):
    assert capi.OH_NNExecutor_SetInput(ex, 1, t(), X, X.nbytes) == INVALID


def test_set_input_rank_differs_from_ranges(ex):
    assert capi.OH_NNExecutor_SetInput(ex, 0, t((6,)), X, X.nbytes) == INVALID


@pytest.mark.parametrize("dims", [(0, 3), (70000, 3), (-1, 3)])
def test_set_input_dimension_outside_ranges(dyn, dims):
    assert capi.OH_NNExecutor_SetInput(dyn, 0, t(dims), X, X.nbytes) == INVALID


def test_set_input_index_out_of_range_without_ranges(ex):
    no_ranges(ex)
    assert capi.OH_NNExecutor_SetInput(ex, 1, t(), X, X.nbytes) == INVALID
    assert capi.OH_NNExecutor_SetInput(ex, -1, t(), X, X.nbytes) == INVALID


@pytest.mark.parametrize("tensor", [
    t(data_type=13),
    t(type=163),
    capi.OH_NN_Tensor(dataType=F32, dimensionCount=2, dimensions=None),
    capi.OH_NN_Tensor(dataType=F32, dimensionCount=3, dimensions=[2, 3]),
    t(quantParam=capi.OH_NN_QuantParam(quantCount=1, numBits=None, scale=[1.0], zeroPoint=[0])),
    t(quantParam=capi.OH_NN_QuantParam(quantCount=1, numBits=[4], scale=[1.0], zeroPoint=[0])),
])
def test_set_input_invalid_tensor(ex, tensor):
    assert capi.OH_NNExecutor_SetInput(ex, 0, tensor, X, X.nbytes) == INVALID


def test_set_input_dynamic_dimension_left(dyn):
    no_ranges(dyn)
    assert capi.OH_NNExecutor_SetInput(dyn, 0, t((-1, 3)), X, X.nbytes) == INVALID


@pytest.mark.parametrize("tensor", [
    t(data_type=capi.OH_NN_INT32),  # data type
    t((6,)),  # rank
    t((3, 2)),  # a fixed dimension
    t(type=capi.OH_NN_ADD_ACTIVATIONTYPE),  # not OH_NN_TENSOR
])
def test_set_input_differs_from_the_compiled_input(ex, tensor):
    no_ranges(ex)
    assert capi.OH_NNExecutor_SetInput(ex, 0, tensor, X, X.nbytes) == INVALID


def test_set_input_length_below_byte_size(ex):
    assert capi.OH_NNExecutor_SetInput(ex, 0, t(), X, X.nbytes - 4) == INVALID


def test_set_input_success_copies_at_once(ex):
    x = X.copy()
    assert capi.OH_NNExecutor_SetInput(ex, 0, t(), x, x.nbytes) == OK
    x[:] = 100  # the bytes were copied by SetInput
    out = np.zeros((2, 3), np.float32)
    assert capi.OH_NNExecutor_SetOutput(ex, 0, out, out.nbytes) == OK
    assert capi.OH_NNExecutor_Run(ex) == OK
    np.testing.assert_allclose(out, X + W, rtol=1e-6)


# -- 2.18 OH_NNExecutor_SetOutput -----------------------------------------------------------------


def test_set_output_null_executor(rt):
    out = np.zeros(6, np.float32)
    assert capi.OH_NNExecutor_SetOutput(None, 0, out, out.nbytes) == INVALID


def test_set_output_null_buffer(ex):
    assert capi.OH_NNExecutor_SetOutput(ex, 0, None, 24) == INVALID
    assert capi.OH_NNExecutor_SetOutput(ex, 0, b"\0" * 24, 24) == INVALID  # read-only


def test_set_output_zero_length(ex):
    out = np.zeros(6, np.float32)
    assert capi.OH_NNExecutor_SetOutput(ex, 0, out, 0) == INVALID


@pytest.mark.parametrize("index", [1, -1])
def test_set_output_index_out_of_range(ex, index):
    out = np.zeros(6, np.float32)
    assert capi.OH_NNExecutor_SetOutput(ex, index, out, out.nbytes) == INVALID


def test_set_output_byte_size_not_computable(ex):
    ex.outputs[0].data_type = capi.OH_NN_UNKNOWN
    out = np.zeros(6, np.float32)
    assert capi.OH_NNExecutor_SetOutput(ex, 0, out, out.nbytes) == INVALID


def test_set_output_length_below_compiled_size(ex):
    out = np.zeros(6, np.float32)
    assert capi.OH_NNExecutor_SetOutput(ex, 0, out, 20) == INVALID


def test_set_output_dynamic_output_accepts_any_length(dyn):
    out = np.zeros(3, np.float32)
    assert capi.OH_NNExecutor_SetOutput(dyn, 0, out, out.nbytes) == OK


# -- 2.19 OH_NNExecutor_Run -----------------------------------------------------------------------


def bind(ex, out) -> None:
    assert capi.OH_NNExecutor_SetInput(ex, 0, t(), X, X.nbytes) == OK
    assert capi.OH_NNExecutor_SetOutput(ex, 0, out, out.nbytes) == OK


def test_run_null_executor(rt):
    assert capi.OH_NNExecutor_Run(None) == INVALID
    assert capi.OH_NNExecutor_Run(object()) == INVALID


def test_run_input_not_bound(ex):
    out = np.zeros(6, np.float32)
    assert capi.OH_NNExecutor_SetOutput(ex, 0, out, out.nbytes) == OK
    assert capi.OH_NNExecutor_Run(ex) == INVALID


def test_run_output_not_bound(ex):
    assert capi.OH_NNExecutor_SetInput(ex, 0, t(), X, X.nbytes) == OK
    assert capi.OH_NNExecutor_Run(ex) == INVALID


def test_run_bound_memory_no_longer_runtime_memory(ex):
    memory = capi.OH_NNExecutor_AllocateInputMemory(ex, 0, 24)
    assert capi.OH_NNExecutor_SetInputWithMemory(ex, 0, t(), memory) == OK
    out = np.zeros(6, np.float32)
    assert capi.OH_NNExecutor_SetOutput(ex, 0, out, out.nbytes) == OK
    capi.OH_NNExecutor_DestroyInputMemory(ex, 0, memory)
    assert capi.OH_NNExecutor_Run(ex) == INVALID


def test_run_driver_fails(ex, monkeypatch):
    bind(ex, np.zeros(6, np.float32))
    fake_reply(monkeypatch, ex, pb.RunReply(returnCode=NNRT_DEVICE_ERROR))
    assert capi.OH_NNExecutor_Run(ex) == capi.OH_NN_UNAVAILABLE_DEVICE


def test_run_no_output_shapes(ex, monkeypatch):
    bind(ex, np.zeros(6, np.float32))
    fake_reply(monkeypatch, ex, pb.RunReply())
    assert capi.OH_NNExecutor_Run(ex) == capi.OH_NN_UNAVAILABLE_DEVICE


@pytest.mark.parametrize("shapes", [[[2, 3], [2, 3]], [[6]]])
def test_run_shape_count_or_rank_differs(ex, monkeypatch, shapes):
    bind(ex, np.zeros(6, np.float32))
    fake_reply(monkeypatch, ex, pb.RunReply(outputDims=[ht.Int32Array(values=s) for s in shapes]))
    assert capi.OH_NNExecutor_Run(ex) == INVALID


def test_run_output_larger_than_the_set_output_buffer(dyn, monkeypatch):
    assert capi.OH_NNExecutor_SetInput(dyn, 0, t((1, 3)), X, 12) == OK
    out = np.zeros(3, np.float32)
    assert capi.OH_NNExecutor_SetOutput(dyn, 0, out, out.nbytes) == OK
    fake_reply(monkeypatch, dyn, pb.RunReply(outputDims=[ht.Int32Array(values=[2, 3])]))
    assert capi.OH_NNExecutor_Run(dyn) == INVALID


def test_run_success_copies_outputs_and_updates_shapes(dyn):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    assert capi.OH_NNExecutor_SetInput(dyn, 0, t((4, 3)), x, x.nbytes) == OK
    out = np.full(20, -7.0, np.float32)  # bigger than needed
    assert capi.OH_NNExecutor_SetOutput(dyn, 0, out, out.nbytes) == OK
    assert capi.OH_NNExecutor_Run(dyn) == OK
    expected = np.array([[float(x[i, j]) + float(DYN_W[j]) for j in range(3)] for i in range(4)])
    np.testing.assert_allclose(out[:12].reshape(4, 3), expected)
    assert (out[12:] == -7.0).all()
    assert capi.OH_NNExecutor_GetOutputShape(dyn, 0) == (OK, [4, 3])
    # rebinding replaces the earlier binding
    x2 = np.ones((1, 3), np.float32)
    assert capi.OH_NNExecutor_SetInput(dyn, 0, t((1, 3)), x2, x2.nbytes) == OK
    assert capi.OH_NNExecutor_Run(dyn) == OK
    np.testing.assert_allclose(out[:3], 1 + DYN_W)
    assert capi.OH_NNExecutor_GetOutputShape(dyn, 0) == (OK, [1, 3])


# -- 2.20 / 2.21 Allocate*Memory ------------------------------------------------------------------


@pytest.mark.parametrize("allocate", [capi.OH_NNExecutor_AllocateInputMemory,
                                      capi.OH_NNExecutor_AllocateOutputMemory])
def test_allocate_memory_rows(ex, allocate):
    assert allocate(None, 0, 24) is None
    assert allocate(ex, 0, 0) is None
    assert allocate(ex, 1, 24) is None
    assert allocate(ex, -1, 24) is None
    assert allocate(ex, 0, 2 << 30) is None  # the driver refuses more than 1 GiB
    memory = allocate(ex, 0, 24)
    assert isinstance(memory, capi.OH_NN_Memory)
    assert memory.length == 24
    assert isinstance(memory.data, memoryview) and not memory.data.readonly
    assert memory.data.nbytes == 24


# -- 2.22 / 2.23 Destroy*Memory -------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["Input", "Output"])
def test_destroy_memory_rows(ex, rt, kind):
    allocate = getattr(capi, f"OH_NNExecutor_Allocate{kind}Memory")
    destroy = getattr(capi, f"OH_NNExecutor_Destroy{kind}Memory")
    other_kind = "Output" if kind == "Input" else "Input"
    other_destroy = getattr(capi, f"OH_NNExecutor_Destroy{other_kind}Memory")
    memory = allocate(ex, 0, 24)
    other = make_executor()
    assert destroy(None, 0, memory) is None  # nothing
    assert destroy(ex, 0, None) is None
    assert destroy(ex, 1, memory) is None  # index out of range
    assert destroy(other, 0, memory) is None  # not allocated by this executor
    assert other_destroy(ex, 0, memory) is None  # not allocated for this kind
    assert destroy(ex, 0, capi.OH_NN_Memory(data=memory.data, length=24)) is None  # a copy
    memory.data[:4] = b"abcd"  # still valid after all of these
    assert destroy(ex, 0, memory) is None
    with pytest.raises(ValueError):
        memory.data[0]  # released
    assert destroy(ex, 0, memory) is None  # twice: nothing
    capi.OH_NNExecutor_Destroy(other)


def test_destroyed_memory_is_rejected(ex):
    memory = capi.OH_NNExecutor_AllocateInputMemory(ex, 0, 24)
    capi.OH_NNExecutor_DestroyInputMemory(ex, 0, memory)
    assert capi.OH_NNExecutor_SetInputWithMemory(ex, 0, t(), memory) == INVALID
    out = capi.OH_NNExecutor_AllocateOutputMemory(ex, 0, 24)
    capi.OH_NNExecutor_DestroyOutputMemory(ex, 0, out)
    assert capi.OH_NNExecutor_SetOutputWithMemory(ex, 0, out) == INVALID


# -- 2.24 OH_NNExecutor_SetInputWithMemory --------------------------------------------------------


def test_set_input_with_memory_null_arguments(ex):
    memory = capi.OH_NNExecutor_AllocateInputMemory(ex, 0, 24)
    assert capi.OH_NNExecutor_SetInputWithMemory(None, 0, t(), memory) == INVALID
    assert capi.OH_NNExecutor_SetInputWithMemory(ex, 0, None, memory) == INVALID
    assert capi.OH_NNExecutor_SetInputWithMemory(ex, 0, t(), None) == INVALID
    foreign = capi.OH_NN_Memory(data=memoryview(bytearray(24)), length=24)
    assert capi.OH_NNExecutor_SetInputWithMemory(ex, 0, t(), foreign) == INVALID


def test_set_input_with_memory_checks_of_set_input(ex):
    memory = capi.OH_NNExecutor_AllocateInputMemory(ex, 0, 24)
    ex._ranges = DimRanges("failed")
    assert capi.OH_NNExecutor_SetInputWithMemory(ex, 0, t(), memory) == \
        capi.OH_NN_UNAVAILABLE_DEVICE
    ex._ranges = None
    assert capi.OH_NNExecutor_SetInputWithMemory(ex, 1, t(), memory) == INVALID
    assert capi.OH_NNExecutor_SetInputWithMemory(ex, 0, t((3, 3)), memory) == INVALID
    no_ranges(ex)
    assert capi.OH_NNExecutor_SetInputWithMemory(ex, 0, t(data_type=capi.OH_NN_INT32),
                                                 memory) == INVALID


def test_set_input_with_memory_too_small(ex):
    memory = capi.OH_NNExecutor_AllocateInputMemory(ex, 0, 20)
    assert capi.OH_NNExecutor_SetInputWithMemory(ex, 0, t(), memory) == INVALID


def test_run_with_memory_is_zero_copy(ex):
    memory_in = capi.OH_NNExecutor_AllocateInputMemory(ex, 0, 24)
    memory_out = capi.OH_NNExecutor_AllocateOutputMemory(ex, 0, 24)
    assert capi.OH_NNExecutor_SetInputWithMemory(ex, 0, t(), memory_in) == OK
    assert capi.OH_NNExecutor_SetOutputWithMemory(ex, 0, memory_out) == OK
    x_view = np.frombuffer(memory_in.data, np.float32).reshape(2, 3)
    y_view = np.frombuffer(memory_out.data, np.float32).reshape(2, 3)
    for scale in (1.0, -3.0):  # the device reads the memory as it is at Run
        x_view[...] = X * scale
        assert capi.OH_NNExecutor_Run(ex) == OK
        np.testing.assert_allclose(y_view, X * scale + W, rtol=1e-6)
    del x_view, y_view
    capi.OH_NNExecutor_DestroyInputMemory(ex, 0, memory_in)
    capi.OH_NNExecutor_DestroyOutputMemory(ex, 0, memory_out)


# -- 2.25 OH_NNExecutor_SetOutputWithMemory -------------------------------------------------------


def test_set_output_with_memory_rows(ex):
    memory = capi.OH_NNExecutor_AllocateOutputMemory(ex, 0, 24)
    small = capi.OH_NNExecutor_AllocateOutputMemory(ex, 0, 20)
    assert capi.OH_NNExecutor_SetOutputWithMemory(None, 0, memory) == INVALID
    assert capi.OH_NNExecutor_SetOutputWithMemory(ex, 0, None) == INVALID
    assert capi.OH_NNExecutor_SetOutputWithMemory(ex, 1, memory) == INVALID
    assert capi.OH_NNExecutor_SetOutputWithMemory(ex, 0, small) == INVALID
    ex.outputs[0].data_type = capi.OH_NN_UNKNOWN
    assert capi.OH_NNExecutor_SetOutputWithMemory(ex, 0, memory) == INVALID
    ex.outputs[0].data_type = F32
    assert capi.OH_NNExecutor_SetOutputWithMemory(ex, 0, memory) == OK


def test_destroying_the_executor_keeps_allocated_memory_valid(rt):
    executor = make_executor()
    memory = capi.OH_NNExecutor_AllocateInputMemory(executor, 0, 24)
    bind(executor, np.zeros(6, np.float32))
    capi.OH_NNExecutor_Destroy(executor)
    memory.data[:4] = b"\x01\x02\x03\x04"  # as upstream: the caller still owns it
    assert capi.OH_NNExecutor_Run(executor) == INVALID
    assert capi.OH_NNExecutor_SetInput(executor, 0, t(), X, X.nbytes) == INVALID
