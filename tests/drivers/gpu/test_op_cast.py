"""Cast on the GPU against the CPU reference, bit for bit: every pair of the 12 HDI data
types (float16 and float64 included), with the values where the rules differ from a plain C
conversion (NaN, ±inf, beyond the target's range, -0, halves, large integers); a cast to
the same dtype shares its input's buffer; a run-time target type is refused."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from nnrt.common.dtypes import NUMPY_DTYPES, hdi_data_type
from nnrt.common.errors import DriverError
from nnrt.drivers.gpu.kernel import create_op
from nnrt.drivers.gpu.ops.op_cast import Cast
from nnrt.protos import node_attrs_pb2 as na
from tests.drivers.gpu.util import node_graph, run_cpu, run_gpu
from tests.hdi.reference.util import Const, make_node

DTYPES = sorted(set(NUMPY_DTYPES.values()), key=str)


def values(dtype: np.dtype) -> np.ndarray:
    """Edge values of `dtype` and ordinary ones."""
    if dtype == np.bool_:
        return np.array([True, False, True, True, False, False, True])
    if dtype.kind == "f":
        special = [np.nan, np.inf, -np.inf, -0.0, 0.5, -0.5, 1.5, -2.5, 127.9, -128.9,
                   255.5, 300.0, -300.0, 65504.0, 70000.0, 3e9, -3e9, 1e19, -1e19, 1e-8]
        with np.errstate(over="ignore"):
            ordinary = np.random.default_rng(3).normal(0, 1000, 50)
            return np.concatenate([special, ordinary]).astype(dtype)
    info = np.iinfo(dtype)
    edges = [info.min, info.max, 0, 1, -1 if info.min < 0 else 2, info.max // 2,
             info.min // 2, min(2 ** 24 + 1, info.max)]
    ordinary = np.random.default_rng(4).integers(info.min, info.max, 50, dtype=dtype,
                                                 endpoint=True)
    return np.concatenate([np.array([int(e) for e in edges], dtype=dtype), ordinary])


def cast_node(x: np.ndarray, dst: np.dtype, runtime_type: bool = False):
    code = np.array([hdi_data_type(dst)], np.int32)
    return make_node(na.NODE_TYPE_CAST, na.Cast(), [x, code if runtime_type else Const(code)],
                     out_dtype=dst, out_shape=x.shape)


@pytest.mark.parametrize("src,dst", list(itertools.product(DTYPES, DTYPES)),
                         ids=lambda d: str(d))
def test_every_pair_is_bit_exact(src: np.dtype, dst: np.dtype) -> None:
    x = values(src).reshape(-1)
    graph = node_graph(cast_node(x, dst))
    (gpu,), (cpu,) = run_gpu(graph, [x]), run_cpu(graph, [x])
    assert gpu.dtype == cpu.dtype == dst
    if dst.kind == "f":  # a NaN's payload is not a value: equal as values, signs of 0 too
        np.testing.assert_array_equal(gpu, cpu)
        np.testing.assert_array_equal(np.signbit(gpu), np.signbit(cpu))
    else:
        np.testing.assert_array_equal(gpu.view(np.uint8), cpu.view(np.uint8))


def test_same_dtype_shares_the_buffer() -> None:
    x = values(np.dtype(np.float32))
    op = create_op(cast_node(x, np.dtype(np.float32)))
    assert isinstance(op, Cast) and op.alias_input == 0
    assert isinstance(create_op(cast_node(x, np.dtype(np.int32))), Cast)
    assert create_op(cast_node(x, np.dtype(np.int32))).alias_input is None


def test_a_run_time_target_type_is_refused() -> None:
    with pytest.raises(DriverError, match="target-type input that arrives at run time"):
        create_op(cast_node(values(np.dtype(np.float32)), np.dtype(np.int32), True))
