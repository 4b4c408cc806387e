"""NN_TensorDesc (capi.md 1.15–1.26): one test per condition-table row."""

from __future__ import annotations

import threading

import pytest

from nnrt.client.capi.enums import (
    OH_NN_DYNAMIC_SHAPE,
    OH_NN_FLOAT16,
    OH_NN_FLOAT32,
    OH_NN_FLOAT64,
    OH_NN_FORMAT_ND,
    OH_NN_FORMAT_NHWC,
    OH_NN_FORMAT_NONE,
    OH_NN_INT8,
    OH_NN_INVALID_PARAMETER,
    OH_NN_SUCCESS,
    OH_NN_UNKNOWN,
    OH_NN_DataType,
    OH_NN_Format,
)
from nnrt.client.capi.quant_param import OH_NNQuantParam_Create
from nnrt.client.capi.tensor_desc import (
    NN_TensorDesc,
    OH_NNTensorDesc_Create,
    OH_NNTensorDesc_Destroy,
    OH_NNTensorDesc_GetByteSize,
    OH_NNTensorDesc_GetDataType,
    OH_NNTensorDesc_GetElementCount,
    OH_NNTensorDesc_GetFormat,
    OH_NNTensorDesc_GetName,
    OH_NNTensorDesc_GetShape,
    OH_NNTensorDesc_SetDataType,
    OH_NNTensorDesc_SetFormat,
    OH_NNTensorDesc_SetName,
    OH_NNTensorDesc_SetShape,
)


def desc(shape=None, data_type=OH_NN_FLOAT32) -> NN_TensorDesc:
    d = OH_NNTensorDesc_Create()
    assert OH_NNTensorDesc_SetDataType(d, data_type) == OH_NN_SUCCESS
    if shape is not None:
        assert OH_NNTensorDesc_SetShape(d, shape, len(shape)) == OH_NN_SUCCESS
    return d


def destroyed() -> NN_TensorDesc:
    d = OH_NNTensorDesc_Create()
    assert OH_NNTensorDesc_Destroy(d) == OH_NN_SUCCESS
    return d


BAD_HANDLES = [None, "destroyed", "wrong type"]


def bad(kind):
    return {"destroyed": destroyed(), "wrong type": OH_NNQuantParam_Create()}.get(kind)


# -- 1.15 / 1.16 ----------------------------------------------------------------------------


def test_create_initial_state():
    d = OH_NNTensorDesc_Create()
    assert OH_NNTensorDesc_GetName(d) == (OH_NN_SUCCESS, "")
    assert OH_NNTensorDesc_GetDataType(d) == (OH_NN_SUCCESS, OH_NN_UNKNOWN)
    assert OH_NNTensorDesc_GetFormat(d) == (OH_NN_SUCCESS, OH_NN_FORMAT_NONE)
    assert OH_NNTensorDesc_GetShape(d) == (OH_NN_SUCCESS, [])
    assert d.shape is None


class TestDestroy:
    def test_null(self):
        assert OH_NNTensorDesc_Destroy(None) == OH_NN_INVALID_PARAMETER

    def test_twice(self):
        d = OH_NNTensorDesc_Create()
        assert OH_NNTensorDesc_Destroy(d) == OH_NN_SUCCESS
        assert OH_NNTensorDesc_Destroy(d) == OH_NN_INVALID_PARAMETER

    def test_wrong_type(self):
        assert OH_NNTensorDesc_Destroy(OH_NNQuantParam_Create()) == OH_NN_INVALID_PARAMETER

    def test_owned_descriptor_is_refused(self):
        d = OH_NNTensorDesc_Create()
        d.owner = object()
        assert OH_NNTensorDesc_Destroy(d) == OH_NN_INVALID_PARAMETER
        assert not d.destroyed


# -- 1.17 / 1.18 ----------------------------------------------------------------------------


