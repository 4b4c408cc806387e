"""The GPU driver against the CPU driver over the operator test cases.

Every CPU kernel test that runs a node through `tests.hdi.reference.util.run_node` also hands
the node, its inputs and the CPU's outputs here: where the GPU driver accepts the node, it
runs it as a one-node graph on the GPU (PoCL in CI) with the same inputs and the outputs
must agree — float32 within 1e-4 relative, float16 within two float16 ulps (the CPU
computes element-wise float16 operators in float16 steps, the GPU in float32 rounded once),
quantised (QUANT_TYPE_ALL) int8 / uint8 outputs within one quantisation step (semantics.md:
the GPU's integer kernels sum exactly, the CPU dequantises to float32 and sums in float32),
everything else exactly. Nodes the GPU refuses
are counted, not compared. `NNRT_TEST_GPU_DIFFERENTIAL=0` switches the comparison off.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Sequence

import numpy as np

from nnrt.drivers.gpu.kernel import create_op, node_type_name
from nnrt.common.errors import DriverError
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.hdi.graph import NodeSpec

ENABLED = os.environ.get("NNRT_TEST_GPU_DIFFERENTIAL", "1") != "0"
compared: Counter[str] = Counter()  # node type name -> cases compared
refused: Counter[str] = Counter()  # ... cases the GPU refused


def compare_on_gpu(node: NodeSpec, arrays: Sequence[np.ndarray],
                   cpu_outputs: Sequence[np.ndarray]) -> None:
    if not ENABLED:
        return
    from tests.drivers.gpu.util import assert_close, node_graph, run_gpu

    name = node_type_name(node.node_type)
    try:
        create_op(node)
    except DriverError:
        refused[name] += 1
        return
    # The kernel tests declare outputs loosely (shape ()): a graph declares what was computed.
    node = dataclasses.replace(node, outputs=tuple(
        dataclasses.replace(spec, shape=tuple(out.shape))
        for spec, out in zip(node.outputs, cpu_outputs)))
    inputs = [a for a, spec in zip(arrays, node.inputs) if not spec.is_constant]
    gpu_outputs = run_gpu(node_graph(node), inputs)
    with np.errstate(all="ignore"):  # the test's own errstate is for its kernel, not for us
        if node.quant_type == ht.QUANT_TYPE_ALL:
            name = f"quantised {name}"
            for gpu, cpu in zip(gpu_outputs, cpu_outputs):
                assert gpu.dtype == cpu.dtype and gpu.shape == cpu.shape
                steps = np.abs(gpu.astype(np.int64) - cpu.astype(np.int64))
                assert steps.max(initial=0) <= (1 if cpu.dtype.kind in "iu" else 0), \
                    f"{name}: {steps.max()} steps from the CPU"
        elif any(out.dtype == np.float16 for out in cpu_outputs):
            # float16 (semantics.md): the CPU computes some operators in float16 steps, the
            # GPU in float32 rounded once: within two float16 ulps
            assert_close(gpu_outputs, cpu_outputs, rtol=2 * 2.0 ** -10, atol=2 * 2.0 ** -11)
        else:
            assert_close(gpu_outputs, cpu_outputs)
    compared[name] += 1
