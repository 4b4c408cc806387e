"""The GPU operator framework: one `GpuOp` subclass per HDI operator (or tight family),
registered by NodeType, each in `drivers/gpu/ops/op_<name>.py` beside its OpenCL source in
`drivers/gpu/cl/<name>.cl`.

What a node means is decided once, by the reference kernels (`nnrt.hdi.reference.graph_checks`):
every GPU op is created with the reference kernel of its node, which has already validated
the node (so an invalid node gets the same code on every driver) and which infers its
output shapes. A GPU op adds what is the GPU's own, in three steps:

* ``__init__(node, ref)`` — refuse with `unsupported(...)` what the OpenCL kernels do not
  compute (a dtype, an attribute value); no device work here (GetSupportedOperation calls it);
* ``load(prep)`` — at prepare, once per model: upload the constants in the layout the
  kernels want (transposed weights, ...) with `prep.upload`;
* ``build(b, inputs, outputs, post)`` — once per concrete shape (a specialisation): bind
  buffers and sizes into `Launch`es, kernels with their arguments set, enqueued as they are
  at every run.

Ops whose output is the input's bytes in another shape (Reshape and its family) set
`alias_input = 0` and launch nothing. Ops that can finish their output with the fused
epilogue (`Epilogue`: + residual, activation; `POST` in cl/common.cl) set
`accepts_epilogue`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import pyopencl as cl

from nnrt.hdi.reference.kernel import Kernel, unsupported
from nnrt.hdi.registry import registrar
from .opencl import ClRuntime, DeviceMemory, cl_error
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import DriverError
from nnrt.hdi.graph import NodeSpec, Shape

GPU_OPS: dict[int, type[GpuOp]] = {}
QUANT_OPS: dict[int, type[GpuOp]] = {}  # the integer kernels of QUANT_TYPE_ALL nodes
CL_DIR = Path(__file__).with_name("cl")
FLOAT32 = np.dtype(np.float32)
FLOAT16 = np.dtype(np.float16)
FLOATS = (FLOAT32, FLOAT16)
# Programs whose float tensors are data_t (cl/common.cl): built with -DNNRT_HALF for an op
# whose tensors are float16 (float16 mode, or a float16 model).
HALF_PROGRAMS = frozenset({"eltwise", "unary", "gemm", "conv", "pool", "reduce", "softmax",
                           "norm", "lstm"})


@cache
def cl_source(name: str) -> str:
    """The text of program `name` (cl/<name>.cl) with cl/common.cl in front."""
    return (CL_DIR / "common.cl").read_text() + "\n" + (CL_DIR / f"{name}.cl").read_text()


@dataclass(frozen=True)
class DeviceTensor:
    buffer: cl.Buffer
    shape: Shape
    dtype: np.dtype

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize


@dataclass(frozen=True)
class Act:
    """An activation with its parameters, as the kernels take it (ACT_* in cl/common.cl)."""

    kind: int = ht.ACTIVATION_TYPE_NO_ACTIVATION
    alpha: float = 0.0
    lo: float = 0.0
    hi: float = 0.0
    approximate: bool = False

    def args(self) -> list:
        return [np.int32(self.kind), np.float32(self.alpha), np.float32(self.lo),
                np.float32(self.hi), np.int32(self.approximate)]


@dataclass(frozen=True)
class Epilogue:
    """What the plan fused after an op: + residual (the output's shape), then `act`."""

    residual: DeviceTensor | None = None
    act: Act = field(default_factory=Act)

    @property
    def empty(self) -> bool:
        return self.residual is None and self.act.kind == ht.ACTIVATION_TYPE_NO_ACTIVATION

    def args(self, dummy: cl.Buffer) -> list:
        """The POST_PARAMS arguments."""
        res = dummy if self.residual is None else self.residual.buffer
        return [res, np.int32(self.residual is not None), *self.act.args()]


NO_EPILOGUE = Epilogue()


class Launch:
    """One kernel enqueue with its arguments bound once (`args`: as bound, so that the plan
    can rebind a tensor's buffer to a client's window, drivers/gpu/plan.py)."""

    __slots__ = ("kernel", "global_size", "local_size", "label", "args")

    def __init__(self, kernel: cl.Kernel, global_size: tuple[int, ...],
                 local_size: tuple[int, ...] | None, label: str,
                 args: Sequence = ()) -> None:
        self.kernel = kernel
        self.global_size = global_size
        self.local_size = local_size
        self.label = label
        self.args = tuple(args)

    def enqueue(self, queue: cl.CommandQueue) -> cl.Event:
        return cl.enqueue_nd_range_kernel(queue, self.kernel, self.global_size, self.local_size)


def round_up(n: int, multiple: int) -> int:
    return max(multiple, -(-n // multiple) * multiple)


class Preparer:
    """Prepare-time services for ops: the runtime and the model's device memory."""

    def __init__(self, runtime: ClRuntime, memory: DeviceMemory) -> None:
        self.runtime = runtime
        self.memory = memory

    def upload(self, array: np.ndarray, what: str) -> cl.Buffer:
        return self.memory.upload(array, what)


@dataclass(frozen=True)
class RunCheck:
    """A condition a kernel verifies on run-time values (an index in range, ...): it sets
    `flag` (one int32 on the device, zeroed before each run) when the condition fails, and
    the run then fails with `error` before any output is written."""

    flag: cl.Buffer
    error: DriverError


class Builder:
    """Specialisation-time services for ops: programs, kernels, scratch buffers, checks."""

    def __init__(self, runtime: ClRuntime, memory: DeviceMemory, programs: set[str],
                 dummy: cl.Buffer) -> None:
        self.runtime = runtime
        self.memory = memory
        self.programs = programs  # keys of every program this model uses (for its cache)
        self.dummy = dummy  # bound where an optional buffer is absent
        self.checks: list[RunCheck] = []
        self.half = False  # the op being built stores its float tensors as half

    def run_check(self, error: DriverError) -> cl.Buffer:
        """The flag a kernel sets (to any non-zero value) to fail the run with `error`."""
        flag = self.memory.allocate(4, "run check")
        self.checks.append(RunCheck(flag, error))
        return flag

    def program(self, name: str, options: Sequence[str] = ()) -> cl.Program:
        if self.half and name in HALF_PROGRAMS:
            options = (*options, "-DNNRT_HALF")
        key, program = self.runtime.programs.get(cl_source(name), tuple(options))
        self.programs.add(key)
        return program

    def launch(self, program: cl.Program, kernel_name: str, args: Sequence,
               global_size: Sequence[int], local_size: Sequence[int] | None = None,
               label: str = "") -> Launch:
        """A kernel of `program` with `args` bound; the global size is rounded up to a
        multiple of the local size (kernels check their bounds)."""
        if local_size is not None:
            global_size = [round_up(g, l) for g, l in zip(global_size, local_size)]
        try:
            kernel = cl.Kernel(program, kernel_name)
            kernel.set_args(*args)
        except cl.Error as exc:
            raise cl_error(exc, f"binding kernel {kernel_name}")
        return Launch(kernel, tuple(int(g) for g in global_size),
                      None if local_size is None else tuple(int(s) for s in local_size),
                      label or kernel_name, args)

    def scratch(self, nbytes: int, what: str) -> cl.Buffer:
        return self.memory.allocate(nbytes, what)

    def ints(self, values: Sequence[int], what: str = "shape table") -> cl.Buffer:
        """A small int32 table (dims, strides) on the device."""
        return self.memory.upload(np.asarray(list(values) or [0], dtype=np.int32), what)


class GpuOp(ABC):
    """One node of a prepared model on the GPU."""

    alias_input: int | None = None
    accepts_epilogue: bool = False
    half: bool = False  # its float tensors are float16: stored as half (HALF_PROGRAMS)
    # Input positions whose constant data the op uploads itself in load(); the plan passes
    # None for them to build() instead of a raw upload.
    own_constants: frozenset[int] = frozenset()

    def __init__(self, node: NodeSpec, ref: Kernel) -> None:
        self.node = node
        self.ref = ref

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        return self.ref.infer_shapes(input_shapes)

    @property
    def storage(self) -> np.dtype:
        """The dtype of the float data this op uploads itself (weights in its layout)."""
        return FLOAT16 if self.half else FLOAT32

    def load(self, prep: Preparer) -> None:
        """Upload what the op keeps on the device for the model's lifetime."""

    @abstractmethod
    def build(self, b: Builder, inputs: Sequence[DeviceTensor | None],
              outputs: Sequence[DeviceTensor], post: Epilogue) -> list[Launch]:
        """The launches that compute `outputs` from `inputs` (their shapes are concrete)."""

    def fusable_activation(self) -> Act | None:
        """For an activation op: the activation the plan may fuse into its producer."""
        return None


register = registrar(GPU_OPS)  # @register(NODE_TYPE_...) on each GpuOp class
register_quantised = registrar(QUANT_OPS)  # ... on each integer kernel of a quantised node


def node_type_name(node_type: int) -> str:
    try:
        return na.NodeType.Name(node_type)
    except ValueError:
        return str(node_type)


def require_dtypes(node: NodeSpec, allowed: Sequence[np.dtype] = FLOATS,
                   positions: Sequence[int] | None = None) -> None:
    """unsupported() unless the inputs at `positions` (default all) and every output have
    one of the `allowed` dtypes, and all the same float dtype (float32, or float16 stored as
    half and computed in float32)."""
    tensors = [node.inputs[i] for i in (range(len(node.inputs)) if positions is None
                                        else positions)] + list(node.outputs)
    for t in tensors:
        if t.dtype not in allowed:
            raise unsupported(node, f"the GPU driver computes {node_type_name(node.node_type)} "
                                    f"in {', '.join(str(d) for d in allowed)} only, "
                                    f"not {t.dtype} ({t.name!r})")
    floats = {t.dtype for t in tensors if t.dtype.kind == "f"}
    if len(floats) > 1:
        raise unsupported(node, f"float tensors of mixed dtypes ({', '.join(map(str, floats))})")


def create_op(node: NodeSpec) -> GpuOp:
    """Validate (with the reference kernel) and accept one node; DriverError otherwise."""
    from . import ops  # noqa: F401  (importing ops registers every op)
    from nnrt.hdi.reference.graph_checks import reference_kernel

    from .ops.op_quantized import plain_movement

    ref = reference_kernel(node)
    ops = GPU_OPS
    if node.quant_type == ht.QUANT_TYPE_ALL:
        plain = plain_movement(node)
        if plain is None:
            ops = QUANT_OPS
        else:  # it moves bytes that keep their parameters: the plain op computes it
            node, ref = plain, reference_kernel(plain)
    cls = ops.get(node.node_type)
    if cls is None:
        raise unsupported(node, f"{'quantised ' if ops is QUANT_OPS else ''}"
                                f"{node_type_name(node.node_type)} has no GPU kernel")
    op = cls(node, ref)
    op.half = any(t.dtype == FLOAT16 for t in (*node.inputs, *node.outputs))
    return op


def broadcast_strides(shape: Shape, out_shape: Shape) -> list[int]:
    """Element strides of a dense tensor of `shape` read at the coordinates of `out_shape`
    (numpy broadcasting: right-aligned; 0 along axes where it has size 1 or is missing)."""
    shape = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
    strides, step = [0] * len(shape), 1
    for axis in range(len(shape) - 1, -1, -1):
        strides[axis] = step if shape[axis] != 1 else 0
        step *= shape[axis]
    return strides


WORK_GROUP = 256  # the default 1-D work-group size of element-wise kernels