class TestName:
    @pytest.mark.parametrize("kind", BAD_HANDLES)
    def test_set_bad_handle(self, kind):
        assert OH_NNTensorDesc_SetName(bad(kind), "x") == OH_NN_INVALID_PARAMETER

    def test_set_null_name(self):
        assert OH_NNTensorDesc_SetName(OH_NNTensorDesc_Create(), None) == OH_NN_INVALID_PARAMETER

    def test_set_not_a_string(self):
        assert OH_NNTensorDesc_SetName(OH_NNTensorDesc_Create(), 5) == OH_NN_INVALID_PARAMETER

    @pytest.mark.parametrize("name, stored", [("input", "input"), ("", ""),
                                              (b"utf8 \xc3\xa9", "utf8 é"), ("cut\0here", "cut")])
    def test_set_and_get(self, name, stored):
        d = OH_NNTensorDesc_Create()
        assert OH_NNTensorDesc_SetName(d, name) == OH_NN_SUCCESS
        assert OH_NNTensorDesc_GetName(d) == (OH_NN_SUCCESS, stored)

    def test_set_invalid_utf8(self):
        assert OH_NNTensorDesc_SetName(OH_NNTensorDesc_Create(), b"\xff") == OH_NN_INVALID_PARAMETER

    @pytest.mark.parametrize("kind", BAD_HANDLES)
    def test_get_bad_handle(self, kind):
        assert OH_NNTensorDesc_GetName(bad(kind)) == (OH_NN_INVALID_PARAMETER, None)


# -- 1.19 / 1.20 ----------------------------------------------------------------------------


class TestDataType:
    @pytest.mark.parametrize("kind", BAD_HANDLES)
    def test_set_bad_handle(self, kind):
        assert OH_NNTensorDesc_SetDataType(bad(kind), OH_NN_FLOAT32) == OH_NN_INVALID_PARAMETER

    @pytest.mark.parametrize("value", [-1, 13, 1.0, None])
    def test_set_out_of_range(self, value):
        d = desc(data_type=OH_NN_INT8)
        assert OH_NNTensorDesc_SetDataType(d, value) == OH_NN_INVALID_PARAMETER
        assert OH_NNTensorDesc_GetDataType(d) == (OH_NN_SUCCESS, OH_NN_INT8)

    @pytest.mark.parametrize("value", list(range(13)))
    def test_set_and_get_every_value(self, value):
        d = OH_NNTensorDesc_Create()
        assert OH_NNTensorDesc_SetDataType(d, value) == OH_NN_SUCCESS
        code, got = OH_NNTensorDesc_GetDataType(d)
        assert code == OH_NN_SUCCESS and got == value and isinstance(got, OH_NN_DataType)

    @pytest.mark.parametrize("kind", BAD_HANDLES)
    def test_get_bad_handle(self, kind):
        assert OH_NNTensorDesc_GetDataType(bad(kind)) == (OH_NN_INVALID_PARAMETER, None)


# -- 1.21 / 1.22 ----------------------------------------------------------------------------


