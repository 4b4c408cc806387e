"""The onnxruntime engine against the numpy kernels over the operator test cases.

Every CPU kernel test that runs a node through `tests.hdi.reference.util.run_node` also hands the
node, its inputs and the numpy kernel's outputs here: where the node lowers to ONNX, it runs
as a one-node graph through the ort engine's partitioner (a session of its own) and the
outputs must agree — float32 within 1e-5 relative (near 0 within 1e-6 of the output's
scale, for sums that cancel), requantized int8 outputs within one quantisation step,
everything else exactly. Nodes that stay on numpy are
counted, not compared. `NNRT_TEST_ORT_DIFFERENTIAL=0` switches the comparison off.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.drivers.cpu.ort import engine
from nnrt.hdi.reference.plan import ExecutionPlan
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import DriverError
from nnrt.hdi.graph import Graph, NodeSpec

ENABLED = os.environ.get("NNRT_TEST_ORT_DIFFERENTIAL", "1") != "0"
compared: Counter[str] = Counter()  # node type name -> cases compared
kept_on_numpy: Counter[str] = Counter()


def never() -> bool:
    return False


def node_graph(node: NodeSpec) -> Graph:
    tensors = list(node.inputs) + list(node.outputs)
    return Graph(name="node", tensors=tuple(tensors), nodes=(node,),
                 inputs=tuple(t for t in node.inputs if not t.is_constant),
                 outputs=tuple(node.outputs), execution_order=(0,))


def assert_agree(got: Sequence[np.ndarray], want: Sequence[np.ndarray], rtol: float = 1e-5,
                 atol: float = 1e-6, quantised: Sequence[bool] = ()) -> None:
    """`quantised[k]`: output k is requantized int8/uint8, where one step may differ
    (onnxruntime's int8 kernels requantize an int32 sum, our reference a float32 one; see
    nnrt.drivers.cpu.ort.quantized); the rest by assert_outputs_close."""
    from tests.hdi.reference.util import assert_outputs_close  # (that module imports this one)

    quantised = list(quantised) or [False] * len(want)
    assert len(got) == len(want) == len(quantised)
    for g, w, q in zip(got, want, quantised):
        if q:
            assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
            diff = np.abs(g.astype(np.int64) - w.astype(np.int64))
            assert diff.size == 0 or diff.max() <= 1, f"{diff.max()} quantisation steps apart"
        else:
            assert_outputs_close([g], [w], rtol, atol)


def run_on_ort(node: NodeSpec, arrays: Sequence[np.ndarray],
               kernel: object | None = None) -> tuple[list[np.ndarray], bool]:
    """(outputs, whether onnxruntime computed them) of a one-node graph on the ort engine."""
    graph = node_graph(node)
    kernels = {0: kernel or create_kernel(node)}
    part = engine.partition(graph, kernels)
    plan = ExecutionPlan(graph, partitioner=lambda g, k: engine.units_with_tensors(part, g))
    inputs = [a for a, spec in zip(arrays, node.inputs) if not spec.is_constant]
    return plan.run(inputs, never), bool(part.segments)


def compare_on_ort(node: NodeSpec, arrays: Sequence[np.ndarray],
                   numpy_outputs: Sequence[np.ndarray]) -> None:
    if not ENABLED:
        return
    name = na.NodeType.Name(node.node_type)
    if node.node_type not in engine.LOWERINGS:  # quantised ones lower through the float one
        kept_on_numpy[name] += 1
        return
    # The kernel tests declare outputs loosely (shape ()): a graph declares what was computed.
    node = dataclasses.replace(node, outputs=tuple(
        dataclasses.replace(spec, shape=tuple(out.shape))
        for spec, out in zip(node.outputs, numpy_outputs)))
    try:
        kernel = create_kernel(node)
    except DriverError:  # a node the test ran through a kernel of its own making
        kept_on_numpy[name] += 1
        return
    outputs, on_ort = run_on_ort(node, arrays, kernel)  # a failing run fails the test
    if not on_ort:
        kept_on_numpy[name] += 1
        return
    with np.errstate(all="ignore"):
        assert_agree(outputs, numpy_outputs, quantised=[
            node.quant_type == ht.QUANT_TYPE_ALL and bool(spec.quant_params)
            for spec in node.outputs])
    compared[name] += 1
