"""What Conv2DFusion and Conv2dTransposeFusion share, so that the two read their node alike.

Both take x [N, H, W, C] (an input tagged FORMAT_NCHW is [N, C, H, W], its output NCHW too),
a weight [outC, kH, kW, C/group] of static shape and an optional bias [outC]; both carry
the same attributes — kernelSize (which must match the weight), stride and dilation
(default [1, 1]), padMode with padList, group (0, proto3's unset, means 1), inChannel /
outChannel (checked when non-zero; inChannel may be C or C/group, as upstream's lowering
sends the weight's last dimension) and a fused activation. The output size of an axis, the
layout of the weight and the computation differ and stay in each operator's module.

The leading underscore keeps this module out of the `op_*` auto-import.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.activations import apply_activation, fused_activation
from nnrt.hdi.reference.kernel import Kernel, invalid, unsupported
from nnrt.hdi.reference.ops._common import (
    FLOAT_DTYPES,
    bad_shape,
    cast,
    computed_dtypes,
    explicit_pads,
    pair_attr,
    spatial_layout,
    to_nhwc,
)
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import DYNAMIC, Shape, TensorSpec


class ConvKernel(Kernel):
    """Base of the 2-D convolution kernels: validation of the shared operands and attributes
    (setting dtype, work, activation, nchw, out_c, kernel, group_c, stride, dilation,
    pad_mode, pads, group, in_c, has_bias), the shared front of shape inference and the
    shared end of execution."""

    def read_operands(self) -> tuple[TensorSpec, TensorSpec]:
        """Counts, dtypes and ranks of the operands; the weight's dimensions. (x, weight)."""
        node = self.node
        self.expect_counts(range(2, 4))
        self.dtype, self.work = computed_dtypes(node, FLOAT_DTYPES, "inputs")
        self.activation = fused_activation(node, self.dtype)
        x, weight = node.inputs[0], node.inputs[1]
        if len(x.shape) != 4:
            raise invalid(node, f"input must be 4-D, has shape {list(x.shape)}")
        if len(weight.shape) != 4:
            raise invalid(node, f"weight must be 4-D [outC, kH, kW, C/group], has shape "
                                f"{list(weight.shape)}")
        if DYNAMIC in weight.shape:
            raise unsupported(node, "a weight of dynamic shape")
        self.nchw = spatial_layout(node)
        self.out_c, kh, kw, self.group_c = weight.shape
        self.kernel = (kh, kw)
        return x, weight

    def read_geometry(self, attrs: na.Conv2DFusion | na.Conv2dTransposeFusion) -> None:
        """kernelSize against the weight; stride, dilation, padMode and padList."""
        node = self.node
        if list(attrs.kernelSize) and tuple(attrs.kernelSize) != self.kernel:
            raise invalid(node, f"kernelSize {list(attrs.kernelSize)} does not match the "
                                f"weight's {list(self.kernel)}")
        self.stride = pair_attr(node, attrs.stride, "stride", (1, 1))
        self.dilation = pair_attr(node, attrs.dilation, "dilation", (1, 1))
        self.pad_mode = int(attrs.padMode)
        pads = explicit_pads(node, attrs.padList, self.pad_mode, "padList")
        self.pads = (pads[:2], pads[2:])  # (top, bottom), (left, right)

    def check_channels(self, attrs: na.Conv2DFusion | na.Conv2dTransposeFusion,
                       declared_c: int) -> None:
        """group, the input's declared channels, inChannel and outChannel against the weight."""
        node = self.node
        self.group = int(attrs.group) or 1  # 0: the field was not set
        if self.group < 1:
            raise invalid(node, f"group {attrs.group} must be >= 1")
        self.in_c = self.group * self.group_c
        if declared_c not in (DYNAMIC, self.in_c):
            raise invalid(node, f"input has {declared_c} channels; weight and group {self.group} "
                                f"need {self.in_c}")
        if self.group_c < 1 or self.out_c < 1 or self.out_c % self.group:
            raise invalid(node, f"outChannel {self.out_c} is not a positive multiple of group "
                                f"{self.group}")
        if attrs.inChannel and attrs.inChannel not in (self.in_c, self.group_c):
            raise invalid(node, f"inChannel {attrs.inChannel} does not match the input's "
                                f"{self.in_c} channels")
        if attrs.outChannel and attrs.outChannel != self.out_c:
            raise invalid(node, f"outChannel {attrs.outChannel} does not match the weight's "
                                f"{self.out_c}")

    def check_bias(self) -> None:
        node = self.node
        self.has_bias = len(node.inputs) == 3
        if self.has_bias and node.inputs[2].shape != (self.out_c,):
            raise invalid(node, f"bias shape {list(node.inputs[2].shape)} is not [{self.out_c}]")

    def input_nhw(self, input_shapes: Sequence[Shape]) -> tuple[int, int, int]:
        """(N, H, W) of a run's input, its rank, channels and weight checked."""
        x = tuple(input_shapes[0])
        if len(x) != 4:
            raise bad_shape(self.node, f"input must be 4-D, has shape {list(x)}")
        if tuple(input_shapes[1]) != (self.out_c, *self.kernel, self.group_c):
            raise bad_shape(self.node, f"weight shape {list(input_shapes[1])} changed")
        n, h, w, c = to_nhwc(x, self.nchw)
        if c not in (DYNAMIC, self.in_c):
            raise bad_shape(self.node, f"input has {c} channels, the weight needs {self.in_c}")
        return n, h, w

    def finish(self, out: np.ndarray) -> list[np.ndarray]:
        """The NHWC result (bias added) activated in place, back in the input's layout, in
        the output dtype."""
        out = apply_activation(out, self.activation, inplace=True)
        if self.nchw:
            out = out.transpose(0, 3, 1, 2)
        return [cast(out, self.dtype)]
