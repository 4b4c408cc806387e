"""Helpers shared by the CPU operator modules: dtype checks, axes, index-like constant
inputs, DYNAMIC-aware shape arithmetic and the 2-D window geometry of convolution and
pooling (padding modes, output sizes, strided window views).

The leading underscore keeps this module out of the `op_*` auto-import.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from nnrt.hdi.reference.arena import scratch
from nnrt.hdi.reference.kernel import Kernel, invalid, unsupported
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common.errors import (
    NNRT_INVALID_FORMAT,
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    DriverError,
)
from nnrt.hdi.graph import DYNAMIC, NodeSpec, Shape, TensorSpec

FLOAT_DTYPES = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64))
INT_DTYPES = frozenset(
    np.dtype(t)
    for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)
)
NUMERIC_DTYPES = FLOAT_DTYPES | INT_DTYPES
INDEX_DTYPES = frozenset((np.dtype(np.int32), np.dtype(np.int64)))


# ----------------------------------------------------------------------------- errors


def bad_shape(node: NodeSpec, why: str) -> DriverError:
    """Shapes that cannot go together (at prepare time or with a run's real shapes)."""
    return DriverError(NNRT_INVALID_SHAPE, f"node {node.index} ({node.name}): {why}")


def bad_format(node: NodeSpec, why: str) -> DriverError:
    return DriverError(NNRT_INVALID_FORMAT, f"node {node.index} ({node.name}): {why}")


# ----------------------------------------------------------------------------- dtypes


def require_unquantised(node: NodeSpec) -> None:
    """Computing kernels here are float/integer arithmetic; QUANT_TYPE_ALL is not computed."""
    if node.quant_type != ht.QUANT_TYPE_NONE:
        raise unsupported(node, "quantised (QUANT_TYPE_ALL) computation is not implemented")


def computed_dtypes(node: NodeSpec, allowed: frozenset[np.dtype],
                    what: str = "inputs") -> tuple[np.dtype, np.dtype]:
    """(dtype, work dtype) of a kernel that computes on all its inputs: unquantised, one
    dtype among `allowed` shared by every input and the output (common_dtype), computed in
    compute_dtype of it."""
    require_unquantised(node)
    dtype = common_dtype(node, node.inputs, allowed, what)
    return dtype, compute_dtype(dtype)


def common_dtype(node: NodeSpec, tensors: Iterable[TensorSpec], allowed: frozenset[np.dtype],
                 what: str = "operands") -> np.dtype:
    """The one dtype shared by `tensors` and the node's first output.

    Mixed input dtypes are unsupported (the "more precise type" promotion of hdi_ops.json is
    not implemented); an output declared with another dtype than the inputs is invalid.
    """
    tensors = list(tensors)
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) != 1:
        raise unsupported(node, f"{what} of mixed dtypes {sorted(str(d) for d in dtypes)}")
    (dtype,) = dtypes
    if dtype not in allowed:
        raise unsupported(node, f"dtype {dtype} is not supported for {what}")
    require_output_dtype(node, dtype)
    return dtype


def require_output_dtype(node: NodeSpec, dtype: np.dtype) -> None:
    """The node's (first) output must have `dtype`, the dtype it computes in."""
    out = node.outputs[0].dtype
    if out != dtype:
        raise invalid(node, f"output dtype {out} differs from the computed dtype {dtype}")


