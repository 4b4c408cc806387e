"""Transpose with a constant perm, any dtype (moved as raw 1/2/4/8-byte elements), and the
helpers the other data-movement ops share (program `movement`, the strided copy).

Every move is described as a strided copy: output coordinates over `dims`, a source offset
and source strides (elements, may be negative), destination strides. Adjacent dimensions
that are contiguous on both sides are merged and size-1 dimensions dropped first, so a
Transpose reduces to its essential permutation. When what is left is a (batched) swap of
the last two axes, both at least MIN_TILED long, the tiled kernel moves 16x16 tiles through
local memory (coalesced reads and writes); otherwise the generic strided gather runs, one
work-item per output element.

Refused: a run-time perm (the output shape would depend on its values); element sizes
other than 1, 2, 4, 8 bytes; tensors of 2**31 elements or more (int32 index arithmetic).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyopencl as cl

from ..kernel import (
    WORK_GROUP,
    Builder,
    DeviceTensor,
    Epilogue,
    GpuOp,
    Launch,
    register,
)
from nnrt.hdi.reference.kernel import Kernel, unsupported
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec, Shape

ELEMENT_TYPES = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong"}
MAX_ELEMENTS = 2 ** 31 - 1
TILE = 16  # TILE in cl/movement.cl
MIN_TILED = 8  # both swapped axes at least this long for the tiled kernel


def require_movable(node: NodeSpec, positions: Sequence[int] = (0,)) -> None:
    """unsupported() unless the inputs at `positions` and every output have an element
    size the movement kernels move (1, 2, 4 or 8 bytes)."""
    for t in [node.inputs[p] for p in positions] + list(node.outputs):
        if t.dtype.itemsize not in ELEMENT_TYPES:
            raise unsupported(node, f"moving {t.dtype} elements ({t.name!r}) on the GPU")


def check_indexable(node: NodeSpec, *tensors: DeviceTensor) -> None:
    """unsupported() for tensors too large for the kernels' int32 indices."""
    for t in tensors:
        if t.size > MAX_ELEMENTS:
            raise unsupported(node, f"a tensor of {t.size} elements (int32 indexing)")


def movement(b: Builder, dtype: np.dtype) -> cl.Program:
    """Program `movement` for elements of `dtype`'s size."""
    return b.program("movement", [f"-DT={ELEMENT_TYPES[np.dtype(dtype).itemsize]}"])


def contiguous_strides(shape: Shape) -> list[int]:
    strides, step = [0] * len(shape), 1
    for axis in range(len(shape) - 1, -1, -1):
        strides[axis] = step
        step *= int(shape[axis])
    return strides


def merge_dims(dims: Sequence[int], src: Sequence[int], dst: Sequence[int]
               ) -> tuple[list[int], list[int], list[int]]:
    """The same copy with size-1 dimensions dropped and neighbours that are contiguous on
    both sides merged (at least one dimension is kept)."""
    out_d: list[int] = []
    out_s: list[int] = []
    out_t: list[int] = []
    for d, s, t in zip(dims, src, dst):
        if d == 1:
            continue
        if out_d and out_s[-1] == s * d and out_t[-1] == t * d:
            out_d[-1] *= d
            out_s[-1], out_t[-1] = s, t
        else:
            out_d.append(int(d))
            out_s.append(int(s))
            out_t.append(int(t))
    if not out_d:
        return [1], [0], [0]
    return out_d, out_s, out_t


def strided_copy(b: Builder, src: DeviceTensor, dst: DeviceTensor, dims: Sequence[int],
                 src_strides: Sequence[int], dst_strides: Sequence[int], src_off: int = 0,
                 dst_off: int = 0, label: str = "strided_copy") -> list[Launch]:
    """dst[dst_off + c . dst_strides] = src[src_off + c . src_strides] over every c < dims
    (no launch for an empty copy)."""
    n = int(np.prod(dims, dtype=np.int64))
    if n == 0:
        return []
    d, s, t = merge_dims(dims, src_strides, dst_strides)
    args = [src.buffer, dst.buffer, np.int32(n), np.int32(src_off), np.int32(dst_off),
            b.ints([len(d), *d, *s, *t])]
    return [b.launch(movement(b, src.dtype), "strided_copy", args, [n], [WORK_GROUP],
                     label=label)]


def constant_positions(node: NodeSpec, positions: Sequence[int]) -> frozenset[int]:
    """The positions among `positions` whose input is a constant (the op reads it from the
    reference at build time; the plan need not upload it)."""
    return frozenset(p for p in positions if p < len(node.inputs) and node.inputs[p].is_constant)


@register(na.NODE_TYPE_TRANSPOSE)
class Transpose(GpuOp):
    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_movable(node)
        if ref.perm is None:
            raise unsupported(node, "a run-time perm (the output shape depends on its values)")
        self.perm: tuple[int, ...] = tuple(ref.perm)
        self.own_constants = frozenset({1})

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, (out,) = inputs[0], outputs
        check_indexable(self.node, x)
        if out.size == 0:
            return []
        in_strides = contiguous_strides(x.shape)
        src = [in_strides[p] for p in self.perm]
        dims, s, t = merge_dims(out.shape, src, contiguous_strides(out.shape))
        tiled = self._tiled(dims, s)
        if tiled is not None:
            batch, rows, cols = tiled
            args = [x.buffer, out.buffer, np.int32(rows), np.int32(cols)]
            return [b.launch(movement(b, x.dtype), "transpose_tiled", args,
                             [cols, rows, batch], [TILE, TILE, 1])]
        return strided_copy(b, x, out, dims, s, t, label="transpose")

    @staticmethod
    def _tiled(dims: list[int], src: list[int]) -> tuple[int, int, int] | None:
        """(batch, rows, cols) when the merged copy is out[b, c, r] = in[b, r, c] with
        rows and cols both >= MIN_TILED; None otherwise."""
        if len(dims) == 2:
            dims, src = [1, *dims], [dims[0] * dims[1], *src]
        if len(dims) != 3:
            return None
        batch, cols, rows = dims  # out is [batch, cols, rows]
        if src != [rows * cols, 1, cols] or min(rows, cols) < MIN_TILED:
            return None
        return batch, rows, cols
