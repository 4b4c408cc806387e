"""Helpers for the kernel unit tests: build NodeSpec / TensorSpec as the host does and run one
CPU kernel through create_kernel → infer_shapes → execute, checking what the host relies on
(output dtypes, inferred shapes, inputs left untouched)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from nnrt.drivers.cpu.kernel import Kernel, create_kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.server.dtypes import hdi_data_type
from nnrt.server.errors import DriverError
from nnrt.server.graph import DYNAMIC, NodeSpec, QuantParam, TensorSpec

NNRT_INVALID_NODE = ht.NNRT_INVALID_NODE  # 19
NNRT_UNSUPPORTED_OP = ht.NNRT_UNSUPPORTED_OP  # 33
NNRT_INVALID_SHAPE = ht.NNRT_INVALID_SHAPE  # 25
NNRT_INVALID_FORMAT = ht.NNRT_INVALID_FORMAT  # 23
NNRT_FAILED = ht.NNRT_FAILED  # 1


@dataclass
class Const:
    """A constant input: its data travels in the TensorSpec (read-only, as the host does)."""

    array: np.ndarray


@dataclass
class Declared:
    """A run-time input declared with another shape (DYNAMIC dims) or format than its array."""

    array: np.ndarray
    shape: tuple[int, ...] | None = None
    format: int | None = None


InputLike = np.ndarray | Const | Declared | TensorSpec


def readonly(array: np.ndarray) -> np.ndarray:
    """A read-only copy: a kernel writing into its inputs fails loudly."""
    out = np.array(array, copy=True)
    out.flags.writeable = False
    return out


def tensor_spec(index: int, dtype: Any, shape: Sequence[int], *, fmt: int = ht.FORMAT_NHWC,
                constant: np.ndarray | None = None,
                quant: Sequence[QuantParam] = ()) -> TensorSpec:
    dtype = np.dtype(dtype)
    if constant is not None:
        constant = readonly(np.asarray(constant, dtype=dtype).reshape(shape))
    return TensorSpec(index=index, name=f"t{index}", data_type=hdi_data_type(dtype), dtype=dtype,
                      shape=tuple(shape), format=fmt, quant_params=tuple(quant),
                      constant=constant)


def make_node(node_type: int, attrs: Any, inputs: Sequence[InputLike], *,
              out_dtype: Any = None, out_shape: Sequence[int] = (), fmt: int = ht.FORMAT_NHWC,
              n_outputs: int = 1, quant_type: int = ht.QUANT_TYPE_NONE,
              out_quant: Sequence[QuantParam] = ()) -> NodeSpec:
    """A node whose inputs are arrays (run-time inputs), Const, Declared or TensorSpecs."""
    specs = []
    for i, item in enumerate(inputs):
        if isinstance(item, TensorSpec):
            specs.append(item)
        elif isinstance(item, Const):
            specs.append(tensor_spec(i, item.array.dtype, item.array.shape, fmt=fmt,
                                     constant=item.array))
        elif isinstance(item, Declared):
            shape = item.array.shape if item.shape is None else item.shape
            specs.append(tensor_spec(i, item.array.dtype, shape,
                                     fmt=fmt if item.format is None else item.format))
        else:
            specs.append(tensor_spec(i, item.dtype, item.shape, fmt=fmt))
    if out_dtype is None:
        out_dtype = specs[0].dtype
    outputs = [tensor_spec(len(specs) + k, out_dtype, out_shape, fmt=fmt, quant=out_quant)
               for k in range(n_outputs)]
    return NodeSpec(index=0, name="node", node_type=node_type, attrs=attrs, inputs=tuple(specs),
                    outputs=tuple(outputs), quant_type=quant_type)


def arrays_of(inputs: Sequence[InputLike]) -> list[np.ndarray]:
    out = []
    for item in inputs:
        if isinstance(item, TensorSpec):
            out.append(item.constant)
        elif isinstance(item, (Const, Declared)):
            out.append(item.array)
        else:
            out.append(item)
    return out


def run_node(node: NodeSpec, arrays: Sequence[np.ndarray],
             kernel: Kernel | None = None) -> list[np.ndarray]:
    """Plan (unless given a kernel), infer, execute; check dtypes and inferred shapes."""
    kernel = create_kernel(node) if kernel is None else kernel
    arrays = [readonly(a) for a in arrays]
    shapes = kernel.infer_shapes([a.shape for a in arrays])
    outs = kernel.execute(arrays)
    assert len(outs) == len(node.outputs) == len(shapes)
    for out, shape, spec in zip(outs, shapes, node.outputs):
        assert isinstance(out, np.ndarray), type(out)
        assert out.dtype == spec.dtype, (out.dtype, spec.dtype)
        assert len(shape) == out.ndim and all(d in (DYNAMIC, o) for d, o in
                                              zip(shape, out.shape)), (shape, out.shape)
    return outs


def run_op(node_type: int, attrs: Any, inputs: Sequence[InputLike], **kw: Any) -> np.ndarray:
    """Build the node, run it on its inputs' arrays, return its single output."""
    node = make_node(node_type, attrs, inputs, **kw)
    (out,) = run_node(node, arrays_of(inputs))
    return out


def expect_error(code: int, fn: Callable[[], Any]) -> DriverError:
    with pytest.raises(DriverError) as info:
        fn()
    assert info.value.code == code, f"code {info.value.code} ({info.value}), expected {code}"
    return info.value


def expect_refused(code: int, node_type: int, attrs: Any, inputs: Sequence[InputLike],
                   **kw: Any) -> DriverError:
    """create_kernel must refuse the node with `code`."""
    node = make_node(node_type, attrs, inputs, **kw)
    return expect_error(code, lambda: create_kernel(node))


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def randn(*shape: int, dtype: Any = np.float32, seed: int = 0) -> np.ndarray:
    return rng(seed).standard_normal(shape).astype(dtype)
