"""MaxPoolFusion and AvgPoolFusion: 2-D max / average pooling with fused activation.

* Layout (semantics.md): the input tensor's tag and the `format` attribute name the real
  layout, NHWC or NCHW; they must agree when the tensor is tagged (FORMAT_NONE defers to the
  attribute). The output has the input's layout.
* kernelSize [kH, kW] is required (unless global); strides default to [1, 1].
* Padding (hdi.md 6.15): PAD takes `pad` [top, bottom, left, right], each smaller than the
  window along its axis (a window made only of padding has no value); SAME gives
  out = ceil(in / stride), the odd padding cell at the bottom/right; VALID pads nothing.
* roundMode FLOOR / CEIL rounds (in + pads - k) / stride + 1 for PAD and VALID; in CEIL mode
  the windows running past the input are kept, except one that would start past the input
  and its leading padding (Caffe/PyTorch/ONNX), so every window holds a real cell.
* Max pooling pads with -inf (the dtype's minimum for integers): padding never wins.
  Average pooling divides each window's sum by the number of real (unpadded) cells, also
  for the CEIL windows running past the input.
* global: the whole H x W plane, kernel / strides / pads ignored; the output is [N, 1, 1, C]
  (or [N, C, 1, 1] for NCHW).
* Max pooling takes float and integer dtypes, average pooling float dtypes. float16
  (semantics.md "Float16 mode"): average pooling sums the window in float32 and divides
  in float32 (the activation too), each output value rounded to float16 once; max
  pooling is exact in any dtype.

Computation, in the input's own layout (no transposes), float16 widened to float32 first:

* A window covering the whole plane (global, or one output cell whose window holds every
  input cell: the usual "global" average pool written as a kernel of the input's size) is
  one reduction over the H*W cells: a matrix product with a ones vector for the average
  (then one division by H*W), a max-reduction otherwise.
* Other windows are separable: a pass along H then one along W, each a few vectorised
  steps over strided slices covering every output at once, one per kernel tap. The input
  is not padded: each tap is applied only to the outputs whose window reads it inside the
  input (padding is the reduction's identity, so leaving it out changes nothing). The
  widest tap and the widest one within its range are reduced straight into the pass's
  buffer in one step; the outputs the widest tap does not reach start from the identity
  (-inf / the integer minimum, or 0). The H pass goes into a scratch buffer of the run's
  arena, the W pass into the output's buffer. These steps run with a smaller ufunc buffer
  (_common.ufunc_buffer), which numpy handles strided slices markedly faster with.
* Average pooling then multiplies by reciprocal cell counts: one scalar for the windows
  lying wholly inside the input, small per-window factors for the border strips.
* The tap ranges, slices and reciprocal counts of the declared input shape are worked out
  at prepare time (at run time for another shape).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nnrt.hdi.reference import arena
from nnrt.hdi.reference.activations import apply_activation, fused_activation
from nnrt.hdi.reference.kernel import Kernel, invalid, register
from nnrt.hdi.reference.ops._common import (
    FLOAT_DTYPES,
    NUMERIC_DTYPES,
    Axis1D,
    bad_shape,
    cast,
    check_declared_shapes,
    computed_dtypes,
    explicit_pads,
    from_nhwc,
    pair_attr,
    spatial_layout,
    to_nhwc,
    ufunc_buffer,
    window_axis,
)
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape

# The steps of one separable pass (src -> dst along one axis), each
# (kind, dst index, src index, second src index):
_REDUCE2 = 0  # dst[d] = reduce(src[a], src[b])
_COPY = 1  # dst[d] = src[a]
_FILL = 2  # dst[d] = the reduction's identity
_REDUCE = 3  # dst[d] = reduce(dst[d], src[a])

Index = tuple[slice, ...]
Step = tuple[int, Index, Index | None, Index | None]


def _real_cells(axis: Axis1D, size: int, kernel: int, stride: int) -> np.ndarray:
    """Per output position along one axis: how many window cells lie inside the input."""
    start = np.arange(axis.out) * stride - axis.pad_before
    return np.minimum(start + kernel, size) - np.maximum(start, 0)


def _pass_steps(dim: int, size: int, ax: Axis1D, kernel: int, stride: int) -> list[Step] | None:
    """The steps of the pass along array dimension `dim` (None: the pass is the identity).

    Tap j of output o reads input o*stride + j - pad_before; it is applied to the outputs
    [lo, hi) for which that cell lies inside the input."""
    if kernel == 1 and stride == 1 and ax.pad_before == 0 and ax.out == size:
        return None
    lead = (slice(None),) * dim
    taps = []  # (lo, hi, first input cell)
    for j in range(kernel):
        off = j - ax.pad_before
        lo = max(0, -(off // stride))  # ceil(-off / stride)
        hi = min(ax.out, (size - 1 - off) // stride + 1)
        if hi > lo:
            taps.append((lo, hi, lo * stride + off))

    def dst(lo: int, hi: int) -> Index:
        return lead + (slice(lo, hi),)

    def src(tap: tuple[int, int, int], lo: int, hi: int) -> Index:
        """Tap's input cells for the outputs [lo, hi) (within the tap's range)."""
        first = tap[2] + (lo - tap[0]) * stride
        return lead + (slice(first, first + (hi - lo - 1) * stride + 1, stride),)

    base = max(taps, key=lambda t: t[1] - t[0])  # the widest tap starts the result
    others = [t for t in taps if t is not base]
    inside = [t for t in others if base[0] <= t[0] and t[1] <= base[1]]
    steps: list[Step] = []
    lo_b, hi_b = base[0], base[1]
    if inside:  # base and the widest tap within its range, reduced in one step
        second = max(inside, key=lambda t: t[1] - t[0])
        others.remove(second)
        lo_s, hi_s = second[0], second[1]
        steps.append((_REDUCE2, dst(lo_s, hi_s), src(base, lo_s, hi_s), src(second, lo_s, hi_s)))
        for lo, hi in ((lo_b, lo_s), (hi_s, hi_b)):
            if hi > lo:
                steps.append((_COPY, dst(lo, hi), src(base, lo, hi), None))
    else:
        steps.append((_COPY, dst(lo_b, hi_b), src(base, lo_b, hi_b), None))
    for lo, hi in ((0, lo_b), (hi_b, ax.out)):  # outputs the base tap does not reach
        if hi > lo:
            steps.append((_FILL, dst(lo, hi), None, None))
    steps.extend((_REDUCE, dst(t[0], t[1]), src(t, t[0], t[1]), None) for t in others)
    return steps


def _run_pass(reduce: np.ufunc, identity: float | int, steps: list[Step], src: np.ndarray,
              dst: np.ndarray) -> None:
    for kind, d, a, b in steps:
        view = dst[d]
        if kind == _REDUCE2:
            reduce(src[a], src[b], out=view)
        elif kind == _COPY:
            np.copyto(view, src[a])
        elif kind == _FILL:
            view.fill(identity)
        else:
            reduce(view, src[a], out=view)


@dataclass(frozen=True)
class _Plan:
    """How one input shape is pooled."""

    out_shape: tuple[int, ...]  # in the input's layout
    whole: bool  # one window covering the whole plane
    rows_shape: tuple[int, ...]  # the H pass's result
    h_steps: list[Step] | None
    w_steps: list[Step] | None
    scale: list[tuple[Index, np.ndarray | np.generic]]  # average: out[index] *= factor
    ones: np.ndarray | None = None  # a whole-plane average's ones vector


class _Pool(Kernel):
    reduce: np.ufunc  # np.maximum or np.add
    dtypes: frozenset[np.dtype]

    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(1)
        self.dtype, self.work = computed_dtypes(node, self.dtypes, "input")
        self.activation = fused_activation(node, self.dtype)
        attrs = node.attrs
        if len(node.inputs[0].shape) != 4:
            raise invalid(node, f"input must be 4-D, has shape {list(node.inputs[0].shape)}")
        self.nchw = spatial_layout(node, int(attrs.format))
        self.global_ = bool(getattr(attrs, "global"))
        self.ceil = int(attrs.roundMode) == ht.ROUND_MODE_CEIL
        if int(attrs.roundMode) not in (ht.ROUND_MODE_FLOOR, ht.ROUND_MODE_CEIL):
            raise invalid(node, f"roundMode {attrs.roundMode} is not FLOOR (0) or CEIL (1)")
        self.pad_mode = int(attrs.padMode)
        if self.global_:  # kernelSize, strides and pad are ignored; padMode is still an enum
            explicit_pads(node, (), self.pad_mode, "pad")
        else:
            pads = explicit_pads(node, attrs.pad, self.pad_mode, "pad")
            self.kernel = pair_attr(node, attrs.kernelSize, "kernelSize", None)
            self.strides = pair_attr(node, attrs.strides, "strides", (1, 1))
            self.pads = (pads[:2], pads[2:])  # (top, bottom), (left, right)
            if max(pads[:2]) >= self.kernel[0] or max(pads[2:]) >= self.kernel[1]:
                raise invalid(node, f"pad {list(pads)} must be smaller than kernelSize "
                                    f"{list(self.kernel)}: a window would hold only padding")
        check_declared_shapes(self)
        shape = tuple(node.inputs[0].shape)
        self.static = None  # (input shape, its _Plan) of the declared shape
        if DYNAMIC not in shape:
            self.static = (shape, self._plan(shape))

    def _axis(self, dim: int, size: int) -> Axis1D:
        """Window geometry along H (dim 0) or W (dim 1) for an input of that size."""
        return window_axis(self.node, size, self.kernel[dim], self.strides[dim], 1,
                           self.pad_mode, self.pads[dim], self.ceil)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        x = tuple(input_shapes[0])
        if len(x) != 4:
            raise bad_shape(self.node, f"input must be 4-D, has shape {list(x)}")
        n, h, w, c = to_nhwc(x, self.nchw)
        if self.global_:
            return [from_nhwc((n, 1, 1, c), self.nchw)]
        oh, ow = (DYNAMIC if size == DYNAMIC else self._axis(dim, size).out
                  for dim, size in ((0, h), (1, w)))
        return [from_nhwc((n, oh, ow, c), self.nchw)]

    def _plan(self, shape: tuple[int, ...]) -> _Plan:
        """The plan of an input of that (known, valid) shape, in the input's layout."""
        n, h, w, c = to_nhwc(shape, self.nchw)
        if self.global_:
            return _Plan(from_nhwc((n, 1, 1, c), self.nchw), True, (), None, None, [],
                         self._ones(h * w))
        ax_h, ax_w = self._axis(0, h), self._axis(1, w)
        out_shape = from_nhwc((n, ax_h.out, ax_w.out, c), self.nchw)
        if all(ax.out == 1 and k - ax.pad_before >= size
               for ax, k, size in ((ax_h, self.kernel[0], h), (ax_w, self.kernel[1], w))):
            # One window holding every input cell.
            return _Plan(out_shape, True, (), None, None, [], self._ones(h * w))
        dim_h, dim_w = (2, 3) if self.nchw else (1, 2)
        rows_shape = from_nhwc((n, ax_h.out, w, c), self.nchw)
        h_steps = _pass_steps(dim_h, h, ax_h, self.kernel[0], self.strides[0])
        w_steps = _pass_steps(dim_w, w, ax_w, self.kernel[1], self.strides[1])
        return _Plan(out_shape, False, rows_shape, h_steps, w_steps,
                     self._scale(ax_h, ax_w, h, w, dim_h))

    def _scale(self, ax_h: Axis1D, ax_w: Axis1D, h: int, w: int,
               dim_h: int) -> list[tuple[Index, np.ndarray | np.generic]]:
        return []

    def _ones(self, cells: int) -> np.ndarray | None:
        return None

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        x = inputs[0]
        static = self.static
        if static is not None and x.shape == static[0]:
            plan = static[1]
        else:
            self.infer_shapes([x.shape])
            plan = self._plan(x.shape)
        if x.dtype != self.work:  # float16: computed in float32
            wide, _ = arena.scratch(self, "wide", x.shape, self.work)
            np.copyto(wide, x, casting="same_kind")
            x = wide
        if self.dtype == self.work:
            out = arena.output(self, 0, plan.out_shape, self.work)
        else:
            out, _ = arena.scratch(self, "out", plan.out_shape, self.work)
        if plan.whole:
            self._whole(x, out, plan)
        else:
            self._windows(x, out, plan)
        out = apply_activation(out, self.activation, inplace=True)
        return [cast(out, self.dtype)]

    def _windows(self, x: np.ndarray, out: np.ndarray, plan: _Plan) -> None:
        identity = self.identity()
        if plan.h_steps is None:
            rows = x
        elif plan.w_steps is None:
            rows = out
        else:
            rows, _ = arena.scratch(self, "rows", plan.rows_shape, self.work)
        with ufunc_buffer():  # the steps' operands are strided slices: many short rows
            if plan.h_steps is not None:
                _run_pass(self.reduce, identity, plan.h_steps, x, rows)
            if plan.w_steps is not None:
                _run_pass(self.reduce, identity, plan.w_steps, rows, out)
            elif plan.h_steps is None:
                np.copyto(out, x)
            for index, factor in plan.scale:
                view = out[index]
                np.multiply(view, factor, out=view)

    def _cells(self, x: np.ndarray) -> tuple[np.ndarray, int]:
        """x as [N, H*W, C] (NHWC) or [N, C, H*W] (NCHW), and the axis of the H*W cells."""
        n = x.shape[0]
        if self.nchw:
            return x.reshape(n, x.shape[1], -1), 2
        return x.reshape(n, -1, x.shape[3]), 1

    def identity(self) -> float | int:
        raise NotImplementedError

    def _whole(self, x: np.ndarray, out: np.ndarray, plan: _Plan) -> None:
        raise NotImplementedError


