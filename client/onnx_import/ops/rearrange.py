"""Rearrangements of channels and space, composed as ONNX defines them (Reshape, Transpose,
Reshape; data movement only, exact for every type): DepthToSpace (DCR and CRD) and
SpaceToDepth (DCR and CRD)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..importer import _handles, _Importer
from ..loading import OnnxImportError
from ..values import _Attrs


def _rearranged(im: _Importer, node: Any, split: tuple[int, ...], perm: tuple[int, ...],
                out: tuple[int, ...]) -> None:
    x = im.need(node, 0)
    moved = tuple(split[p] for p in perm)
    source = im.m.op("RESHAPE", im.view(x), np.asarray(split, np.int64), shape=split,
                     dtype=x.dtype)
    source = im.m.op("TRANSPOSE", source, np.asarray(perm, np.int64), shape=moved,
                     dtype=x.dtype)
    im.op(node, "RESHAPE", [source, np.asarray(out, np.int64)], node.output[0], None)


def _block(im: _Importer, node: Any, a: _Attrs) -> tuple[int, int, int, int, int, str]:
    x = im.need(node, 0)
    if len(x.shape) != 4 or any(d < 0 for d in x.shape):
        raise OnnxImportError(f"a 4-D input of static shape, not {list(x.shape)}", node)
    b = int(a.get("blocksize"))
    mode = a.get("mode", "DCR")
    if b < 1 or mode not in ("DCR", "CRD"):
        raise OnnxImportError(f"blocksize {b}, mode {mode!r}", node)
    return (*x.shape, b, mode)


@_handles("DepthToSpace")
def _depth_to_space(im: _Importer, node: Any, a: _Attrs) -> None:
    n, c, h, w, b, mode = _block(im, node, a)
    if c % (b * b):
        raise OnnxImportError(f"{c} channels are not a multiple of blocksize² {b * b}", node)
    depth = c // (b * b)
    if mode == "DCR":
        split, perm = (n, b, b, depth, h, w), (0, 3, 4, 1, 5, 2)
    else:
        split, perm = (n, depth, b, b, h, w), (0, 1, 4, 2, 5, 3)
    _rearranged(im, node, split, perm, (n, depth, h * b, w * b))


@_handles("SpaceToDepth")
def _space_to_depth(im: _Importer, node: Any, a: _Attrs) -> None:
    n, c, h, w, b, mode = _block(im, node, a)
    if h % b or w % b:
        raise OnnxImportError(f"spatial size {[h, w]} is not a multiple of blocksize {b}",
                              node)
    split = (n, c, h // b, b, w // b, b)
    perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    _rearranged(im, node, split, perm, (n, c * b * b, h // b, w // b))
