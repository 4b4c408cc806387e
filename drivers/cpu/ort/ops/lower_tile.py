"""TileFusion and BroadcastTo.

TileFusion with constant multiples is ONNX Tile with the kernel's per-dimension repeats,
after leading size-1 dimensions are inserted where the multiples outnumber x's dimensions
(numpy.tile); run-time multiples stay on numpy.

BroadcastTo with a constant target is ONNX Expand — the same bidirectional broadcast —
with each -1 (keep the input's dimension) written as 1, which broadcast keeps the input's
dimension for just the same (the kernel refused a -1 beyond the input's rank at prepare).
A run-time target stays on numpy.
"""

from __future__ import annotations

from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.reference.kernel import Kernel
from ..lowering import NodeEmitter, NotLowerable, lowers
from .lower_reshape import require_moved


@lowers(na.NODE_TYPE_TILE_FUSION)
def tile(k: Kernel, e: NodeEmitter) -> None:
    require_moved(e)
    if k.multiples is None:
        raise NotLowerable("run-time multiples")
    x = e.input(0)
    extra = k.out_rank - k.in_rank
    if extra:
        x = e.op("Unsqueeze", [x, e.int64s(range(extra), "axes")])
    reps = k.reps(k.multiples)
    if k.out_rank == 0:
        e.op("Identity", [x], out=e.output())
        return
    e.op("Tile", [x, e.int64s(reps, "repeats")], out=e.output())


@lowers(na.NODE_TYPE_BROADCAST_TO)
def broadcast_to(k: Kernel, e: NodeEmitter) -> None:
    require_moved(e)
    if k.target is None:
        raise NotLowerable("a run-time target shape")
    target = [1 if d == -1 else d for d in k.target]
    e.op("Expand", [e.input(0), e.int64s(target, "shape")], out=e.output())