class TestShape:
    @pytest.mark.parametrize("kind", BAD_HANDLES)
    def test_set_bad_handle(self, kind):
        assert OH_NNTensorDesc_SetShape(bad(kind), [1], 1) == OH_NN_INVALID_PARAMETER

    def test_set_null_shape(self):
        assert OH_NNTensorDesc_SetShape(OH_NNTensorDesc_Create(), None, 1) == OH_NN_INVALID_PARAMETER

    def test_set_zero_length(self):
        assert OH_NNTensorDesc_SetShape(OH_NNTensorDesc_Create(), [1], 0) == OH_NN_INVALID_PARAMETER

    def test_set_length_over_10(self):
        shape = [1] * 11
        assert OH_NNTensorDesc_SetShape(OH_NNTensorDesc_Create(), shape, 11) == OH_NN_INVALID_PARAMETER

    def test_set_length_10(self):
        d = OH_NNTensorDesc_Create()
        assert OH_NNTensorDesc_SetShape(d, [1] * 10, 10) == OH_NN_SUCCESS

    def test_set_length_larger_than_the_sequence(self):
        assert OH_NNTensorDesc_SetShape(OH_NNTensorDesc_Create(), [1, 2], 3) == OH_NN_INVALID_PARAMETER

    def test_set_not_int32(self):
        d = OH_NNTensorDesc_Create()
        assert OH_NNTensorDesc_SetShape(d, [1 << 31], 1) == OH_NN_INVALID_PARAMETER
        assert OH_NNTensorDesc_SetShape(d, [1.5], 1) == OH_NN_INVALID_PARAMETER

    def test_set_copies_and_replaces_values_unvalidated(self):
        d = OH_NNTensorDesc_Create()
        shape = [2, -1, 0, 3]
        assert OH_NNTensorDesc_SetShape(d, shape, 4) == OH_NN_SUCCESS
        shape[0] = 7
        assert OH_NNTensorDesc_GetShape(d) == (OH_NN_SUCCESS, [2, -1, 0, 3])
        assert OH_NNTensorDesc_SetShape(d, [5, 6, 7], 2) == OH_NN_SUCCESS  # first 2 used
        assert OH_NNTensorDesc_GetShape(d) == (OH_NN_SUCCESS, [5, 6])

    @pytest.mark.parametrize("kind", BAD_HANDLES)
    def test_get_bad_handle(self, kind):
        assert OH_NNTensorDesc_GetShape(bad(kind)) == (OH_NN_INVALID_PARAMETER, None)

    def test_get_unset_is_empty(self):
        assert OH_NNTensorDesc_GetShape(OH_NNTensorDesc_Create()) == (OH_NN_SUCCESS, [])

    def test_get_returns_a_copy(self):
        d = desc([1, 2])
        _, shape = OH_NNTensorDesc_GetShape(d)
        shape.append(3)
        assert OH_NNTensorDesc_GetShape(d) == (OH_NN_SUCCESS, [1, 2])


# -- 1.23 / 1.24 ----------------------------------------------------------------------------


class TestFormat:
    @pytest.mark.parametrize("kind", BAD_HANDLES)
    def test_set_bad_handle(self, kind):
        assert OH_NNTensorDesc_SetFormat(bad(kind), OH_NN_FORMAT_NHWC) == OH_NN_INVALID_PARAMETER

    @pytest.mark.parametrize("value", [-1, 4, "NHWC"])
    def test_set_out_of_range(self, value):
        assert OH_NNTensorDesc_SetFormat(OH_NNTensorDesc_Create(), value) == OH_NN_INVALID_PARAMETER

    @pytest.mark.parametrize("value", [0, 1, 2, 3])
    def test_set_and_get(self, value):
        d = OH_NNTensorDesc_Create()
        assert OH_NNTensorDesc_SetFormat(d, value) == OH_NN_SUCCESS
        code, got = OH_NNTensorDesc_GetFormat(d)
        assert (code, got) == (OH_NN_SUCCESS, value) and isinstance(got, OH_NN_Format)

    @pytest.mark.parametrize("kind", BAD_HANDLES)
    def test_get_bad_handle(self, kind):
        assert OH_NNTensorDesc_GetFormat(bad(kind)) == (OH_NN_INVALID_PARAMETER, None)

    def test_nd_is_accepted(self):
        assert OH_NNTensorDesc_SetFormat(OH_NNTensorDesc_Create(), OH_NN_FORMAT_ND) == OH_NN_SUCCESS


# -- 1.25 / 1.26 ----------------------------------------------------------------------------