@register(na.NODE_TYPE_MAX_POOL_FUSION)
class MaxPoolFusion(_Pool):
    reduce = np.maximum
    dtypes = NUMERIC_DTYPES

    def identity(self) -> float | int:
        if np.issubdtype(self.work, np.integer):
            return np.iinfo(self.work).min
        return -np.inf

    def _whole(self, x: np.ndarray, out: np.ndarray, plan: _Plan) -> None:
        cells, axis = self._cells(x)
        np.maximum.reduce(cells, axis=axis, out=out.reshape(out.shape[0], -1))


@register(na.NODE_TYPE_AVGPOOL_FUSION)
class AvgPoolFusion(_Pool):
    reduce = np.add
    dtypes = FLOAT_DTYPES

    def identity(self) -> float | int:
        return 0

    def _scale(self, ax_h: Axis1D, ax_w: Axis1D, h: int, w: int,
               dim_h: int) -> list[tuple[Index, np.ndarray | np.generic]]:
        """out[index] *= factor steps dividing each window by its count of real cells: one
        scalar over the windows lying wholly inside the input, arrays over the strips of
        border windows around them (above, below, left, right)."""
        (kh, kw), (sh, sw) = self.kernel, self.strides
        rows = _real_cells(ax_h, h, kh, sh)
        cols = _real_cells(ax_w, w, kw, sw)
        recip = (1.0 / np.outer(rows, cols)).astype(self.work)
        if not self.nchw:
            recip = recip[:, :, None]  # broadcast over C
        lead = (slice(None),) * dim_h

        def full(counts: np.ndarray, k: int) -> tuple[int, int]:
            """The range of windows with all k cells real (contiguous; (0, 0) if none)."""
            where = np.flatnonzero(counts == k)
            return (int(where[0]), int(where[-1]) + 1) if where.size else (0, 0)

        (top, bottom), (left, right) = full(rows, kh), full(cols, kw)
        steps: list[tuple[Index, np.ndarray | np.generic]] = []
        if bottom > top and right > left:
            steps.append((lead + (slice(top, bottom), slice(left, right)),
                          self.work.type(recip[top, left].item())))
        for r0, r1, c0, c1 in ((0, top, 0, ax_w.out), (bottom, ax_h.out, 0, ax_w.out),
                               (top, bottom, 0, left), (top, bottom, right, ax_w.out)):
            if r1 > r0 and c1 > c0:
                steps.append((lead + (slice(r0, r1), slice(c0, c1)),
                              np.ascontiguousarray(recip[r0:r1, c0:c1])))
        return steps

    def _ones(self, cells: int) -> np.ndarray | None:
        return np.ones((cells, 1) if self.nchw else (1, cells), self.work)

    def _whole(self, x: np.ndarray, out: np.ndarray, plan: _Plan) -> None:
        cells, axis = self._cells(x)
        count = cells.shape[axis]
        if count == 0 or x.size == 0:
            with np.errstate(invalid="ignore", divide="ignore"):
                np.copyto(out, x.mean(axis=(2, 3) if self.nchw else (1, 2), keepdims=True))
            return
        ones = plan.ones
        if self.nchw:  # [N, C, HW] @ [HW, 1]
            np.matmul(cells, ones, out=out.reshape(out.shape[0], out.shape[1], 1))
        else:  # [1, HW] @ [N, HW, C]
            np.matmul(ones, cells, out=out.reshape(out.shape[0], 1, out.shape[3]))
        out /= self.work.type(count)
