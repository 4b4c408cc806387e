"""The reference engine: numpy kernels of every operator, the readable meaning of a node.

Creating a node's kernel (`kernel.create_kernel`, registered by `NodeType` in
`ops/op_*.py`) validates it and infers its output shapes; `plan.ExecutionPlan` runs a whole
graph with them; `float16.to_float16` is the float16-mode rewrite; `graph_checks` holds what
every driver does over a whole graph (supported operations, shape inference, run memory).
The CPU driver computes with it; the GPU driver and the accelerator validate with it.
"""

# Every operator registered (ops/op_*.py fill kernel.KERNELS) and the quantised wrapper set
# (quantized.py) before any module of the engine is used: importing a submodule runs this
# first, so `create_kernel` never meets an empty registry.
from . import ops, quantized  # noqa: E402,F401
