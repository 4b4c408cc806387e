"""MatMulFusion and FullConnection on one batched, tiled GEMM (cl/gemm.cl); float32.

* MatMulFusion: y = activation(op(x1) @ op(x2)) with numpy `matmul` rules, as the reference
  (hdi/reference/ops/op_matmul.py): transposeA / transposeB are expressed as operand strides
  (nothing is copied), batch dimensions broadcast through per-operand batch strides (0 on a
  broadcast axis), a 1-D operand is a one-row (A) or one-column (B) matrix. Both operands
  may be run-time tensors (attention's QK^T and scores @ V); a constant operand is read as
  the plan uploads it.
* FullConnection: y = activation(x · Wᵀ + b) with x flattened to [M, in] (with or without
  useAxis the flattened rows are contiguous, so the reference's shape rules reduce to M =
  x.size / in). A constant weight is uploaded once in load() as Wᵀ [in, out] (the layout
  the kernels read coalesced) and a constant bias as is; a run-time weight is read [out,
  in] through strides, a run-time bias directly.

Both accept the plan's epilogue (residual add, activation) after their own bias and
activation. Rows per batch <= GEMV_ROWS with a column-contiguous B take the `gemv` kernel
(K split over 4 work-items per column); everything else the 64x64-tiled `gemm`.

Refused: dtypes other than float32 and float16 (integer matmuls; float16 is half
storage), tensors of 2^31 elements or more (32-bit indexing in the kernels). Fused
activations that need parameters are refused by the reference already.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyopencl as cl
from nnrt.hdi.reference.kernel import Kernel, unsupported
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec

from ..kernel import (
    Builder,
    DeviceTensor,
    Epilogue,
    GpuOp,
    Launch,
    Preparer,
    broadcast_strides,
    register,
    require_dtypes,
)

TILE = 64  # output tile of a gemm work-group (cl/gemm.cl TS)
GEMM_LOCAL = (16, 16, 1)
GEMV_LOCAL = (64, 4, 1)
GEMV_ROWS = 4  # at most this many rows per batch go to the gemv kernel
INT_LIMIT = 2**31 - 1


def _check_size(node: NodeSpec, *sizes: int) -> None:
    if any(s > INT_LIMIT for s in sizes):
        raise unsupported(node, "tensors of 2^31 elements or more (32-bit indexing)")


def _gemm(op: GpuOp, b: Builder, x: cl.Buffer, y: cl.Buffer, bias: cl.Buffer | None,
          out: DeviceTensor, batch: int, table: Sequence[int], m: int, n: int, k: int,
          a_strides: tuple[int, int], b_strides: tuple[int, int], act: int,
          post: Epilogue) -> list[Launch]:
    """The launch of out[batch, m, n] = A @ B (+ bias, activation, epilogue)."""
    if out.size == 0:
        return []
    _check_size(op.node, out.size)
    args = [x, y, b.dummy if bias is None else bias, out.buffer, np.int32(m), np.int32(n),
            np.int32(k), np.int32(a_strides[0]), np.int32(a_strides[1]),
            np.int32(b_strides[0]), np.int32(b_strides[1]), np.int32(bias is not None),
            np.int32(act), b.ints(table or [0]), *post.args(b.dummy)]
    program = b.program("gemm")
    if m <= GEMV_ROWS and b_strides[1] == 1:
        return [b.launch(program, "gemv", args, [n, m * GEMV_LOCAL[1], batch], GEMV_LOCAL)]
    grid = [-(-n // TILE) * GEMM_LOCAL[0], -(-m // TILE) * GEMM_LOCAL[1], batch]
    return [b.launch(program, "gemm", args, grid, GEMM_LOCAL)]


@register(na.NODE_TYPE_MATMUL_FUSION)
class MatMul(GpuOp):
    accepts_epilogue = True

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_dtypes(node)
        self.act = int(getattr(ref, "activation", ht.ACTIVATION_TYPE_NO_ACTIVATION))
        self.transpose_a = bool(ref.transpose_a)
        self.transpose_b = bool(ref.transpose_b)

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x, y = inputs
        (out,) = outputs
        _check_size(self.node, x.size, y.size)
        xs, ys = tuple(x.shape), tuple(y.shape)
        # A(m, k) = x[m * a_rs + k * a_cs] within one batch matrix.
        if len(xs) == 1:
            m, k = 1, xs[0]
            a_strides, a_batch, a_mat = (0, 1), (), xs[0]
        else:
            rows, cols = xs[-2:]
            m, k = (cols, rows) if self.transpose_a else (rows, cols)
            a_strides = (1, cols) if self.transpose_a else (cols, 1)
            a_batch, a_mat = xs[:-2], rows * cols
        # B(k, n) = y[k * b_rs + n * b_cs] within one batch matrix.
        if len(ys) == 1:
            n = 1
            b_strides, b_batch, b_mat = (1, 0), (), ys[0]
        else:
            rows, cols = ys[-2:]
            n = rows if self.transpose_b else cols
            b_strides = (1, cols) if self.transpose_b else (cols, 1)
            b_batch, b_mat = ys[:-2], rows * cols
        batch_shape = tuple(np.broadcast_shapes(a_batch, b_batch))
        batch = int(np.prod(batch_shape, dtype=np.int64))
        table: list[int] = []
        if batch > 1:
            sa = [s * a_mat for s in broadcast_strides(a_batch, batch_shape)]
            sb = [s * b_mat for s in broadcast_strides(b_batch, batch_shape)]
            table = [len(batch_shape), *batch_shape, *sa, *sb]
        return _gemm(self, b, x.buffer, y.buffer, None, out, batch, table, m, n, k,
                     a_strides, b_strides, self.act, post)


@register(na.NODE_TYPE_FULL_CONNECTION)
class FullConnection(GpuOp):
    accepts_epilogue = True

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        super().__init__(node, ref)
        require_dtypes(node)
        self.act = int(getattr(ref, "activation", ht.ACTIVATION_TYPE_NO_ACTIVATION))
        self.n_out, self.n_in = int(ref.n_out), int(ref.n_in)
        self.has_bias = bool(ref.has_bias)
        own = set()
        if node.inputs[1].is_constant:
            own.add(1)
        if self.has_bias and node.inputs[2].is_constant:
            own.add(2)
        self.own_constants = frozenset(own)
        self.weight_t: cl.Buffer | None = None
        self.bias: cl.Buffer | None = None

    def load(self, prep: Preparer) -> None:
        if 1 in self.own_constants:
            # Wᵀ [in, out], contiguous: B(k, n) = weight_t[k * out + n]
            weight_t = self.ref.weight_t
            if weight_t is None:
                weight_t = self.node.inputs[1].constant.T
            self.weight_t = prep.upload(np.ascontiguousarray(weight_t, self.storage),
                                        f"{self.node.name}: weightᵀ")
        if 2 in self.own_constants:
            self.bias = prep.upload(np.ascontiguousarray(self.node.inputs[2].constant,
                                                         self.storage), f"{self.node.name}: bias")

    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        x = inputs[0]
        (out,) = outputs
        _check_size(self.node, x.size, self.n_in * self.n_out)
        k, n = self.n_in, self.n_out
        m = x.size // k if k else 0
        if self.weight_t is not None:
            weight, b_strides = self.weight_t, (n, 1)
        else:
            weight, b_strides = inputs[1].buffer, (1, k)  # W [out, in]: B(k, n) = W[n, k]
        bias = None
        if self.has_bias:
            bias = self.bias if self.bias is not None else inputs[2].buffer
        return _gemm(self, b, x.buffer, weight, bias, out, 1, [], m, n, k, (k, 1), b_strides,
                     self.act, post)
