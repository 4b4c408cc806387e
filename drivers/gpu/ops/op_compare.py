"""The comparisons (Equal, NotEqual, Greater, GreaterEqual, Less, LessEqual) and the logical
operators (LogicalAnd, LogicalOr, LogicalNot), with numpy broadcasting: bool outputs, every
dtype the reference takes (hdi/reference/ops/op_compare.py, op_logical.py), bit-exact.

A comparison runs in its operands' own type (cl/compare.cl built per type: integers as
integers, so int64 / uint64 compare exactly; float16 read with vload_half, exact in float;
bool as 0 / 1). A logical operand is taken as x != 0 in its own type (NaN is true), each
operand in its own dtype. float64 needs cl_khr_fp64 (refused at prepare without it).

Refused: tensors of 2**31 elements or more.
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
    broadcast_strides,
    register,
)
from .op_cast import BOOL, CL_TYPES, DOUBLE, HALF
from .op_transpose import check_indexable
from nnrt.hdi.reference.kernel import Kernel, unsupported
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec

CMP_EQUAL, CMP_NOT_EQUAL, CMP_GREATER, CMP_GREATER_EQUAL, CMP_LESS, CMP_LESS_EQUAL = range(6)
LOGICAL_AND, LOGICAL_OR, LOGICAL_NOT = range(3)

_COMPARISONS = {
    na.NODE_TYPE_EQUAL: CMP_EQUAL,
    na.NODE_TYPE_NOT_EQUAL: CMP_NOT_EQUAL,
    na.NODE_TYPE_GREATER: CMP_GREATER,
    na.NODE_TYPE_GREATER_EQUAL: CMP_GREATER_EQUAL,
    na.NODE_TYPE_LESS: CMP_LESS,
    na.NODE_TYPE_LESS_EQUAL: CMP_LESS_EQUAL,
}
_LOGICAL = {
    na.NODE_TYPE_LOGICAL_AND: LOGICAL_AND,
    na.NODE_TYPE_LOGICAL_OR: LOGICAL_OR,
    na.NODE_TYPE_LOGICAL_NOT: LOGICAL_NOT,
}


def operand_options(dtype: np.dtype, side: str) -> list[str]:
    """The build options of cl/compare.cl for operand `side` ("A" or "B") of `dtype`."""
    dtype = np.dtype(dtype)
    options = [f"-DT{side}={CL_TYPES[dtype]}"]
    if dtype == HALF:
        options.append(f"-D{side}_HALF")
    elif dtype == BOOL and side == "A":
        options.append("-DA_BOOL")
    if dtype == DOUBLE:
        options.append("-DNEED_FP64")
    return options


def pair_table(x: DeviceTensor, y: DeviceTensor, out: DeviceTensor) -> list[int]:
    """The table of pair_offsets (cl/common.cl): rank 0 when all three shapes are equal."""
    if x.shape == y.shape == out.shape:
        return [0]
    return [len(out.shape), *out.shape, *broadcast_strides(x.shape, out.shape),
            *broadcast_strides(y.shape, out.shape)]


class _BoolResult(GpuOp):
    """A node computed by one kernel of cl/compare.cl from one or two operands."""

    kernel_name: str

    def __init__(self, node: NodeSpec, ref: Kernel, code: int) -> None:
        super().__init__(node, ref)
        self.code = code
        self.dtypes = [np.dtype(t.dtype) for t in node.inputs]

    def options(self) -> list[str]:
        raise NotImplementedError

    def load(self, prep: Preparer) -> None:
        if DOUBLE in self.dtypes and not prep.runtime.fp64:
            raise unsupported(self.node, "float64 on an OpenCL device without cl_khr_fp64")

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, (out,) = inputs[0], outputs
        y = inputs[1] if len(inputs) > 1 else x
        check_indexable(self.node, x, y, out)
        if out.size == 0:
            return []
        args = [x.buffer, y.buffer, out.buffer, np.int32(out.size), np.int32(self.code),
                b.ints(pair_table(x, y, out))]
        program = b.program("compare", sorted(set(self.options())))
        return [b.launch(program, self.kernel_name, args, [out.size], [WORK_GROUP])]


@register(*_COMPARISONS)
class Compare(_BoolResult):
    kernel_name = "compare"

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref, _COMPARISONS[node.node_type])

    def options(self) -> list[str]:
        return operand_options(self.dtypes[0], "A")


@register(*_LOGICAL)
class Logical(_BoolResult):
    kernel_name = "logical"

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref, _LOGICAL[node.node_type])

    def options(self) -> list[str]:
        a = self.dtypes[0]
        b = self.dtypes[1] if len(self.dtypes) > 1 else a
        return operand_options(a, "A") + operand_options(b, "B")
