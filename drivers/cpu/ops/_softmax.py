"""What Softmax and LogSoftmax share: one float input of rank >= 1 (float16 computed in
float32 and rounded once), normalised along one axis into an output of its shape and
dtype; an empty input gives an empty output.

The leading underscore keeps this module out of the `op_*` auto-import.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence

import numpy as np

from nnrt.drivers.cpu.kernel import Kernel, invalid
from nnrt.drivers.cpu.ops._common import FLOAT_DTYPES, cast, computed_dtypes
from nnrt.server.graph import NodeSpec, Shape


class SoftmaxKernel(Kernel):
    """Sets dtype, work and rank; subclasses choose `axis` and compute `normalise`."""

    title = ""  # the operator's name in messages

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(1)
        self.dtype, self.work = computed_dtypes(node, FLOAT_DTYPES, "input")
        self.rank = len(node.inputs[0].shape)
        if self.rank == 0:
            raise invalid(node, f"{self.title} needs an input of rank >= 1")

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        return [tuple(input_shapes[0])]

    @abstractmethod
    def normalise(self, x: np.ndarray) -> np.ndarray:
        """The result in the work dtype for a non-empty x (in the work dtype, read-only)."""

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0].astype(self.work, copy=False)
        if x.size == 0:
            return [np.empty(x.shape, dtype=self.dtype)]
        return [cast(self.normalise(x), self.dtype)]
