"""The small interface every device implements; the host (server/) does everything else.

A driver process hosts exactly one `Device`. The host validates every request, owns the
sessions, the shared buffers and the prepared-model table, and calls the device only with
validated, device-neutral data: a `Graph` to prepare, numpy arrays to run on. A device
with memory of its own (a GPU) copies in and out inside `PreparedModel.run`; a device that
schedules (the accelerator simulator) may block there according to `PrepareConfig`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from nnrt.protos import hdi_types_pb2 as _t
from nnrt.common.errors import NNRT_NOT_SUPPORT, DriverError
from nnrt.hdi.graph import DYNAMIC, Graph, Shape, TensorSpec

# Returns True once the run has been abandoned (its client's deadline passed or it went away);
# a device checks it between operators and then raises DriverError(NNRT_CANCELLED, ...).
CancelCheck = Callable[[], bool]

# A run made ready once for fixed windows (PreparedModel.bind): called with the run's
# CancelCheck, it computes into the windows it was bound to.
BoundRun = Callable[[CancelCheck], None]

# Default upper bound of a dynamic input dimension reported by GetInputDimRanges.
DEFAULT_MAX_DYNAMIC_DIM = 1 << 16


@dataclass(frozen=True)
class Capabilities:
    """The answers to the Is*Supported queries; each must be true to the device's behaviour."""

    float16: bool = False
    performance_mode: bool = False
    priority: bool = False
    dynamic_input: bool = False
    model_cache: bool = False


@dataclass(frozen=True)
class PrepareConfig:
    """A validated ModelConfig."""

    enable_float16: bool = False
    mode: int = _t.PERFORMANCE_NONE
    priority: int = _t.PRIORITY_NONE
    extensions: dict[str, bytes] = field(default_factory=dict)


@dataclass(slots=True)
class StepTime:
    """One step of a profiled run (RunRequest.profile; hdi.proto ProfileSpan): a node, or an
    engine's segment of several. `start` is time.monotonic(), seconds are wall time."""

    name: str
    nodes: tuple[int, ...]
    start: float
    seconds: float
    op: str = ""
    simulated: float = 0.0  # the accelerator's cost model
    host: float = 0.0  # the accelerator: the host's computation within `seconds`
    device: float = 0.0  # the GPU: OpenCL profiling events


class PreparedModel(ABC):
    """A model compiled for the device: planned once, then run many times, concurrently."""

    def __init__(self, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]) -> None:
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)

    def input_dim_ranges(self) -> tuple[list[list[int]], list[list[int]]]:
        """(min, max) per input and dimension; fixed dimensions have min == max."""
        mins = [[1 if d == DYNAMIC else d for d in t.shape] for t in self.inputs]
        maxs = [[DEFAULT_MAX_DYNAMIC_DIM if d == DYNAMIC else d for d in t.shape] for t in self.inputs]
        return mins, maxs

    def static_output_shapes(self) -> list[Shape] | None:
        """The output shapes when they do not depend on the run, else None."""
        return None

    @abstractmethod
    def run(self, inputs: Sequence[np.ndarray], cancelled: CancelCheck) -> list[np.ndarray]:
        """Compute the outputs (in Model.outputIndex order) from read-only input arrays.

        The returned arrays must have the output tensors' dtypes; the host copies them into
        the client's buffers. Raise DriverError with the hdi.md code on failure.
        """

    def run_profiled(self, inputs: Sequence[np.ndarray], cancelled: CancelCheck,
                     steps: list[StepTime]) -> list[np.ndarray]:
        """`run`, each step timed into `steps` (a profiled run: `nnrt bench --profile`)."""
        raise DriverError(NNRT_NOT_SUPPORT, "this device does not profile runs")

    # True for a model that writes its outputs straight into the client's windows: a device
    # that copies its results out anyway (a GPU) then copies once. Such a model defines
    # run_into(inputs, targets, cancelled), which the host calls instead of run when the
    # output shapes are static (targets: the output windows, shaped and typed).
    writes_into_outputs: bool = False

    def bind(self, inputs: Sequence[np.ndarray],
             targets: Sequence[np.ndarray]) -> BoundRun | None:
        """For a model that writes into its outputs: `run_into` of these windows made ready
        once (the engine's I/O binding), to be called for every identical request — the
        host guarantees the same mappings at the same addresses whenever it calls it. It
        must keep addresses, never the arrays (a kept view would keep a released buffer
        mapped), and be safe to call from several threads at once. None: not offered."""
        return None

    def export_cache(self) -> list[bytes]:
        raise DriverError(NNRT_NOT_SUPPORT, "this device cannot export a model cache")

    def close(self) -> None:
        """Free device resources; called once, when the prepared model is released."""


class Device(ABC):
    """One device, as the host sees it."""

    kind: str  # the `nnrt-driver <kind>` name
    name: str
    vendor: str
    version: str  # driver version; part of the device identity
    device_type: int  # HDI DeviceType code
    capabilities: Capabilities = Capabilities()
    # Runs that may compute at once (server/run_scheduler.py); None: no limit. A device
    # whose every run already uses all the cores it may sets a budget.
    concurrent_runs: int | None = None

    def status(self) -> int:
        """HDI DeviceStatus code."""
        return _t.AVAILABLE

    def reserve_memory(self, nbytes: int, what: str) -> None:
        """Count `nbytes` of a client buffer (AllocateBuffer) against the device's memory;
        DriverError(NNRT_OUT_OF_MEMORY) when it does not fit. Unlimited by default."""

    def release_memory(self, nbytes: int) -> None:
        """Give back what reserve_memory counted (the buffer was released or its session
        ended)."""

    def details(self) -> dict[str, str]:
        """What the device adds to the admin status and `nnrt devices` (its hardware, its
        memory in use); nothing by default."""
        return {}

    @abstractmethod
    def supported_operations(self, graph: Graph) -> list[bool | str]:
        """Per node of graph.nodes: True when the device can run it, else False or why not
        (a string the client shows: GetSupportedOperationReply.reasons); never fails on a
        node.

        Nodes listed in graph.undecodable (attrs None) must not be answered True.
        """

    @abstractmethod
    def prepare(self, graph: Graph, config: PrepareConfig) -> PreparedModel:
        """Compile a validated graph; raise DriverError (NNRT_UNSUPPORTED_OP, ...) to refuse."""

    def prepare_from_cache(self, blobs: Sequence[bytes], config: PrepareConfig) -> PreparedModel:
        raise DriverError(NNRT_NOT_SUPPORT, "this device has no model cache")

    def prepare_offline(self, blobs: Sequence[bytes], config: PrepareConfig) -> PreparedModel:
        raise DriverError(NNRT_NOT_SUPPORT, "this device cannot load offline models")

    def check_extensions(self, extensions: dict[str, bytes]) -> None:
        """Raise DriverError(NNRT_INVALID_PARAMETER) for a malformed known extension."""

    def close(self) -> None:
        """Release the device at shutdown."""
