"""MatMulFusion: y = activation(op(x1) @ op(x2)) with numpy `matmul` rules (semantics.md):
op() swaps the last two dimensions when transposeA / transposeB is set (a no-op on a 1-D
operand), batch dimensions broadcast, a 1-D operand is promoted and its unit dimension
removed from the result.

Both operands and the output share one dtype, float or integer (integers accumulate in their
own type and wrap, as numpy does). float16 (semantics.md "Float16 mode"): the products
accumulate in float32 and the fused activation applies to the float32 sum; each output
value is rounded to float16 once, at the end.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference import arena
from nnrt.hdi.reference.activations import apply_activation, fused_activation
from nnrt.hdi.reference.kernel import Kernel, register
from nnrt.hdi.reference.ops._common import (
    NUMERIC_DTYPES,
    bad_shape,
    broadcast_shapes,
    cast,
    check_declared_shapes,
    computed_dtypes,
    same_dim,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape


def _swap_last(shape: Shape) -> Shape:
    return shape[:-2] + (shape[-1], shape[-2]) if len(shape) >= 2 else shape


@register(na.NODE_TYPE_MATMUL_FUSION)
class MatMulFusion(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(2)
        self.dtype, self.work = computed_dtypes(node, NUMERIC_DTYPES, "inputs")
        self.activation = fused_activation(node, self.dtype)
        self.transpose_a = bool(node.attrs.transposeA)
        self.transpose_b = bool(node.attrs.transposeB)
        (declared,) = check_declared_shapes(self)
        # Operand and result shapes of a run with the declared shapes: its product is then
        # written straight into the output's buffer in the run's arena.
        shapes = (tuple(node.inputs[0].shape), tuple(node.inputs[1].shape), tuple(declared))
        self.static = None if any(DYNAMIC in s for s in shapes) or not declared else shapes
        # A constant operand is transposed (and up-cast) once, here.
        self.constants = [None if not t.is_constant else self._operand(t.constant, i)
                          for i, t in enumerate(node.inputs)]

    def _operand(self, array: np.ndarray, position: int) -> np.ndarray:
        transpose = self.transpose_a if position == 0 else self.transpose_b
        if transpose and array.ndim >= 2:
            array = np.swapaxes(array, -1, -2)
        return array.astype(self.work, copy=False)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        a, b = (tuple(s) for s in input_shapes)
        if not a or not b:
            raise bad_shape(self.node, "matmul operands must have rank >= 1")
        if self.transpose_a:
            a = _swap_last(a)
        if self.transpose_b:
            b = _swap_last(b)
        a2 = (1,) + a if len(a) == 1 else a
        b2 = b + (1,) if len(b) == 1 else b
        same_dim(self.node, a2[-1], b2[-2], f"inner dimensions of {list(a)} @ {list(b)}")
        batch = broadcast_shapes(self.node, a2[:-2], b2[:-2])
        out = batch + (a2[-2],) * (len(a) > 1) + (b2[-1],) * (len(b) > 1)
        return [out]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        a, b = (c if c is not None else self._operand(x, i)
                for i, (c, x) in enumerate(zip(self.constants, inputs)))
        static = self.static
        with np.errstate(all="ignore"):
            if static is not None and inputs[0].shape == static[0] \
                    and inputs[1].shape == static[1]:
                result = np.matmul(a, b, out=arena.output(self, 0, static[2], self.work))
            else:
                result = np.asarray(np.matmul(a, b))
        result = apply_activation(result, self.activation, inplace=result.ndim > 0)
        return [cast(result, self.dtype)]
