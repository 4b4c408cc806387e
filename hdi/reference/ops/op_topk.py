"""TopKFusion: the k largest entries of x along `axis` (values, output 0) and their positions
(indices, output 1); k is input 1.

Decisions:

* k is a 1-D (or scalar) INT32/INT64 tensor of one entry, normally constant; 0 <= k <= the
  size of the axis. A run-time k makes the axis' output dimension DYNAMIC; a run-time k out
  of range fails that run (NNRT_FAILED).
* axis counts from the end when negative. The attribute's own default (proto3 0) is used as
  sent: the client sends -1 when the application sets nothing (capi_ops.json).
* Order: `sorted` true gives the k largest in descending order; ties keep the lower index
  first (stable); NaN counts as larger than every number (numpy's argmax convention).
  `sorted` false gives the same k entries in increasing index order (MindSpore Lite's TopK,
  the engine behind NNRt, re-sorts the selected entries by index; the C API header's
  "ascending" is read as ascending positions).
* dtypes: every integer and float type (values keep it); indices are INT32 or INT64 as the
  second output is declared. Exactly 2 outputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    INDEX_DTYPES,
    NUMERIC_DTYPES,
    bad_shape,
    check_declared_shapes,
    constant_index_input,
    index_values,
    normalize_axis,
    require_unquantised,
    run_failure,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape


def descending_order(x: np.ndarray, axis: int) -> np.ndarray:
    """Indices that sort x along `axis` from largest to smallest; ties keep the lower index
    first and NaN counts as the largest value."""
    if x.dtype.kind == "f":
        if np.isnan(x).any():
            # lexsort's last key is the primary one: NaNs (False) first, then by -x; stable.
            return np.lexsort((np.negative(x), ~np.isnan(x)), axis=axis)
        key = np.negative(x)
    else:
        key = np.invert(x)  # ~v = -v - 1: strictly decreasing, no overflow, unsigned too
    return np.argsort(key, axis=axis, kind="stable")


def top_k_indices(x: np.ndarray, k: int, axis: int, by_index: bool = False) -> np.ndarray:
    """Positions of the k largest entries along `axis` (largest first, or in increasing
    position order when `by_index`)."""
    if k == 1 and x.shape[axis] > 0:
        return np.argmax(x, axis=axis, keepdims=True)  # the first maximum; NaN wins
    order = descending_order(x, axis)
    top = np.take(order, np.arange(k), axis=axis)
    return np.sort(top, axis=axis) if by_index else top


@register(na.NODE_TYPE_TOPK_FUSION)
class TopKFusion(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(2, 2)
        require_unquantised(node)
        x, values, indices = node.inputs[0], node.outputs[0], node.outputs[1]
        if x.dtype not in NUMERIC_DTYPES:
            raise unsupported(node, f"dtype {x.dtype} is not supported")
        if values.dtype != x.dtype:
            raise invalid(node, f"values output dtype {values.dtype} differs from the "
                                f"input's {x.dtype}")
        if indices.dtype not in INDEX_DTYPES:
            raise invalid(node, f"indices output must be INT32 or INT64, is {indices.dtype}")
        self.rank = len(x.shape)
        if self.rank == 0:
            raise invalid(node, "TopK needs an input of rank >= 1")
        self.axis = normalize_axis(node, int(node.attrs.axis), self.rank)
        self.sorted = bool(node.attrs.sorted)
        k = constant_index_input(node, 1, "k")
        self.k = None if k is None else self._check_k(k, lambda why: invalid(node, why))
        check_declared_shapes(self)

    def _check_k(self, values: Sequence[int], error) -> int:
        if len(values) != 1:
            raise error(f"k must hold one value, has {list(values)}")
        if values[0] < 0:
            raise error(f"k {values[0]} is negative")
        return values[0]

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if len(x) != self.rank:
            raise bad_shape(self.node, f"input rank {len(x)}, the model has {self.rank}")
        size = x[self.axis]
        if self.k is not None and size != DYNAMIC and self.k > size:
            raise bad_shape(self.node, f"k {self.k} exceeds the axis' size {size}")
        out = list(x)
        out[self.axis] = DYNAMIC if self.k is None else self.k
        return [tuple(out), tuple(out)]

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        self.infer_shapes([x.shape])
        k = self.k
        if k is None:
            k = self._check_k(index_values(self.node, inputs[1], "k"),
                              lambda why: run_failure(self.node, why))
            if k > x.shape[self.axis]:
                raise run_failure(self.node, f"k {k} exceeds the axis' size "
                                             f"{x.shape[self.axis]}")
        idx = top_k_indices(x, k, self.axis, by_index=not self.sorted)
        values = np.take_along_axis(x, idx, axis=self.axis)
        return [values, idx.astype(self.node.outputs[1].dtype, copy=False)]
