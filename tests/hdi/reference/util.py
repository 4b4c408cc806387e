"""Helpers for the kernel unit tests: build NodeSpec / TensorSpec as the host does and run one
CPU kernel through create_kernel → infer_shapes → execute, checking what the host relies on
(output dtypes, inferred shapes, inputs left untouched); and the reference most of them
compare against, one ONNX node run by onnx's reference evaluator (`onnx_reference`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.helper import np_dtype_to_tensor_dtype
from onnx.reference import ReferenceEvaluator

from nnrt.hdi.reference.kernel import Kernel, create_kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common.dtypes import hdi_data_type
from nnrt.common.errors import DriverError
from nnrt.hdi.graph import DYNAMIC, Graph, NodeSpec, QuantParam, TensorSpec
from tests.drivers.gpu.differential import compare_on_gpu
from tests.drivers.cpu.ort.differential import compare_on_ort

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


class GraphBuilder:
    """A Graph built directly (no client), nodes in execution order: float32 tensors unless
    told, quantisation parameters where given."""

    def __init__(self) -> None:
        self.tensors: list[TensorSpec] = []
        self.nodes: list[NodeSpec] = []

    def tensor(self, shape, constant: np.ndarray | None = None, dtype=np.float32,
               quant: Sequence[QuantParam] = ()) -> TensorSpec:
        t = tensor_spec(len(self.tensors), dtype, shape, constant=constant, quant=quant)
        self.tensors.append(t)
        return t

    def node(self, node_type: int, attrs, inputs, out_shape, dtype=np.float32,
             quant: Sequence[QuantParam] = (), quant_type: int = ht.QUANT_TYPE_NONE) -> TensorSpec:
        out = self.tensor(out_shape, dtype=dtype, quant=quant)
        self.nodes.append(NodeSpec(index=len(self.nodes), name=f"n{len(self.nodes)}",
                                   node_type=node_type, attrs=attrs, inputs=tuple(inputs),
                                   outputs=(out,), quant_type=quant_type))
        return out

    def graph(self, inputs, outputs) -> Graph:
        return Graph(name="g", tensors=tuple(self.tensors), nodes=tuple(self.nodes),
                     inputs=tuple(inputs), outputs=tuple(outputs),
                     execution_order=tuple(range(len(self.nodes))))


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
    """Plan (unless given a kernel), infer, execute; check dtypes and inferred shapes; and
    where the GPU driver accepts the node, run it there too and compare (the differential
    suite of the GPU driver over every kernel test case: tests/drivers/gpu/differential.py), and
    likewise on the CPU driver's onnxruntime engine (tests/drivers/cpu/ort/differential.py)."""
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
    compare_on_gpu(node, arrays, outs)
    compare_on_ort(node, arrays, outs)
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


def int_wrapper(dtype: Any) -> Callable[[int], int]:
    """v -> v wrapped into integer `dtype` (two's complement modulo 2**bits): what C integer
    arithmetic gives, for checking results that overflow."""
    info = np.iinfo(dtype)
    bits = info.bits

    def wrap(v: int) -> int:
        v &= (1 << bits) - 1
        return v - (1 << bits) if info.min < 0 and v >= 1 << (bits - 1) else v

    return wrap


def broadcast_apply(fn: Callable[[Any, Any], Any], x: np.ndarray, y: np.ndarray) -> list:
    """fn over explicitly broadcast index pairs (right-aligned, size-1 dims repeat), flat:
    a reference for binary element-wise operators that does not rely on numpy broadcasting."""
    rank = max(x.ndim, y.ndim)
    xs, ys = (1,) * (rank - x.ndim) + x.shape, (1,) * (rank - y.ndim) + y.shape
    shape = tuple(max(a, b) for a, b in zip(xs, ys))
    xr, yr = x.reshape(xs), y.reshape(ys)
    out = []
    for idx in itertools.product(*(range(d) for d in shape)):
        xi = tuple(i if d > 1 else 0 for i, d in zip(idx, xs))
        yi = tuple(i if d > 1 else 0 for i, d in zip(idx, ys))
        out.append(fn(xr[xi].item(), yr[yi].item()))
    return out


def assert_outputs_close(got: Sequence[np.ndarray], want: Sequence[np.ndarray], rtol: float,
                         atol: float) -> None:
    """Floats within `rtol` relative; near 0, within `atol` of the output's scale (a sum of
    large terms that cancels keeps the rounding of the terms, whatever order adds them);
    integers and bools exact. What the differential suites compare devices and engines by."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if np.issubdtype(w.dtype, np.floating):
            finite = np.abs(w[np.isfinite(w)])
            scale = 1.0 + (float(finite.max()) if finite.size else 0.0)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * scale, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def randn(*shape: int, dtype: Any = np.float32, seed: int = 0) -> np.ndarray:
    return rng(seed).standard_normal(shape).astype(dtype)


ONNX_OPSET = 19  # unless a test pins the opset whose version of the operator it compares with


def onnx_outputs(op_type: str, inputs: Sequence[np.ndarray | None], n_out: int = 1, *,
                 opset: int = ONNX_OPSET, **attrs: Any) -> list[np.ndarray]:
    """The `n_out` outputs of a one-node ONNX model (default opset ONNX_OPSET) on `inputs`,
    run by onnx's reference evaluator; None leaves an optional input out."""
    names = [f"in{k}" if a is not None else "" for k, a in enumerate(inputs)]
    outs = [f"out{k}" for k in range(n_out)]
    node = helper.make_node(op_type, names, outs, **attrs)
    given = [(n, a) for n, a in zip(names, inputs) if a is not None]
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in given],
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, dict(given))


def onnx_reference(op_type: str, inputs: Sequence[np.ndarray | None], *,
                   opset: int = ONNX_OPSET, **attrs: Any) -> np.ndarray:
    """The single output of `onnx_outputs` (an array even when 0-D)."""
    return np.asarray(onnx_outputs(op_type, inputs, opset=opset, **attrs)[0])
