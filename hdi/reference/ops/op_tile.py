"""TileFusion: x repeated `multiples[i]` times along dimension i (ONNX Tile, numpy.tile).

`multiples` (input 1) is a 1-D INT32/INT64 tensor, normally constant; its entries must be
>= 0 (0 gives an empty dimension). The `dims` attribute follows MindSpore Lite's TileFusion
(the engine behind NNRt): when it is given, multiples[i] applies to dimension dims[i]
(negative counts from the end) and every other dimension is repeated once, so
len(multiples) must equal len(dims). Decisions where the spec is silent:

* `dims` empty: multiples[i] applies to dimension i. When multiples is longer than x's rank,
  x first gets leading dimensions of size 1 (hdi_ops.json; numpy.tile); shorter multiples
  leave the trailing dimensions unrepeated (MindSpore Lite; numpy.tile would pad them
  with leading 1s instead).
* `dims == [0]` with more than one multiple is the upstream client's default for an
  omitted OH_NN_TILE_DIMS (capi_ops.json), not a request: it is treated as empty. (With one
  multiple both readings coincide.)
* `dims` entries must be distinct and within x's rank.

A run-time multiples tensor gives DYNAMIC output dimensions where it applies. Data movement
only: any dtype, quantisation kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    bad_shape,
    check_declared_shapes,
    constant_index_input,
    index_values,
    moved_dtype,
    normalize_axis,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import DriverError
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape


def _check_multiples(values: Sequence[int], count: int,
                     error: Callable[[str], DriverError]) -> None:
    if len(values) != count:
        raise error(f"multiples {list(values)} has {len(values)} entries, expected {count}")
    if any(v < 0 for v in values):
        raise error(f"multiples {list(values)} holds a negative count")


@register(na.NODE_TYPE_TILE_FUSION)
class TileFusion(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(2)
        moved_dtype(node)
        self.in_rank = len(node.inputs[0].shape)
        declared = node.inputs[1].shape
        count = declared[0] if declared else 1
        multiples = constant_index_input(node, 1, "multiples")
        if multiples is not None:
            count = len(multiples)
        elif count == DYNAMIC:
            raise unsupported(node, "a run-time multiples tensor of unknown length")
        self.count = count
        dims = [int(d) for d in node.attrs.dims]
        if dims == [0] and count != 1:
            dims = []  # the upstream client's default, see the module docstring
        if dims:
            if len(dims) != count:
                raise invalid(node, f"dims {dims} and multiples ({count} entries) differ in "
                                    f"length")
            dims = [normalize_axis(node, d, self.in_rank, "dims entry") for d in dims]
            if len(set(dims)) != len(dims):
                raise invalid(node, f"dims {list(node.attrs.dims)} repeats a dimension")
            self.dims = tuple(dims)
            self.out_rank = self.in_rank
        else:
            # multiples[i] applies to dimension i of x, padded with leading 1s to the
            # length of multiples when that is longer
            self.out_rank = max(self.in_rank, count)
            self.dims = tuple(range(count))
        self.multiples = multiples
        if multiples is not None:
            _check_multiples(multiples, count, lambda why: invalid(node, why))
        check_declared_shapes(self)

    def reps(self, multiples: Sequence[int]) -> tuple[int, ...]:
        """numpy.tile's reps (one per output dimension) for these multiples."""
        reps = [1] * self.out_rank
        for d, m in zip(self.dims, multiples):
            reps[d] = m
        return tuple(reps)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if len(x) != self.in_rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.in_rank}")
        padded = (1,) * (self.out_rank - self.in_rank) + x
        if self.multiples is None:
            tiled = set(self.dims)
            return [tuple(DYNAMIC if i in tiled else d for i, d in enumerate(padded))]
        reps = self.reps(self.multiples)
        return [tuple(DYNAMIC if d == DYNAMIC else d * r for d, r in zip(padded, reps))]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        multiples = self.multiples
        if multiples is None:
            multiples = index_values(self.node, inputs[1], "multiples")
            _check_multiples(multiples, self.count, lambda why: bad_shape(self.node, why))
        return [np.tile(inputs[0], self.reps(multiples))]
