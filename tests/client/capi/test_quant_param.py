"""NN_QuantParam (capi.md 2.1–2.5): one test per condition-table row."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from nnrt.client.capi.enums import OH_NN_INVALID_PARAMETER, OH_NN_SUCCESS
from nnrt.client.capi.quant_param import (
    NN_QuantParam,
    OH_NNQuantParam_Create,
    OH_NNQuantParam_Destroy,
    OH_NNQuantParam_SetNumBits,
    OH_NNQuantParam_SetScales,
    OH_NNQuantParam_SetZeroPoints,
)
from nnrt.client.capi.tensor_desc import OH_NNTensorDesc_Create

SETTERS = [
    (OH_NNQuantParam_SetScales, "scales", [0.5, 0.25], [0.5, 0.25]),
    (OH_NNQuantParam_SetZeroPoints, "zero_points", [1, -2], [1, -2]),
    (OH_NNQuantParam_SetNumBits, "num_bits", [8, 8], [8, 8]),
]
ids = [s[1] for s in SETTERS]


def test_create_is_empty():
    qp = OH_NNQuantParam_Create()
    assert isinstance(qp, NN_QuantParam)
    assert (qp.scales, qp.zero_points, qp.num_bits) == ([], [], [])


@pytest.mark.parametrize("setter, attr, values, stored", SETTERS, ids=ids)
class TestSetters:
    def test_null_handle(self, setter, attr, values, stored):
        assert setter(None, values, 2) == OH_NN_INVALID_PARAMETER

    def test_wrong_handle_type(self, setter, attr, values, stored):
        assert setter(OH_NNTensorDesc_Create(), values, 2) == OH_NN_INVALID_PARAMETER

    def test_destroyed_handle(self, setter, attr, values, stored):
        qp = OH_NNQuantParam_Create()
        assert OH_NNQuantParam_Destroy(qp) == OH_NN_SUCCESS
        assert setter(qp, values, 2) == OH_NN_INVALID_PARAMETER

    def test_null_array(self, setter, attr, values, stored):
        assert setter(OH_NNQuantParam_Create(), None, 2) == OH_NN_INVALID_PARAMETER

    def test_zero_count(self, setter, attr, values, stored):
        qp = OH_NNQuantParam_Create()
        assert setter(qp, values, 0) == OH_NN_INVALID_PARAMETER
        assert getattr(qp, attr) == []

    def test_count_larger_than_the_sequence(self, setter, attr, values, stored):
        assert setter(OH_NNQuantParam_Create(), values, 3) == OH_NN_INVALID_PARAMETER

    def test_success_copies(self, setter, attr, values, stored):
        qp = OH_NNQuantParam_Create()
        source = list(values)
        assert setter(qp, source, 2) == OH_NN_SUCCESS
        source[0] = 99
        assert getattr(qp, attr) == stored

    def test_smaller_count_uses_the_first_elements_and_replaces(self, setter, attr, values, stored):
        qp = OH_NNQuantParam_Create()
        assert setter(qp, values, 2) == OH_NN_SUCCESS
        assert setter(qp, values, 1) == OH_NN_SUCCESS
        assert getattr(qp, attr) == stored[:1]

    def test_numpy_arrays_are_sequences(self, setter, attr, values, stored):
        qp = OH_NNQuantParam_Create()
        assert setter(qp, np.array(values), 2) == OH_NN_SUCCESS
        assert getattr(qp, attr) == stored


@pytest.mark.parametrize("setter, bad", [
    (OH_NNQuantParam_SetScales, ["x"]),
    (OH_NNQuantParam_SetZeroPoints, [1.5]),
    (OH_NNQuantParam_SetZeroPoints, [1 << 31]),
    (OH_NNQuantParam_SetNumBits, [-1]),
])
def test_unrepresentable_element(setter, bad):
    assert setter(OH_NNQuantParam_Create(), bad, 1) == OH_NN_INVALID_PARAMETER


def test_num_bits_are_not_validated_when_set():
    qp = OH_NNQuantParam_Create()
    assert OH_NNQuantParam_SetNumBits(qp, [4], 1) == OH_NN_SUCCESS  # checked when applied


class TestDestroy:
    def test_null(self):
        assert OH_NNQuantParam_Destroy(None) == OH_NN_INVALID_PARAMETER

    def test_twice(self):
        qp = OH_NNQuantParam_Create()
        assert OH_NNQuantParam_Destroy(qp) == OH_NN_SUCCESS
        assert OH_NNQuantParam_Destroy(qp) == OH_NN_INVALID_PARAMETER

    def test_wrong_type(self):
        assert OH_NNQuantParam_Destroy(OH_NNTensorDesc_Create()) == OH_NN_INVALID_PARAMETER


def test_concurrent_setters_and_destroy_give_clean_codes():
    qp = OH_NNQuantParam_Create()
    codes: list[int] = []
    barrier = threading.Barrier(5)

    def worker():
        barrier.wait(5)
        for _ in range(200):
            codes.append(OH_NNQuantParam_SetScales(qp, [1.0, 2.0], 2))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    barrier.wait(5)
    assert OH_NNQuantParam_Destroy(qp) == OH_NN_SUCCESS
    for t in threads:
        t.join(10)
        assert not t.is_alive()
    assert set(codes) <= {OH_NN_SUCCESS, OH_NN_INVALID_PARAMETER}
    assert OH_NNQuantParam_SetScales(qp, [1.0], 1) == OH_NN_INVALID_PARAMETER