class TestElementCount:
    @pytest.mark.parametrize("kind", BAD_HANDLES)
    def test_bad_handle(self, kind):
        assert OH_NNTensorDesc_GetElementCount(bad(kind)) == (OH_NN_INVALID_PARAMETER, None)

    def test_no_shape(self):
        assert OH_NNTensorDesc_GetElementCount(desc()) == (OH_NN_INVALID_PARAMETER, None)

    @pytest.mark.parametrize("shape", [[2, -1], [0, 3]])
    def test_dynamic(self, shape):
        assert OH_NNTensorDesc_GetElementCount(desc(shape)) == (OH_NN_DYNAMIC_SHAPE, 0)

    def test_overflow(self):
        big = (1 << 31) - 1
        assert OH_NNTensorDesc_GetElementCount(desc([big, big, big])) == (OH_NN_INVALID_PARAMETER, None)

    def test_product(self):
        assert OH_NNTensorDesc_GetElementCount(desc([2, 3, 4])) == (OH_NN_SUCCESS, 24)


class TestByteSize:
    @pytest.mark.parametrize("kind", BAD_HANDLES)
    def test_bad_handle(self, kind):
        assert OH_NNTensorDesc_GetByteSize(bad(kind)) == (OH_NN_INVALID_PARAMETER, None)

    def test_no_shape(self):
        assert OH_NNTensorDesc_GetByteSize(desc()) == (OH_NN_INVALID_PARAMETER, None)

    def test_dynamic_is_dynamic_shape_and_zero(self):  # ours (capi.md 5.2)
        assert OH_NNTensorDesc_GetByteSize(desc([-1, 3])) == (OH_NN_DYNAMIC_SHAPE, 0)

    def test_element_count_overflow(self):
        big = (1 << 31) - 1
        assert OH_NNTensorDesc_GetByteSize(desc([big, big, big])) == (OH_NN_INVALID_PARAMETER, None)

    def test_unknown_data_type(self):
        assert OH_NNTensorDesc_GetByteSize(desc([2], OH_NN_UNKNOWN)) == (OH_NN_INVALID_PARAMETER, None)

    def test_byte_size_overflow(self):
        # 2^62 elements fit size_t; 8 bytes each do not.
        d = desc([1 << 30, 1 << 30, 4], OH_NN_FLOAT64)
        assert OH_NNTensorDesc_GetElementCount(d) == (OH_NN_SUCCESS, 1 << 62)
        assert OH_NNTensorDesc_GetByteSize(d) == (OH_NN_INVALID_PARAMETER, None)

    @pytest.mark.parametrize("data_type, size", [(OH_NN_INT8, 6), (OH_NN_FLOAT16, 12),
                                                 (OH_NN_FLOAT32, 24), (OH_NN_FLOAT64, 48)])
    def test_size(self, data_type, size):
        assert OH_NNTensorDesc_GetByteSize(desc([2, 3], data_type)) == (OH_NN_SUCCESS, size)


def test_copy_is_independent():
    d = desc([1, 2])
    OH_NNTensorDesc_SetName(d, "a")
    OH_NNTensorDesc_SetFormat(d, OH_NN_FORMAT_NHWC)
    c = d.copy()
    OH_NNTensorDesc_SetShape(d, [9], 1)
    assert (c.name, c.data_type, c.shape, c.format) == ("a", OH_NN_FLOAT32, [1, 2], OH_NN_FORMAT_NHWC)
    assert c is not d and not c.destroyed


def test_concurrent_use_and_destroy():
    d = desc([1])
    codes: set[int] = set()
    stop = threading.Event()

    def worker():
        while not stop.is_set():
            codes.add(OH_NNTensorDesc_SetShape(d, [2, 3], 2))
            codes.add(OH_NNTensorDesc_GetByteSize(d)[0])

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    assert OH_NNTensorDesc_Destroy(d) == OH_NN_SUCCESS
    stop.set()
    for t in threads:
        t.join(10)
        assert not t.is_alive()
    assert codes <= {OH_NN_SUCCESS, OH_NN_INVALID_PARAMETER}
    assert OH_NNTensorDesc_GetShape(d) == (OH_NN_INVALID_PARAMETER, None)
