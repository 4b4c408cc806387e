"""Convolution, pooling, Resize and BatchNormalization: the NHWC operations of OH_NN
(their inputs asked for in (0, 2, 3, 1), their results left NHWC)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..importer import _handles, _Importer
from ..loading import OnnxImportError
from ..values import _Attrs, _FUSE, _NHWC


def _spatial_pads(im: _Importer, node: Any, a: _Attrs, hw: Sequence[int],
                  kernel: Sequence[int], strides: Sequence[int],
                  dilations: Sequence[int]) -> list[int] | None:
    """[top, bottom, left, right], or None for the device's SAME (TensorFlow's SAME_UPPER)."""
    auto = a.get("auto_pad", "NOTSET")
    pads = a.ints("pads")
    if auto == "NOTSET":
        pads = pads if pads is not None else [0, 0, 0, 0]
        if len(pads) != 4:
            raise OnnxImportError(f"pads {pads} do not have 4 entries (2-D)", node)
        if min(pads) < 0:
            raise OnnxImportError(f"negative pads {pads}", node)
        return [pads[0], pads[2], pads[1], pads[3]]
    if auto == "VALID":
        return [0, 0, 0, 0]
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise OnnxImportError(f"auto_pad {auto!r} is not NOTSET, VALID, SAME_UPPER or "
                              f"SAME_LOWER", node)
    if any(d < 0 for d in hw):
        if auto == "SAME_UPPER":
            return None
        raise OnnxImportError("auto_pad SAME_LOWER on a dynamic spatial size", node)
    out = []
    for size, k, s, d in zip(hw, kernel, strides, dilations):
        total = max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        out.extend([small, large] if auto == "SAME_UPPER" else [large, small])
    return out


def _conv_params(pads: list[int] | None, key: str = "padList") -> dict[str, Any]:
    return {"padMode": 0} if pads is None else {key: pads}


@_handles("Conv")
def _conv(im: _Importer, node: Any, a: _Attrs) -> None:
    x, w = im.need(node, 0), im.need(node, 1)
    b = im.get(node, 2)
    if len(x.shape) != 4:
        raise OnnxImportError(f"only 2-D convolutions are imported (input rank "
                              f"{len(x.shape)}, not 4)", node)
    if len(w.shape) != 4:
        raise OnnxImportError(f"weight rank {len(w.shape)}, not 4", node)
    out_c, group_c, kh, kw = w.shape
    group = int(a.get("group", 1))
    kernel = a.ints("kernel_shape", [kh, kw])
    if list(kernel) != [kh, kw]:
        raise OnnxImportError(f"kernel_shape {kernel} disagrees with the weight's {[kh, kw]}",
                              node)
    strides = a.ints("strides", [1, 1])
    dilations = a.ints("dilations", [1, 1])
    pads = _spatial_pads(im, node, a, x.shape[2:], kernel, strides, dilations)
    out = node.output[0]
    weight = w.const
    bias = b.const if b is not None else None
    # BatchNormalization reading only this Conv: folded into its weight and bias.
    bn = im.sole_consumer(out)
    if bn is not None and bn.op_type == "BatchNormalization" and bn.input[0] == out \
            and im.plan is None \
            and weight is not None and (b is None or bias is not None):
        bn_attrs = _Attrs(bn)
        params = [im._maybe_const(bn, k) for k in range(1, 5)]
        if all(isinstance(p, np.ndarray) for p in params) and \
                not bn_attrs.get("training_mode", 0) and len([o for o in bn.output if o]) == 1:
            eps = float(bn_attrs.get("epsilon", 1e-5))
            bn_attrs.get("momentum")
            if not bn_attrs.unread():
                scale, shift, mean, var = (np.asarray(p, np.float64) for p in params)
                factor = scale / np.sqrt(var + eps)
                folded_bias = (np.zeros(out_c) if bias is None else bias.astype(np.float64))
                weight = (weight.astype(np.float64) * factor[:, None, None, None]).astype(
                    w.dtype)
                bias = ((folded_bias - mean) * factor + shift).astype(w.dtype)
                im.skip.add(id(bn))
                out = bn.output[0]
    activation, out = im.fused_activation(out)
    if weight is not None and weight is w.const:
        w_op = im.weight(w, _NHWC)
    elif weight is not None:
        w_op = im.m.constant(np.ascontiguousarray(weight.transpose(0, 2, 3, 1)))
    else:
        w_op = im.view(w, _NHWC)
    if bias is not None:
        b_op = im.bias(b if b is not None and bias is b.const else None, bias, x, w_op)
    elif b is not None:
        b_op = im.view(b)
    else:
        b_op = im.m.constant(np.zeros(out_c, x.dtype))
    if x.shape[1] >= 0 and x.shape[1] != group * group_c:
        raise OnnxImportError(f"input has {x.shape[1]} channels, weight and group {group} "
                              f"need {group * group_c}", node)
    im.op(node, "CONV2D", [im.view(x, _NHWC), w_op, b_op], out, _NHWC, stride=strides,
          dilation=dilations, group=group, activationType=_FUSE[activation],
          **_conv_params(pads))


def _pooled_input(im: _Importer, node: Any) -> Any:
    """Input 0 of a pooling node, which must be 4-D (2-D pooling)."""
    x = im.need(node, 0)
    if len(x.shape) != 4:
        raise OnnxImportError(f"only 2-D pooling is imported (input rank {len(x.shape)})",
                              node)
    return x


@_handles("MaxPool", "AveragePool")
def _pool(im: _Importer, node: Any, a: _Attrs) -> None:
    x = _pooled_input(im, node)
    if len([o for o in node.output if o]) > 1:
        raise OnnxImportError("the Indices output is not computed", node)
    kernel = a.ints("kernel_shape")
    if kernel is None or len(kernel) != 2:
        raise OnnxImportError(f"kernel_shape {kernel} is not 2-D", node)
    strides = a.ints("strides", [1, 1])
    dilations = a.ints("dilations", [1, 1])
    if dilations != [1, 1]:
        raise OnnxImportError(f"dilations {dilations}: pooling has no dilation in OH_NN", node)
    ceil = int(a.get("ceil_mode", 0))
    if node.op_type == "MaxPool":
        a.get("storage_order")  # only shapes the Indices output, refused above
    pads = _spatial_pads(im, node, a, x.shape[2:], kernel, strides, dilations)
    source = im.view(x, _NHWC)
    if node.op_type == "AveragePool" and int(a.get("count_include_pad", 0)) and \
            (pads is None or any(pads)):
        if ceil:
            raise OnnxImportError("count_include_pad with ceil_mode: windows past the "
                                  "padding have no exact OH_NN form", node)
        if pads is None:
            raise OnnxImportError("count_include_pad with auto_pad SAME on a dynamic size",
                                  node)
        # The padding counts: pad with zeros first, then pool without padding.
        padded = [x.shape[0], x.shape[2] + pads[0] + pads[1] if x.shape[2] >= 0 else -1,
                  x.shape[3] + pads[2] + pads[3] if x.shape[3] >= 0 else -1, x.shape[1]]
        source = im.m.op("PAD", source, np.asarray([[0, 0], pads[0:2], pads[2:4], [0, 0]],
                                                   np.int64),
                         constantValue=0.0, paddingMode=0, shape=padded)
        pads = [0, 0, 0, 0]
    if pads is not None and (max(pads[:2]) >= kernel[0] or max(pads[2:]) >= kernel[1]):
        raise OnnxImportError(f"pads {pads} reach a kernel's size {kernel}", node)
    op_type = "MAX_POOL" if node.op_type == "MaxPool" else "AVG_POOL"
    im.op(node, op_type, [source], node.output[0], _NHWC, kernelSize=kernel, strides=strides,
          roundMode=ceil, **_conv_params(pads, "pad"))


@_handles("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(im: _Importer, node: Any, a: _Attrs) -> None:
    x = _pooled_input(im, node)
    op_type = "AVG_POOL" if node.op_type == "GlobalAveragePool" else "MAX_POOL"
    im.op(node, op_type, [im.view(x, _NHWC)], node.output[0], _NHWC, kernelSize=[1, 1],
          strides=[1, 1], **{"global": True})


@_handles("BatchNormalization")
def _batch_norm(im: _Importer, node: Any, a: _Attrs) -> None:
    if int(a.get("training_mode", 0)) or len([o for o in node.output if o]) > 1:
        raise OnnxImportError("training_mode=1 (batch statistics, running mean / variance "
                              "outputs) is training, not inference: refused", node)
    a.get("momentum")
    x = im.need(node, 0)
    rank = len(x.shape)
    if rank < 2:
        raise OnnxImportError("input of rank < 2 has no channel axis", node)
    perm = (0, *range(2, rank), 1)  # channels last
    params = [im.view(im.need(node, k)) for k in range(1, 5)]
    im.op(node, "BATCH_NORM", [im.view(x, perm), *params], node.output[0], perm,
          epsilon=float(a.get("epsilon", 1e-5)))


@_handles("Resize")
def _resize(im: _Importer, node: Any, a: _Attrs) -> None:
    x = im.need(node, 0)
    out = node.output[0]
    shape = x.shape
    out_shape = im.shape(out, node)
    if len(shape) != 4 or any(d < 0 for d in shape[2:]) or any(d < 0 for d in out_shape[2:]):
        raise OnnxImportError("only 4-D inputs with static spatial sizes are resized", node)
    if out_shape[:2] != shape[:2] and -1 not in (*shape[:2], *out_shape[:2]):
        raise OnnxImportError("only the spatial dimensions (2 and 3) are resized", node)
    if a.get("antialias", 0) and (out_shape[2] < shape[2] or out_shape[3] < shape[3]):
        raise OnnxImportError("antialias when downsampling is not computed", node)
    if a.ints("axes") not in (None, [2, 3], [-2, -1]):
        raise OnnxImportError(f"axes {a.ints('axes')} (only the spatial ones)", node)
    policy = a.get("keep_aspect_ratio_policy", "stretch")
    if policy != "stretch":
        raise OnnxImportError(f"keep_aspect_ratio_policy {policy!r}", node)
    scales = im.const(node, 2, "scales")
    if scales is not None and scales.size:
        scales = [float(s) for s in np.asarray(scales).reshape(-1)[-2:]]
        for size, s, o in zip(shape[2:], scales, out_shape[2:]):
            if size * s != o:
                raise OnnxImportError(f"scale {s} of a size {size} is not a whole output "
                                      f"size: the coordinates would differ", node)
    mode = a.get("mode", "nearest")
    transform = a.get("coordinate_transformation_mode", "half_pixel")
    a.get("cubic_coeff_a")
    a.get("extrapolation_value")
    exclude = int(a.get("exclude_outside", 0))
    nearest_mode = a.get("nearest_mode", "round_prefer_floor")
    h, w = out_shape[2], out_shape[3]
    if mode == "linear":
        codes = {"asymmetric": 0, "align_corners": 1, "pytorch_half_pixel": 2}
        if transform == "half_pixel" and h > 1 and w > 1:
            code = 2  # equal to pytorch_half_pixel when no output length is 1
        elif transform in codes:
            code = codes[transform]
        else:
            raise OnnxImportError(f"coordinate_transformation_mode {transform!r} with "
                                  f"linear mode", node)
        im.op(node, "RESIZE_BILINEAR", [im.view(x, _NHWC)], out, _NHWC, newHeight=h,
              newWidth=w, coordinateTransformMode=code, excludeOutside=exclude,
              preserveAspectRatio=False)
        return
    if mode != "nearest":
        raise OnnxImportError(f"mode {mode!r}: OH_NN's Resize is bilinear, or nearest "
                              f"upsampling by whole factors", node)
    fh, fw = h // shape[2], w // shape[3]
    exact = h == fh * shape[2] and w == fw * shape[3] and fh >= 1 and fw >= 1
    repeat = (transform == "asymmetric" and nearest_mode == "floor") or (
        transform in ("half_pixel", "pytorch_half_pixel") and
        nearest_mode in ("round_prefer_floor", "round_prefer_ceil"))
    if not (exact and repeat):
        raise OnnxImportError(f"nearest mode is imported for whole upsampling factors with "
                              f"asymmetric/floor or half_pixel/round_prefer_*, not "
                              f"{transform}/{nearest_mode} from {list(shape[2:])} to "
                              f"{[h, w]}", node)
    # Nearest upsampling by whole factors: each pixel repeated, [N, H, 1, W, 1, C] * ones.
    n, c = shape[0], shape[1]
    source = im.view(x, _NHWC)
    if n < 0 and c < 0:
        raise OnnxImportError("nearest resize with dynamic batch and channels", node)
    split = im.m.op("RESHAPE", source, np.asarray([n, shape[2], 1, shape[3], 1, c], np.int64),
                    shape=(n, shape[2], 1, shape[3], 1, c))
    ones = np.ones((1, 1, fh, 1, fw, 1), x.dtype)
    wide = im.m.op("MUL", split, ones, shape=(n, shape[2], fh, shape[3], fw, c))
    im.op(node, "RESHAPE", [wide, np.asarray([n, h, w, c], np.int64)], out, _NHWC)
