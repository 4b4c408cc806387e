"""What Softmax and LogSoftmax share: one float input of rank >= 1 (float16 computed in
float32, the sum of exponentials accumulated in float32, each output value rounded once),
normalised along one axis into an output of its shape and dtype; an empty input gives an
empty output.

Computation: along the last axis (the usual case) the input is seen as rows [R, L]. The
row maxima come from argmax and one gather (numpy's max-reduction of many short rows is
several times slower; argmax treats NaN as the maximum, as max does), the row sums of
exp from `_common.row_sum` (a matrix product with a ones vector for rows of up to
SUM_BY_MATMUL values, numpy's pairwise sum beyond). The result is computed in the
output's buffer of the run's arena. Along another axis: numpy reductions with keepdims.

The leading underscore keeps this module out of the `op_*` auto-import.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference import arena
from nnrt.hdi.reference.kernel import Kernel, invalid
from nnrt.hdi.reference.ops._common import FLOAT_DTYPES, cast, computed_dtypes, row_ones
from nnrt.hdi.graph import NodeSpec, Shape


def row_max(rows: np.ndarray) -> np.ndarray:
    """[R, 1]: the maximum of each row of rows [R, L] (L >= 1); NaN where a row holds one."""
    if rows.shape[0] <= 4:  # few rows: the reduction's per-row cost does not matter
        return rows.max(axis=1, keepdims=True)
    return rows[np.arange(rows.shape[0]), rows.argmax(axis=1)][:, None]


class SoftmaxKernel(Kernel):
    """Sets dtype, work, rank and axis (`node_axis`); subclasses compute `rows` (along the
    last axis) and `general` (along another one)."""

    title = ""  # the operator's name in messages

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(1)
        self.dtype, self.work = computed_dtypes(node, FLOAT_DTYPES, "input")
        self.rank = len(node.inputs[0].shape)
        if self.rank == 0:
            raise invalid(node, f"{self.title} needs an input of rank >= 1")
        self.axis = self.node_axis(node)
        self.ones = None  # [L, 1] for row_sum, the declared last dimension L
        if self.axis == self.rank - 1:
            self.ones = row_ones(node.inputs[0].shape[-1], self.work)

    @abstractmethod
    def node_axis(self, node: NodeSpec) -> int:
        """The axis the node normalises along, in [0, rank)."""

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        return [tuple(input_shapes[0])]

    @abstractmethod
    def rows(self, x: np.ndarray, out: np.ndarray) -> None:
        """out [R, L] = the result along the rows of x [R, L] (work dtype, L >= 1, x
        read-only, errors ignored)."""

    @abstractmethod
    def general(self, x: np.ndarray, out: np.ndarray) -> None:
        """out = the result along self.axis of x (work dtype, non-empty, x read-only,
        errors ignored)."""

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0].astype(self.work, copy=False)
        if x.size == 0:
            return [np.empty(x.shape, dtype=self.dtype)]
        out = arena.output(self, 0, x.shape, self.work)  # x untouched
        with np.errstate(invalid="ignore", over="ignore", under="ignore", divide="ignore"):
            if self.axis == x.ndim - 1:
                length = x.shape[-1]
                self.rows(x.reshape(-1, length), out.reshape(-1, length))
            else:
                self.general(x, out)
        return [cast(out, self.dtype)]
