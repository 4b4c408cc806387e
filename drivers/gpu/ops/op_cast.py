"""Cast between any two of the 12 HDI data types, with the reference's rules
(hdi/reference/ops/op_cast.py): float -> integer truncates toward zero and saturates (NaN 0),
integer -> integer wraps, to float rounds to nearest even, to bool is "non-zero", bool is
0 / 1. One work-item per element (cl/cast.cl, built per pair of types); float16 is read and
written with vload_half / vstore_half_rte, so no device extension is needed for it; float64
needs cl_khr_fp64 (refused at prepare on a device without it). Casting to the input's own
dtype shares the input's buffer and launches nothing.

Refused: a target-type input that arrives at run time (its value would have to be checked
on the host at each run); tensors of 2**31 elements or more.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..kernel import (
    WORK_GROUP,
    Builder,
    DeviceTensor,
    Epilogue,
    GpuOp,
    Launch,
    Preparer,
    register,
)
from .op_transpose import check_indexable
from nnrt.hdi.reference.kernel import Kernel, unsupported
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec

CL_TYPES = {
    np.dtype(np.bool_): "uchar", np.dtype(np.int8): "char", np.dtype(np.uint8): "uchar",
    np.dtype(np.int16): "short", np.dtype(np.uint16): "ushort", np.dtype(np.int32): "int",
    np.dtype(np.uint32): "uint", np.dtype(np.int64): "long", np.dtype(np.uint64): "ulong",
    np.dtype(np.float16): "half", np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
}
BOOL, HALF, DOUBLE = np.dtype(np.bool_), np.dtype(np.float16), np.dtype(np.float64)


def cast_options(src: np.dtype, dst: np.dtype) -> list[str]:
    """The build options of cl/cast.cl for src -> dst (different dtypes)."""
    options = [f"-DSRC={CL_TYPES[src]}", f"-DDST={CL_TYPES[dst]}"]
    if DOUBLE in (src, dst):
        options.append("-DNEED_FP64")
    if src == HALF:
        options.append("-DSRC_HALF")
    if dst == BOOL:
        options.append("-DTO_BOOL")
    elif dst == HALF:
        options += ["-DTO_HALF",
                    f"-DCONVERT=convert_{'double' if src == DOUBLE else 'float_rte'}"]
    elif src.kind == "f" and dst.kind in "iu":
        options.append(f"-DCONVERT=convert_{CL_TYPES[dst]}_sat_rtz")
    elif dst.kind == "f":
        options.append(f"-DCONVERT=convert_{CL_TYPES[dst]}_rte")
    else:
        options.append("-DINT_TO_INT")
    return options


@register(na.NODE_TYPE_CAST)
class Cast(GpuOp):
    own_constants = frozenset({1})

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        if ref.check_at_run:
            raise unsupported(node, "a target-type input that arrives at run time")
        self.src = np.dtype(node.inputs[0].dtype)
        self.dst = np.dtype(node.outputs[0].dtype)
        if self.src == self.dst:
            self.alias_input = 0

    def load(self, prep: Preparer) -> None:
        if DOUBLE in (self.src, self.dst) and not prep.runtime.fp64:
            raise unsupported(self.node, "float64 on an OpenCL device without cl_khr_fp64")

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, (out,) = inputs[0], outputs
        check_indexable(self.node, x, out)
        if out.size == 0:
            return []
        program = b.program("cast", cast_options(self.src, self.dst))
        return [b.launch(program, "cast", [x.buffer, out.buffer, np.int32(out.size)],
                         [out.size], [WORK_GROUP])]