def epsilon_attr(node: NodeSpec) -> float:
    """The node's `epsilon` attribute (normalisations), used as sent: the client fills in
    the C API's default; a negative or non-finite epsilon is invalid."""
    epsilon = float(node.attrs.epsilon)
    if not math.isfinite(epsilon) or epsilon < 0:
        raise invalid(node, f"epsilon {epsilon} must be finite and >= 0")
    return epsilon


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """float16 is computed in float32 (numpy's float16 linear algebra is slow and
    accumulates badly); every other dtype is computed as itself."""
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def cast(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """array as dtype (no copy when it already is); values beyond a narrower float type
    become ±inf, as IEEE rounding says, without numpy's overflow warning."""
    with np.errstate(over="ignore"):
        return array.astype(dtype, copy=False)


# ----------------------------------------------------------------------------- axes, index inputs


def normalize_axis(node: NodeSpec, axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise invalid(node, f"{what} {axis} is outside [{-rank}, {rank}) for rank {rank}")
    return axis + rank if axis < 0 else axis


def require_index_dtype(node: NodeSpec, position: int) -> None:
    """Input `position` holds indices (Gather, GatherNd, ScatterNd, SparseToDense): INT32 or
    INT64; another dtype is unsupported."""
    dtype = node.inputs[position].dtype
    if dtype not in INDEX_DTYPES:
        raise unsupported(node, f"indices of dtype {dtype} (INT32 or INT64 are supported)")


def written_values(node: NodeSpec, position: int, what: str, quantised: str) -> None:
    """Input `position` holds the values written into an otherwise filled output (ScatterNd's
    updates, SparseToDense's values): the output has their dtype (invalid otherwise);
    neither may be quantised (unsupported, `quantised` says why)."""
    values, out = node.inputs[position], node.outputs[0]
    if out.dtype != values.dtype:
        raise invalid(node, f"output dtype {out.dtype} differs from the {what}' {values.dtype}")
    if values.quant_params or out.quant_params:
        raise unsupported(node, quantised)


def index_values(node: NodeSpec, values: np.ndarray, what: str) -> tuple[int, ...]:
    """The entries of a 1-D INT32/INT64 index-like tensor (a scalar counts as one entry)."""
    if values.dtype not in INDEX_DTYPES:
        raise invalid(node, f"{what} must be INT32 or INT64, is {values.dtype}")
    if values.ndim > 1:
        raise invalid(node, f"{what} must be 1-D, has shape {list(values.shape)}")
    return tuple(int(v) for v in values.reshape(-1))


def constant_index_input(node: NodeSpec, position: int, what: str) -> tuple[int, ...] | None:
    """Values of index-like input `position` when it is constant, None when it is a run-time
    tensor (whose dtype and rank are checked here all the same)."""
    spec = node.inputs[position]
    if spec.dtype not in INDEX_DTYPES:
        raise invalid(node, f"{what} must be INT32 or INT64, is {spec.dtype}")
    if len(spec.shape) > 1:
        raise invalid(node, f"{what} must be 1-D, has shape {list(spec.shape)}")
    return index_values(node, spec.constant, what) if spec.is_constant else None


def nd_index_columns(node: NodeSpec, indices: np.ndarray, shape: Sequence[int],
                     prepare: bool) -> tuple[np.ndarray, ...]:
    """The rows of `indices` [..., k] (GatherNd, ScatterNd) as one normalised index array
    per addressed dimension d < k: an entry may be negative, counting from the end of
    dimension d; one outside [-size, size) makes the node invalid when `prepare` (constant
    indices) and fails the run (run_failure) otherwise."""
    out = []
    for d in range(indices.shape[-1]):
        column, size = indices[..., d], shape[d]
        if column.size and (column.min() < -size or column.max() >= size):
            why = (f"indices [{column.min()}, {column.max()}] for dimension {d} fall outside "
                   f"[{-size}, {size})")
            raise invalid(node, why) if prepare else run_failure(node, why)
        out.append(np.where(column < 0, column + size, column))
    return tuple(out)


def _check_sizes(shape: Sequence[int], what: str, nonempty: bool,
                 error: Callable[[str], DriverError]) -> None:
    if nonempty and not shape:
        raise error(f"{what} is empty")
    if any(d < 0 for d in shape):
        raise error(f"{what} {list(shape)} holds a negative size")


def shape_input(node: NodeSpec, position: int, what: str = "shape",
                nonempty: bool = False) -> tuple[tuple[int, ...] | None, int]:
    """An output shape given by the values of 1-D INT32/INT64 input `position` (Fill,
    ConstantOfShape, ScatterNd, SparseToDense): (its sizes, its length) when it is constant,
    (None, its declared length) when it is a run-time tensor, whose output dimensions are
    then DYNAMIC until the run (`run_shape_input`). Negative sizes, or none at all when
    `nonempty`, make the node invalid; a run-time one of unknown length is unsupported."""
    shape = constant_index_input(node, position, what)
    if shape is None:
        declared = node.inputs[position].shape
        rank = declared[0] if declared else 1
        if rank == DYNAMIC:
            raise unsupported(node, f"a run-time {what} of unknown length")
        return None, rank
    _check_sizes(shape, what, nonempty, lambda why: invalid(node, why))
    return shape, len(shape)


def run_shape_input(node: NodeSpec, values: np.ndarray, rank: int, what: str = "shape",
                    nonempty: bool = False) -> tuple[int, ...]:
    """The sizes a run gives a run-time `shape_input`: its bad values fail that run with
    NNRT_INVALID_SHAPE."""
    shape = index_values(node, values, what)
    if len(shape) != rank:
        raise bad_shape(node, f"{what} has {len(shape)} entries, expected {rank}")
    _check_sizes(shape, what, nonempty, lambda why: bad_shape(node, why))
    return shape


# ----------------------------------------------------------------------------- shapes


def broadcast_shapes(node: NodeSpec, *shapes: Shape) -> Shape:
    """numpy broadcasting of shapes that may hold DYNAMIC dimensions."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        known = {d for d in dims if d != DYNAMIC and d != 1}
        if len(known) > 1:
            raise bad_shape(node, f"shapes {[list(s) for s in shapes]} do not broadcast")
        if known:
            out.append(known.pop())  # a DYNAMIC partner must then be 1 or this size
        elif DYNAMIC in dims:
            out.append(DYNAMIC)
        else:
            out.append(1)
    return tuple(out)


def check_declared_shapes(kernel: Kernel) -> list[Shape]:
    """infer_shapes on the node's declared input shapes, at prepare time: shapes that cannot
    go together make the node invalid (at run time the same check is NNRT_INVALID_SHAPE)."""
    try:
        return kernel.infer_shapes([t.shape for t in kernel.node.inputs])
    except DriverError as e:
        if e.code == NNRT_INVALID_SHAPE:
            raise DriverError(NNRT_INVALID_NODE, e.message) from e
        raise


def product(dims: Iterable[int]) -> int:
    """Product of dimensions; DYNAMIC when any of them is DYNAMIC."""
    dims = list(dims)
    return DYNAMIC if DYNAMIC in dims else math.prod(dims)


def same_dim(node: NodeSpec, a: int, b: int, what: str) -> int:
    """Two dimensions that must agree; the known one when one of them is DYNAMIC."""
    if a != DYNAMIC and b != DYNAMIC and a != b:
        raise bad_shape(node, f"{what}: {a} != {b}")
    return b if a == DYNAMIC else a


# ----------------------------------------------------------------------------- 2-D windows


def pair_attr(node: NodeSpec, values: Sequence[int], name: str,
              default: tuple[int, int] | None) -> tuple[int, int]:
    """A [height, width] attribute (kernelSize, stride(s), dilation), each >= 1; an empty
    list takes `default` (invalid when there is none)."""
    values = list(values)
    if not values and default is not None:
        return default
    if len(values) != 2:
        raise invalid(node, f"{name} must have 2 values [h, w], has {values}")
    if min(values) < 1:
        raise invalid(node, f"{name} values must be >= 1, are {values}")
    return int(values[0]), int(values[1])


def explicit_pads(node: NodeSpec, values: Sequence[int], pad_mode: int,
                  name: str) -> tuple[int, int, int, int]:
    """[top, bottom, left, right], validated against the pad mode (hdi.md 6.15)."""
    if pad_mode not in (ht.PAD_MODE_PAD, ht.PAD_MODE_SAME, ht.PAD_MODE_VALID):
        raise invalid(node, f"padMode {pad_mode} is not PAD (0), SAME (1) or VALID (2)")
    values = [int(v) for v in values]
    if not values:
        return 0, 0, 0, 0
    if len(values) != 4:
        raise invalid(node, f"{name} must have 4 values [top, bottom, left, right], has {values}")
    if min(values) < 0:
        raise invalid(node, f"{name} values must be >= 0, are {values}")
    if pad_mode != ht.PAD_MODE_PAD and any(values):
        raise invalid(node, f"{name} {values} must be 0 with padMode {pad_mode} (SAME/VALID)")
    return values[0], values[1], values[2], values[3]


@dataclass(frozen=True)
class Axis1D:
    """Window geometry along one spatial axis once its input size is known."""

    out: int
    pad_before: int
    pad_after: int  # padding the windows really read after the input: less than the explicit
    #                 pad when the last windows stop short of it, more in CEIL mode


def window_axis(node: NodeSpec, size: int, kernel: int, stride: int, dilation: int,
                pad_mode: int, pads: tuple[int, int], ceil: bool = False) -> Axis1D:
    """Output size and padding of one axis.

    SAME: out = ceil(size / stride), the total padding split with the extra cell after
    (bottom/right), as TensorFlow does. PAD/VALID: out = round((size + pads - k_eff) /
    stride) + 1 with floor or ceil; in ceil mode a window that would start past the input
    and its leading padding is dropped (Caffe/PyTorch/ONNX), so every window overlaps the
    input.
    """
    k_eff = (kernel - 1) * dilation + 1
    if pad_mode == ht.PAD_MODE_SAME:
        out = -(-size // stride)
        total = max((out - 1) * stride + k_eff - size, 0)
        return Axis1D(out, total // 2, total - total // 2)
    before, after = pads if pad_mode == ht.PAD_MODE_PAD else (0, 0)
    span = size + before + after - k_eff
    if span < 0:
        raise bad_shape(node, f"window of {k_eff} does not fit input {size} padded by "
                              f"{before}+{after}")
    out = (-(-span // stride) if ceil else span // stride) + 1
    if ceil and (out - 1) * stride >= size + before:
        out -= 1
    return Axis1D(out, before, max((out - 1) * stride + k_eff - size - before, 0))


def pad_nhwc(x: np.ndarray, h: Axis1D, w: Axis1D, value: float | int) -> np.ndarray:
    """x [N, H, W, C] padded on H and W with `value` (x itself when nothing to pad).

    Only the padding the windows read is materialised (Axis1D.pad_after); input rows past
    the last window are copied but never read.
    """
    if not (h.pad_before or h.pad_after or w.pad_before or w.pad_after):
        return x
    n, height, width, c = x.shape
    out = np.full((n, h.pad_before + height + h.pad_after, w.pad_before + width + w.pad_after, c),
                  value, dtype=x.dtype)
    out[:, h.pad_before:h.pad_before + height, w.pad_before:w.pad_before + width, :] = x
    return out


def padded_nhwc(kernel: Kernel, x: np.ndarray, h: Axis1D, w: Axis1D, value: float | int,
                dtype: np.dtype) -> np.ndarray:
    """x [N, H, W, C] as `dtype`, padded on H and W with `value`, C-contiguous: pad_nhwc
    into the kernel's scratch buffer of the current run's arena (`nnrt.hdi.reference.arena`).

    The border is written once, when the buffer is made; each run copies (and converts)
    only the interior. x itself when it needs neither padding nor a copy.
    """
    if not (h.pad_before or h.pad_after or w.pad_before or w.pad_after):
        if x.dtype == dtype and x.flags.c_contiguous:
            return x
        out, _ = scratch(kernel, "padded", x.shape, dtype)
        np.copyto(out, x, casting="same_kind")
        return out
    n, height, width, c = x.shape
    shape = (n, h.pad_before + height + h.pad_after, w.pad_before + width + w.pad_after, c)
    out, _ = scratch(kernel, "padded", shape, dtype, fill=value)
    np.copyto(out[:, h.pad_before:h.pad_before + height, w.pad_before:w.pad_before + width, :],
              x, casting="same_kind")
    return out


def tiled_bias(bias: np.ndarray, width: int = 256) -> np.ndarray:
    """bias [C] repeated along rows of at least `width` values: [r*C] (for add_bias)."""
    return np.tile(bias, max(1, -(-width // max(bias.shape[0], 1))))


def add_bias(out: np.ndarray, bias: np.ndarray, tiled: np.ndarray | None = None) -> None:
    """out[..., C] += bias [C], in place. With `tiled` (tiled_bias(bias)) and a contiguous
    `out` whose pixels divide into its rows, the addition runs over rows of r*C values:
    numpy's inner loop is then long, rather than C values long once per pixel."""
    c = bias.shape[0]
    if tiled is not None and out.flags.c_contiguous and c and out.size % tiled.size == 0:
        rows = out.reshape(-1, tiled.size)
        rows += tiled
    else:
        out += bias


def windows_nhwc(xp: np.ndarray, h: Axis1D, w: Axis1D, kernel: tuple[int, int],
                 stride: tuple[int, int], dilation: tuple[int, int] = (1, 1)) -> np.ndarray:
    """Read-only strided view [N, OH, OW, KH, KW, C] of the windows of padded xp [N, H, W, C]."""
    sn, sh, sw, sc = xp.strides
    return np.lib.stride_tricks.as_strided(
        xp,
        shape=(xp.shape[0], h.out, w.out, kernel[0], kernel[1], xp.shape[3]),
        strides=(sn, sh * stride[0], sw * stride[1], sh * dilation[0], sw * dilation[1], sc),
        writeable=False,
    )


def spatial_layout(node: NodeSpec, attr_format: int | None = None) -> bool:
    """True when the node computes on NCHW, False for NHWC (semantics.md "Layout").

    The input tensor's tag decides (NHWC unless it says NCHW). An operator that carries a
    `format` attribute (pooling) must agree with an explicitly tagged input; with an
    untagged (FORMAT_NONE) input the attribute decides.
    """
    tag = node.inputs[0].format
    if attr_format is None:
        return tag == ht.FORMAT_NCHW
    if attr_format not in (ht.FORMAT_NCHW, ht.FORMAT_NHWC):
        raise invalid(node, f"format attribute {attr_format} is not NCHW (0) or NHWC (1)")
    if tag != ht.FORMAT_NONE and tag != attr_format:
        raise bad_format(node, f"format attribute {attr_format} contradicts the input tensor's "
                               f"format {tag}")
    return attr_format == ht.FORMAT_NCHW


def to_nhwc(shape: Shape, nchw: bool) -> Shape:
    return (shape[0], shape[2], shape[3], shape[1]) if nchw else tuple(shape)


def from_nhwc(shape: Shape, nchw: bool) -> Shape:
    return (shape[0], shape[3], shape[1], shape[2]) if nchw else tuple(shape)


# ----------------------------------------------------------------------------- data movement


def moved_dtype(node: NodeSpec, position: int = 0) -> np.dtype:
    """Data-movement operators: every output carries input `position`'s dtype (invalid
    otherwise) and its quantisation parameters (unsupported otherwise: requantising is not
    implemented). Returns that dtype; any HDI dtype is accepted."""
    source = node.inputs[position]
    for out in node.outputs:
        if out.dtype != source.dtype:
            raise invalid(node, f"output dtype {out.dtype} differs from the input's "
                                f"{source.dtype}")
        if out.quant_params != source.quant_params:
            raise unsupported(node, "output quantised differently from the input")
    return source.dtype


def expect_joined(kernel: Kernel) -> None:
    """Joining operators (Concat, Stack): two or more inputs, one output."""
    node = kernel.node
    if len(node.inputs) < 2:
        raise invalid(node, f"expects 2 or more inputs, has {len(node.inputs)}")
    kernel.expect_counts(len(node.inputs))  # checks the single output


def one_rank(node: NodeSpec) -> int:
    """The rank every input of the node shares (invalid when they differ)."""
    ranks = {len(t.shape) for t in node.inputs}
    if len(ranks) != 1:
        raise invalid(node, f"inputs of different ranks {sorted(ranks)}")
    (rank,) = ranks
    return rank


def shapes_of_rank(node: NodeSpec, input_shapes: Sequence[Shape], rank: int) -> list[Shape]:
    """A run's input shapes, each of which must have `rank` dimensions."""
    shapes = [tuple(s) for s in input_shapes]
    if any(len(s) != rank for s in shapes):
        raise bad_shape(node, f"input shapes {[list(s) for s in shapes]} are not all "
                              f"of rank {rank}")
    return shapes


def run_failure(node: NodeSpec, why: str) -> DriverError:
    """A run-time input VALUE the operator cannot take (an index out of range, …): that run
    fails with NNRT_FAILED; the same value in a constant input makes the node invalid."""
    from nnrt.common.errors import NNRT_FAILED

    return DriverError(NNRT_FAILED, f"node {node.index} ({node.name}): {why}")


def float_attr_as(node: NodeSpec, value: float, dtype: np.dtype, what: str) -> np.generic:
    """A float attribute (Pad's constantValue, ConstantOfShape's value) as one element of
    `dtype`, converted as a C cast would: truncated toward zero for integer dtypes (invalid
    when not finite or outside the dtype's range), nonzero → True for bool, IEEE rounding
    (±inf beyond the range) for floats."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.bool_(value != 0)
    if dtype.kind in "iu":
        if not math.isfinite(value):
            raise invalid(node, f"{what} {value} has no {dtype} value")
        truncated = int(value)
        info = np.iinfo(dtype)
        if not info.min <= truncated <= info.max:
            raise invalid(node, f"{what} {value} is outside the range of {dtype}")
        return dtype.type(truncated)
    with np.errstate(over="ignore"):
        return dtype.type(value)


# ----------------------------------------------------------------------------- row sums

SUM_BY_MATMUL = 1024  # longest rows summed by a matrix product (numpy's pairwise sums beyond)


def row_ones(length: int, dtype: np.dtype) -> np.ndarray | None:
    """The [L, 1] ones vector `row_sum` takes for rows of a length known at prepare time
    (None when it is DYNAMIC, empty or summed by pairwise sums)."""
    if length == DYNAMIC or not 0 < length <= SUM_BY_MATMUL:
        return None
    return np.ones((length, 1), dtype)


def row_sum(rows: np.ndarray, ones: np.ndarray | None) -> np.ndarray:
    """[R, 1]: the sum of each row of rows [R, L], a fresh array: a matrix product with a
    ones vector for rows of up to SUM_BY_MATMUL values (several times faster than numpy's
    reduction of many short rows), pairwise sums beyond. `ones` is row_ones(L, rows' dtype)
    when there is one at hand."""
    length = rows.shape[1]
    if length > SUM_BY_MATMUL:
        return rows.sum(axis=1, keepdims=True)
    if ones is None or ones.shape[0] != length:
        ones = np.ones((length, 1), rows.dtype)
    return np.matmul(rows, ones)


class ufunc_buffer:
    """``with ufunc_buffer():`` sets numpy's ufunc buffer size to `size` elements while the
    block runs and restores the previous one after (numpy keeps it per thread / context, so
    concurrent runs do not see each other's setting).

    numpy 2's buffered iterator handles operands made of many short contiguous rows (a
    strided slice of an NHWC tensor, a sub-rectangle of an image) markedly slower with its
    default 8192-element buffer than with a smaller one: 2-3x measured on numpy 2.4 for
    rows of 64 to 2048 elements. Results do not change (element-wise ufuncs only; a
    reduction's summation order may depend on the buffer).
    """

    __slots__ = ("size", "previous")

    def __init__(self, size: int = 2048) -> None:
        self.size = size
        self.previous = 0

    def __enter__(self) -> None:
        self.previous = np.setbufsize(self.size)

    def __exit__(self, *exc: object) -> None:
        np.setbufsize(self.previous)
