"""One model on several devices (decision 12): a compilation for a preference list of devices
runs its partitions as steps, and moves to the devices still alive when a driver dies.

Build (`HeteroCompilation.build`): each device is asked GetSupportedOperation of the whole
model once — in float16 mode the float16 form of it (partition.relaxed_query), of the devices
that have the mode; a device without a capability the compilation asks for (float16, a
performance mode, a priority) takes no node and says why. The partitioner
(client/core/partition.py) makes the steps; each is prepared on its device as a model of its
own (PrepareModel with the compilation's config), its cache kept for recovery as for a single
device.

Runs (`HeteroRunner`, one per executor): the steps run in order on the calling thread (sync)
or on a worker (async), under one deadline for the whole run and one cancel ticket. A tensor
one step writes and a later step reads (a boundary) lives in one memfd: allocated in the
producer's session, registered with the consumer's (`SharedMemory.descriptor_in`, the
driver's import of an fd), so the producer's output window is the consumer's input window and
no byte is copied between steps (`RunStats.copied_bytes` counts any that were: none). The
consumer reads the shape the producer reported: dynamic dimensions cross a boundary as the
driver computed them. A boundary window too small for what the producer computed (the
driver's NNRT_INSUFFICIENT_BUFFER with the true shapes) is made that size and the step run
again; the sizes are kept for later runs.

Failover (on unless the compilation turns it off): when a step's driver dies, the run's plan
is replaced by the plan over the devices still alive (prepared at once after the Build in the
background, for the loss of each device the preferred plan uses, so that taking it over
starts no process and prepares nothing), and the run is made again on it within its deadline
— its inputs are still in shared memory. The application sees the result; an asynchronous
run still reports OnServiceDied before its OnRunDone. A background thread then waits for the
lost driver (a failed connect is immediate), prepares the preferred plan's steps there again
(from their kept cache: `PreparedModel.session`) and makes it current again: later runs
return to it. Without failover, a death fails the run with OH_NN_CONNECTION_EXCEPTION, as on
one device, and the executor recovers on the same driver's restart.

A step's device error (NNRT_DEVICE_ERROR from a driver that is still alive: a lost or
offline device) fails over the same way, without OnServiceDied: the device is held out of
the plans for ERROR_HOLD_S (doubled for each further error within a minute), then taken
back once its driver says AVAILABLE. Only that code moves a run: every other refusal of a
Run (a bad input's NNRT_INVALID_*, NNRT_FAILED, NNRT_OUT_OF_MEMORY, the driver's flow
control NNRT_DEVICE_BUSY) can follow from the run itself and fails it as on one device,
leaving the plan alone. Without failover the device error is the run's
(OH_NN_UNAVAILABLE_DEVICE).

A partition is prepared by `prepare_partition`, or by the hook the compilation is given
(the C API's cache directory: one cache per partition, client/capi/compilation.py).
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nnrt.common.dtypes import numpy_dtype
from nnrt.common.errors import NNRT_SUCCESS, code_name
from nnrt.common.hdi_model import LoweredModel, PrepareError
from nnrt.protos import hdi_types_pb2 as ht

from .accepted_run import AcceptedRun, notify
from .buffer import BufferNotShared, SharedMemory, allocate, release_memory
from .compiler import check_capabilities, keep_cache, built_model, prepare_failed
from .device import Device, find_device
from .driver import DriverClient, DriverGone, RunTicket
from .errors import (OH_NN_CONNECTION_EXCEPTION, OH_NN_FAILED, OH_NN_SUCCESS, OH_NN_TIMEOUT,
                     ConnectionLost, DeviceNotFound, DeviceUnavailable, Failed,
                     InvalidParameter, NNRtError, RunCancelled, RunTimeout)
from .partition import Plan, PartitionError, Step, Support, node_type_name, partition, \
    relaxed_query, sub_model
from .prepared_model import BuiltModel, DimRanges, PreparedModel

log = logging.getLogger(__name__)

# How often a compilation running on a fallback plan looks for the lost driver again.
RETURN_POLL_S = 0.05
# A step's device error (NNRT_DEVICE_ERROR from a driver still alive: hardware failure,
# device offline) keeps its device out of the compilation's plans for ERROR_HOLD_S, doubled
# for each further error within ERROR_MEMORY_S of the last, at most ERROR_HOLD_MAX_S; after
# the hold the device is taken back once its driver says AVAILABLE (GetDeviceStatus).
ERROR_HOLD_S = 1.0
ERROR_HOLD_MAX_S = 30.0
ERROR_MEMORY_S = 60.0
# Run codes that say the device failed, not the run's tensors: only these move a run to
# another plan. NNRT_DEVICE_BUSY is the driver's flow control (a session over its runs in
# flight) and the invalid-input codes, NNRT_FAILED and NNRT_OUT_OF_MEMORY can follow from the
# run's own inputs and values: they fail the run and leave the plan as it is.
DEVICE_ERROR_CODES = frozenset({ht.NNRT_DEVICE_ERROR})
# HDI DeviceType order of "auto": accelerator, GPU, CPU, then anything else.
AUTO_ORDER = {3: 0, 2: 1, 1: 2, 0: 3}


def auto_order(devices: Sequence[Device]) -> list[Device]:
    """Every device, accelerators before GPUs before CPUs (stable within a kind)."""
    return sorted(devices, key=lambda d: AUTO_ORDER.get(d.hdi_device_type, 4))


def device_list(available: Sequence[Device], wanted: Any) -> list[Device] | None:
    """The devices of a compilation for several devices, by the rules every front end uses:
    "auto" (every device, `auto_order`), a list or tuple in order of preference, or a
    string naming several, comma-separated ("gpu,cpu"); each entry as `find_device` takes
    it. None when `wanted` names one device (the single-device path). DeviceNotFound
    (OH_NN_FAILED) for a device there is not, or none at all for "auto"; InvalidParameter
    for an empty list or a device named twice."""
    if isinstance(wanted, str):
        if wanted.strip().lower() == "auto":
            if not available:
                raise DeviceNotFound("no device: no driver answers")
            return auto_order(available)
        if "," not in wanted:
            return None
        wanted = [part.strip() for part in wanted.split(",")]
        if not all(wanted):
            raise InvalidParameter(f"an empty device name in {','.join(wanted)!r}")
    if not isinstance(wanted, (list, tuple)):
        return None
    if not wanted:
        raise InvalidParameter("an empty list of devices")
    devices: list[Device] = []
    for name in wanted:
        found = find_device(available, name)
        if found in devices:
            raise InvalidParameter(f"device {name!r} is named twice")
        devices.append(found)
    return devices


# (device, its session, the partition as a model) -> the partition prepared there
PreparePartition = Callable[[Device, DriverClient, LoweredModel], BuiltModel]


@dataclass
class RunStats:
    """What the runs of one executor did (`PreparedModel.hetero.stats`)."""

    runs: int = 0
    steps: int = 0
    boundary_bytes: int = 0  # bytes that crossed a partition boundary, in shared memory
    copied_bytes: int = 0  # bytes copied between steps (a window the consumer cannot map)
    step_reruns: int = 0  # steps run again with a boundary window made larger
    failovers: int = 0  # runs made again on another plan after a driver died


class DeviceGroup:
    """The devices of a compilation, where the single-device code names one device."""

    def __init__(self, devices: Sequence[Device]) -> None:
        self.devices = list(devices)

    @property
    def name(self) -> str:
        return "+".join(d.name for d in self.devices)

    @property
    def id(self) -> int:
        return self.devices[0].id

    def client(self) -> DriverClient:
        """A live session with one of the devices (the first that answers)."""
        last: DriverGone | None = None
        for device in self.devices:
            try:
                return device.client()
            except DriverGone as exc:
                last = exc
        raise last or DriverGone("no device")


@dataclass(eq=False)
class PreparedStep:
    """A partition prepared on its device."""

    number: int
    step: Step
    device: Device
    model: PreparedModel


@dataclass(eq=False)
class PreparedPlan:
    """A plan over some of the compilation's devices, every step prepared."""

    plan: Plan
    usable: tuple[int, ...]  # the preference indices it was made over
    steps: list[PreparedStep]

    def device_indices(self) -> set[int]:
        return {s.step.device for s in self.steps}


class HeteroCompilation:
    """A model compiled for an ordered list of devices (module docstring)."""

    def __init__(self, devices: Sequence[Device], lowered: LoweredModel,
                 config: ht.ModelConfig, *, failover: bool = True,
                 prepare: PreparePartition | None = None) -> None:
        if not devices:
            raise InvalidParameter("no device to compile for")
        self.devices = list(devices)
        self.group = DeviceGroup(devices)
        self.lowered = lowered
        self.config = config
        self.failover = failover
        # How a partition is prepared: `prepare_partition`, or the C API's through a cache
        # directory (client/capi/compilation.py: one cache per partition).
        self.prepare = prepare
        self.supports: list[Support] = []
        self.preferred: PreparedPlan | None = None
        self.current: PreparedPlan | None = None
        self._plans: dict[tuple[int, ...], PreparedPlan] = {}
        self._steps: dict[tuple[int, tuple[int, ...]], PreparedStep] = {}
        self._lock = threading.RLock()  # plans and steps made one at a time
        self._returning = False  # a thread waits for the preferred plan's drivers
        # device index -> (held out until, consecutive errors, last error): devices that
        # reported a device error
        self._errored: dict[int, tuple[float, int, float]] = {}
        self.closed = False

    # -- Build ------------------------------------------------------------------------------

    def build(self) -> BuiltModel:
        """Ask every device, plan, prepare: the BuiltModel executors run (its `hetero` is
        this compilation). NNRtError naming what failed."""
        self.supports = [self._query(device) for device in self.devices]
        try:
            plan = self._plan(tuple(range(len(self.devices))))
        except PartitionError as exc:
            raise NNRtError(OH_NN_FAILED, f"no plan on {self.group.name}: {exc}") from None
        self.preferred = self.current = plan
        for line in self.explain(plan).splitlines():
            log.info("%s", line)
        if self.failover:
            threading.Thread(target=_prepare_fallbacks, args=(weakref.ref(self),),
                             name="nnrt-hetero-fallbacks", daemon=True).start()
        first = plan.steps[0]
        built = BuiltModel(self.group, 0, list(self.lowered.inputs), list(self.lowered.outputs),
                           [], [], self.lowered, client=first.model.session()[0],
                           config=self.config, source="model")
        built.hetero = self
        finalizer = weakref.finalize(built, HeteroCompilation.close, self)
        finalizer.atexit = False  # at exit the sessions end, and the prepared models with them
        built.release = finalizer
        return built

    def _query(self, device: Device) -> Support:
        """GetSupportedOperation of the whole model on one device (its refusal as data)."""
        name = device.name
        try:
            client = device.client()
            check_capabilities(device, client, float16=self.config.enableFloat16,
                               performance=self.config.mode, priority=self.config.priority)
            query = relaxed_query(self.lowered.hdi) if self.config.enableFloat16 else \
                self.lowered.hdi
            with query.packed(client) as model:
                reply = client.get_supported_operation(model)
        except NNRtError as exc:
            return Support(name, [], refused=exc.message)
        except (DriverGone, PrepareError) as exc:
            return Support(name, [], refused=str(exc))
        if reply.returnCode != NNRT_SUCCESS:
            return Support(name, [], refused=f"GetSupportedOperation failed: "
                           f"{code_name(reply.returnCode)} {reply.reason}".strip())
        ops = list(reply.ops)
        if len(ops) != len(self.lowered.hdi.nodes):
            return Support(name, [], refused=f"{len(ops)} answers for "
                           f"{len(self.lowered.hdi.nodes)} nodes")
        reasons = list(reply.reasons) + [""] * (len(ops) - len(reply.reasons))
        return Support(name, ops, reasons)

    def _plan(self, usable: tuple[int, ...]) -> PreparedPlan:
        """The plan over the devices `usable` (preference indices), every step prepared
        (steps another plan already prepared are shared). PartitionError, DriverGone,
        NNRtError."""
        with self._lock:
            known = self._plans.get(usable)
            if known is not None:
                return known
            supports = [s if k in usable else Support(s.name, [], refused="its driver is gone")
                        for k, s in enumerate(self.supports)]
            plan = partition(self.lowered.hdi, supports)
            steps = [self._step(plan, number) for number in range(len(plan.steps))]
            prepared = PreparedPlan(plan, usable, steps)
            self._plans[usable] = prepared
            return prepared

    def _step(self, plan: Plan, number: int) -> PreparedStep:
        step = plan.steps[number]
        key = (step.device, tuple(step.nodes))
        known = self._steps.get(key)
        if known is not None:
            return PreparedStep(number, step, known.device, known.model)
        device = self.devices[step.device]
        sub = sub_model(self.lowered, plan, number)
        client = device.client()
        started = time.monotonic()
        built = (self.prepare or self.prepare_partition)(device, client, sub)
        log.debug("partition %d (%d nodes) prepared on %s from its %s in %.1f ms", number,
                  len(step.nodes), device.name, built.source,
                  (time.monotonic() - started) * 1000)
        prepared = PreparedStep(number, step, device, PreparedModel(built, client))
        self._steps[key] = prepared
        return prepared

    def prepare_partition(self, device: Device, client: DriverClient,
                          sub: LoweredModel) -> BuiltModel:
        """PrepareModel of a partition (GetSupportedOperation already said yes to each of its
        nodes), its cache kept in memory for recovery."""
        try:
            with sub.hdi.packed(client) as model:
                reply = client.prepare_model(model, self.config)
        except PrepareError as exc:
            raise NNRtError(OH_NN_FAILED, f"on {device.name}: {exc}") from exc
        if reply.returnCode != NNRT_SUCCESS:
            raise prepare_failed(f"PrepareModel of a partition ({len(sub.hdi.nodes)} nodes)",
                                 device, reply.returnCode, reply.reason)
        built = built_model(device, client, reply.preparedModelId, sub.inputs, sub.outputs,
                            self.config, sub, "model", None, None)
        keep_cache(client, built)
        return built

    def explain(self, plan: PreparedPlan | None = None) -> str:
        """The plan in words: each step's device and nodes, why nodes went where, the
        boundary tensors and their bytes."""
        plan = plan or self.current
        if plan is None:
            return "not built"
        model = self.lowered.hdi
        lines = [f"plan over {', '.join(self.devices[k].name for k in plan.usable)}: "
                 f"{len(plan.steps)} step(s), {len(plan.plan.boundaries)} boundary tensor(s)"]
        for prepared in plan.steps:
            step = prepared.step
            kinds: dict[str, int] = {}
            for index in step.nodes:
                kind = node_type_name(model.nodes[index])
                kinds[kind] = kinds.get(kind, 0) + 1
            lines.append(f"  step {prepared.number} on {prepared.device.name}: "
                         f"{len(step.nodes)} node(s) "
                         f"({', '.join(f'{k} x{n}' for k, n in kinds.items())})")
            for index in step.nodes:
                passed = [f"{self.supports[k].name}: {self.supports[k].why(index)}"
                          for k in range(step.device) if k in plan.usable]
                if passed:
                    lines.append(f"    node {index} ({model.nodes[index].name}) not on "
                                 + "; ".join(passed))
        for t in plan.plan.boundaries:
            tensor = model.tensors[t]
            lines.append(f"  boundary tensor {t} ({tensor.name or '-'}): "
                         f"{_type_name(tensor.dataType)}{list(tensor.dims)}, "
                         f"{_nbytes(tensor.dataType, tensor.dims)} bytes")
        return "\n".join(lines)

    # -- failover ---------------------------------------------------------------------------

    def fail_over(self, failed: PreparedPlan, device_index: int,
                  error: str | None = None) -> PreparedPlan:
        """The plan runs go on with after `device_index`'s driver died under `failed`, or
        (`error`, its reason) reported a device error while alive: that device is then held
        out of the plans for a while (ERROR_HOLD_S)."""
        with self._lock:
            if error is not None:
                hold = self._hold(device_index)
            current = self.current
            if current is not failed and current is not None and \
                    device_index not in current.device_indices():
                return current  # another run re-planned already
            usable = tuple(k for k in failed.usable if k != device_index)
            while True:
                usable = tuple(k for k in usable if self._reachable(k))
                if not usable:
                    raise ConnectionLost(f"{self.group.name}: no device of the compilation "
                                         "is left")
                try:
                    plan = self._plan(usable)
                except DriverGone:
                    continue  # another one died meanwhile: plan without it
                except PartitionError as exc:
                    raise ConnectionLost(f"{self.group.name}: the devices left cannot run the "
                                         f"model: {exc}") from None
                break
            self.current = plan
            left = ", ".join(self.devices[k].name for k in usable)
            if error is None:
                log.warning("%s: the driver of %s died; runs go on over %s", self.group.name,
                            self.devices[device_index].name, left)
            else:
                log.warning("%s: %s reported a device error (%s); runs go on over %s, and "
                            "return to it after %.1f s once it reports AVAILABLE",
                            self.group.name, self.devices[device_index].name, error, left, hold)
            if not self._returning:
                self._returning = True
                threading.Thread(target=_return_to_preferred, args=(weakref.ref(self),),
                                 name="nnrt-hetero-return", daemon=True).start()
            return plan

    def _hold(self, index: int) -> float:
        """Hold device `index` out after a device error (the lock held); the hold, s."""
        now = time.monotonic()
        _, count, last = self._errored.get(index, (0.0, 0, 0.0))
        count = count + 1 if now - last < ERROR_MEMORY_S else 1
        hold = min(ERROR_HOLD_MAX_S, ERROR_HOLD_S * 2 ** (count - 1))
        self._errored[index] = (now + hold, count, now)
        return hold

    def _reachable(self, index: int) -> bool:
        """Whether device `index` may take steps: its driver answers and no device error
        holds it out."""
        held = self._errored.get(index)
        if held is not None and time.monotonic() < held[0]:
            return False
        try:
            self.devices[index].client()
        except DriverGone:
            return False
        return True

    def _recovered(self, index: int) -> bool:
        """After its hold, whether a device that reported a device error says AVAILABLE
        (True for a device that reported none)."""
        held = self._errored.get(index)
        if held is None:
            return True
        if time.monotonic() < held[0]:
            return False
        try:
            reply = self.devices[index].client().get_device_status()
        except DriverGone:
            return False
        return reply.returnCode == NNRT_SUCCESS and reply.status == ht.AVAILABLE

    def try_return(self) -> bool:
        """Prepare the preferred plan's steps again where their drivers restarted and make
        it current; False while one of its drivers is still away."""
        preferred = self.preferred
        if preferred is None or self.current is preferred:
            return True
        if not all(self._recovered(k) for k in preferred.device_indices()):
            return False
        started = time.monotonic()
        try:
            for prepared in preferred.steps:
                prepared.model.session()
        except DriverGone:
            return False
        with self._lock:
            self.current = preferred
            self._returning = False
        log.info("%s: back on the preferred plan (%.1f ms to prepare it again)",
                 self.group.name, (time.monotonic() - started) * 1000)
        return True

    def close(self) -> None:
        """Release every prepared step (runs in flight keep theirs until they end)."""
        with self._lock:
            self.closed = True
            steps, self._steps, self._plans = list(self._steps.values()), {}, {}
        for prepared in steps:
            prepared.model.close()

    def runner(self) -> HeteroRunner:
        return HeteroRunner(self)


def _prepare_fallbacks(ref: weakref.ref) -> None:
    """After the Build: the plan for the loss of each device the preferred plan uses, so
    that failing over prepares nothing. Best effort (logged)."""
    compilation = ref()
    if compilation is None or compilation.preferred is None:
        return
    preferred = compilation.preferred
    lost = sorted(preferred.device_indices())
    del compilation
    for index in lost:
        compilation = ref()
        if compilation is None or compilation.closed:
            return
        usable = tuple(k for k in preferred.usable if k != index)
        if usable:
            try:
                compilation._plan(usable)
            except (NNRtError, DriverGone, PartitionError) as exc:
                log.info("%s: no fallback plan without %s: %s", compilation.group.name,
                         compilation.devices[index].name, exc)
        del compilation


def _return_to_preferred(ref: weakref.ref) -> None:
    """While a compilation runs on a fallback plan: wait for its preferred drivers."""
    while True:
        time.sleep(RETURN_POLL_S)
        compilation = ref()
        if compilation is None or compilation.closed:
            return
        if compilation.try_return():
            return
        del compilation


def _type_name(data_type: int) -> str:
    dtype = numpy_dtype(data_type)
    return "unknown" if dtype is None else dtype.name


def _nbytes(data_type: int, dims: Sequence[int]) -> str:
    dtype = numpy_dtype(data_type)
    if dtype is None:
        return "?"
    if any(d < 0 for d in dims):
        return f"{math.prod(d for d in dims if d >= 0) * dtype.itemsize} x dynamic"
    return str(math.prod(dims) * dtype.itemsize)


# -- runs ---------------------------------------------------------------------------------


@dataclass(eq=False)
class _Boundary:
    """One boundary tensor's memory in one set: written by its producer, read by the
    consumers (the same pages: `SharedMemory.descriptor_in` registers them there)."""

    memory: SharedMemory
    shape: list[int] = field(default_factory=list)  # as the producer reported it
    wires: dict[tuple[DriverClient, bool], bytes] = field(default_factory=dict)  # (session,
    # as an input): the IOTensor there, kept while the shape is


class _BoundarySet:
    """The boundary tensors of one run in flight (a set is used by one run at a time)."""

    def __init__(self) -> None:
        self.tensors: dict[int, _Boundary] = {}

    def release(self) -> None:
        for boundary in self.tensors.values():
            release_memory(boundary.memory.client, boundary.memory)
        self.tensors = {}


Describe = Callable[[Any, DriverClient], bytes]


class HeteroRunner:
    """The runs of one executor over a HeteroCompilation (module docstring)."""

    def __init__(self, compilation: HeteroCompilation) -> None:
        self.compilation = compilation
        self.stats = RunStats()
        self._lock = threading.Lock()
        self._free: dict[int, list[_BoundarySet]] = {}  # by id of the PreparedPlan
        self._sizes: dict[int, int] = {}  # boundary tensor -> the largest bytes seen
        self._closed = False

    def session(self) -> tuple[DriverClient, int]:
        """A live session of the current plan (where the front end allocates its tensors)."""
        plan = self.compilation.current
        if plan is not None:
            for prepared in plan.steps:
                try:
                    return prepared.model.session()[0], 0
                except DriverGone:
                    continue
        return self.compilation.group.client(), 0

    def dim_ranges(self) -> DimRanges:
        """The model inputs' ranges: of each input, what every step reading it accepts."""
        plan = self.compilation.current
        model = self.compilation.lowered.hdi
        mins: list[list[int] | None] = [None] * len(model.inputs)
        maxs: list[list[int] | None] = [None] * len(model.inputs)
        for prepared in plan.steps if plan is not None else ():
            ranges = prepared.model.dim_ranges()
            if ranges.status != DimRanges.OK or len(ranges.mins) != len(prepared.step.inputs):
                continue
            for position, t in enumerate(prepared.step.inputs):
                if t not in model.inputs:
                    continue
                k = model.inputs.index(t)
                low, high = ranges.mins[position], ranges.maxs[position]
                if mins[k] is None:
                    mins[k], maxs[k] = list(low), list(high)
                elif len(mins[k]) == len(low):
                    mins[k] = [max(a, b) for a, b in zip(mins[k], low)]
                    maxs[k] = [min(a, b) for a, b in zip(maxs[k], high)]
        if any(m is None for m in mins):
            return DimRanges(DimRanges.UNSUPPORTED)
        return DimRanges(DimRanges.OK, mins, maxs)

    # -- boundary memory ---------------------------------------------------------------------

    def _acquire(self, plan: PreparedPlan) -> _BoundarySet:
        with self._lock:
            free = self._free.get(id(plan))
            if free:
                return free.pop()
        return _BoundarySet()

    def _give_back(self, plan: PreparedPlan, boundaries: _BoundarySet) -> None:
        with self._lock:
            if not self._closed and (self.compilation.current is plan or
                                     plan is self.compilation.preferred):
                self._free.setdefault(id(plan), []).append(boundaries)
                return
        boundaries.release()

    def _window(self, boundaries: _BoundarySet, t: int, client: DriverClient,
                device: Device, need: int) -> _Boundary:
        """Boundary `t` with room for `need` bytes, allocated in the producer's session."""
        boundary = boundaries.tensors.get(t)
        if boundary is not None and boundary.memory.size >= need and \
                boundary.memory.client is not None and boundary.memory.client.alive:
            return boundary
        if boundary is not None:
            release_memory(boundary.memory.client, boundary.memory)
        with self._lock:
            size = max(need, self._sizes.get(t, 0))
            self._sizes[t] = size
        boundary = _Boundary(allocate(client, size, device.name))
        boundaries.tensors[t] = boundary
        return boundary

    # -- one run ----------------------------------------------------------------------------

    def run(self, model: PreparedModel, inputs: Sequence[Any], outputs: Sequence[Any],
            timeout: float | None, describe: Describe, ticket: RunTicket | None = None,
            on_died: Callable[[], None] | None = None) -> list[list[int]]:
        """Every step in order, within `timeout` seconds in all; the output shapes (stored in
        the output tensors and the model). Failover as the module docstring says: `on_died`
        is called when a driver dies under the run and the run goes on elsewhere."""
        deadline = None if timeout is None else time.monotonic() + timeout
        ticket = ticket or RunTicket()
        compilation = self.compilation
        plan = compilation.current
        while True:
            if plan is None or compilation.closed:
                raise InvalidParameter("the compilation is closed")
            try:
                shapes = self._run_plan(plan, inputs, outputs, deadline, describe, ticket)
            except _StepLost as lost:
                if not compilation.failover:
                    raise lost.error() from None
                if lost.error_code is None and on_died is not None:
                    on_died()  # a death (a device error is no service death)
                plan = compilation.fail_over(plan, lost.index, lost.reason())
                with self._lock:
                    self.stats.failovers += 1
                continue
            model.store_output_shapes(outputs, shapes)
            with self._lock:
                self.stats.runs += 1
            return shapes

    def _run_plan(self, plan: PreparedPlan, inputs: Sequence[Any], outputs: Sequence[Any],
                  deadline: float | None, describe: Describe,
                  ticket: RunTicket) -> list[list[int]]:
        model = self.compilation.lowered.hdi
        position_in = {t: k for k, t in enumerate(model.inputs)}
        position_out = {t: k for k, t in enumerate(model.outputs)}
        out_shapes: list[list[int] | None] = [None] * len(outputs)
        boundaries = self._acquire(plan)
        try:
            for prepared in plan.steps:
                if ticket.cancelled:
                    raise RunCancelled(f"{prepared.device.name}: the run was cancelled")
                self._run_step(prepared, plan, boundaries, inputs, outputs, position_in,
                               position_out, out_shapes, deadline, describe, ticket)
        except BaseException:
            boundaries.release()
            raise
        self._give_back(plan, boundaries)
        return [s if s is not None else [] for s in out_shapes]

    def _run_step(self, prepared: PreparedStep, plan: PreparedPlan, boundaries: _BoundarySet,
                  inputs: Sequence[Any], outputs: Sequence[Any], position_in: dict[int, int],
                  position_out: dict[int, int], out_shapes: list[list[int] | None],
                  deadline: float | None, describe: Describe, ticket: RunTicket) -> None:
        step, device, model = prepared.step, prepared.device, self.compilation.lowered.hdi
        try:
            client, model_id = prepared.model.session()
        except DriverGone as exc:
            raise _StepLost(step.device, device, exc) from None
        for attempt in range(2):
            try:
                ios_in = [self._input(t, client, device, boundaries, inputs, outputs,
                                      position_in, position_out, out_shapes, describe)
                          for t in step.inputs]
                ios_out = [describe(outputs[position_out[t]], client) if t in position_out
                           else self._output(t, client, device, boundaries)
                           for t in step.outputs]
            except DriverGone as exc:
                raise _StepLost(step.device, device, exc) from None
            except BufferNotShared as exc:
                raise Failed(f"{device.name}: a tensor's memory: {exc}") from None
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise RunTimeout(f"{self.compilation.group.name}: no result within the "
                                 f"deadline (before step {prepared.number})")
            try:
                reply = client.run(model_id, ios_in, ios_out, remaining, ticket)
            except DriverGone as exc:
                client.wait_dead(0.05)
                raise _StepLost(step.device, device, exc) from None
            except TimeoutError:
                raise RunTimeout(f"{device.name}: no result within the deadline (step "
                                 f"{prepared.number}); the driver was told to abandon the "
                                 "run") from None
            if ticket.cancelled and reply.returnCode != NNRT_SUCCESS:
                raise RunCancelled(f"{device.name}: the run was cancelled")
            if reply.returnCode in DEVICE_ERROR_CODES:
                raise _StepLost(step.device, device, None, reply.returnCode, reply.reason)
            with self._lock:
                self.stats.steps += 1
            if reply.returnCode == ht.NNRT_INSUFFICIENT_BUFFER and \
                    len(reply.outputDims) == len(step.outputs):
                shapes = [list(d.values) for d in reply.outputDims]
                self._too_small(step, shapes, model, outputs, position_out, out_shapes)
                for t, shape in zip(step.outputs, shapes):
                    if t not in position_out:
                        need = _bytes_of(model.tensors[t].dataType, shape)
                        self._window(boundaries, t, client, device, need)
                        boundaries.tensors[t].shape = shape
                        boundaries.tensors[t].wires.clear()
                with self._lock:
                    self.stats.step_reruns += 1
                continue
            from .execution import output_shapes  # (execution builds on this module)

            shapes = output_shapes(reply, len(step.outputs))
            for t, shape in zip(step.outputs, shapes):
                if t in position_out:
                    out_shapes[position_out[t]] = shape
                if t in boundaries.tensors and t not in position_out:
                    boundary = boundaries.tensors[t]
                    if boundary.shape != shape:
                        boundary.shape = shape
                        boundary.wires.clear()
                    with self._lock:
                        self.stats.boundary_bytes += _bytes_of(model.tensors[t].dataType, shape)
            return
        raise Failed(f"{device.name}: step {prepared.number} reported too small windows twice")

    def _too_small(self, step: Step, shapes: list[list[int]], model: Any,
                   outputs: Sequence[Any], position_out: dict[int, int],
                   out_shapes: list[list[int] | None]) -> None:
        """A model output too small: the front end sizes those (OutputsTooSmall with every
        output's shape: the driver's for this step's, the tensors' own for the others)."""
        small = [t for t in step.outputs if t in position_out]
        if not small:
            return
        from .execution import OutputsTooSmall

        known = {position_out[t]: s for t, s in zip(step.outputs, shapes) if t in position_out}
        every = [known.get(k, out_shapes[k] or _dims_of(o)) for k, o in enumerate(outputs)]
        raise OutputsTooSmall(f"{self.compilation.group.name}: the outputs are too small",
                              every)

    def _output(self, t: int, client: DriverClient, device: Device,
                boundaries: _BoundarySet) -> bytes:
        tensor = self.compilation.lowered.hdi.tensors[t]
        dims = [d if d >= 0 else 1 for d in tensor.dims]
        boundary = self._window(boundaries, t, client, device,
                                _bytes_of(tensor.dataType, dims))
        key = (client, False)
        wire = boundary.wires.get(key)
        if wire is None:
            wire = ht.IOTensor(name=tensor.name, dataType=tensor.dataType,
                               dimensions=boundary.shape or dims, format=tensor.format,
                               data=boundary.memory.descriptor_in(client)).SerializeToString()
            boundary.wires[key] = wire
        return wire

    def _input(self, t: int, client: DriverClient, device: Device, boundaries: _BoundarySet,
               inputs: Sequence[Any], outputs: Sequence[Any], position_in: dict[int, int],
               position_out: dict[int, int], out_shapes: list[list[int] | None],
               describe: Describe) -> bytes:
        if t in position_in:
            return describe(inputs[position_in[t]], client)
        tensor = self.compilation.lowered.hdi.tensors[t]
        if t in position_out:  # a model output a later step reads: that tensor's window
            shape = out_shapes[position_out[t]] or []
            io = ht.IOTensor.FromString(describe(outputs[position_out[t]], client))
            io.dimensions[:] = shape
            io.data.dataSize = _bytes_of(tensor.dataType, shape)
            return io.SerializeToString()
        boundary = boundaries.tensors[t]
        key = (client, True)
        wire = boundary.wires.get(key)
        if wire is None:
            wire = ht.IOTensor(name=tensor.name, dataType=tensor.dataType,
                               dimensions=boundary.shape, format=tensor.format,
                               data=boundary.memory.descriptor_in(
                                   client, 0, _bytes_of(tensor.dataType, boundary.shape))
                               ).SerializeToString()
            boundary.wires[key] = wire
        return wire

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sets = [s for free in self._free.values() for s in free]
            self._free = {}
        for boundaries in sets:
            boundaries.release()

    # -- asynchronous runs ------------------------------------------------------------------

    def start(self, model: PreparedModel, inputs: list, outputs: list, timeout_ms: int,
              user_data: Any, on_done: Callable | None, on_died: Callable | None,
              describe: Describe) -> HeteroAsyncRun:
        """Accept an asynchronous run (the model counted in by the caller): it completes
        exactly once through `on_done` — the steps' result, its deadline, a cancel, or a
        death without failover; with failover a death is `on_died` and the run goes on."""
        from . import execution

        run = HeteroAsyncRun(self, model, inputs, outputs, timeout_ms, user_data, on_done,
                             on_died, describe)
        execution._deadlines.add(run)
        execution._workers.submit(run.execute)
        return run


class _StepLost(Exception):
    """A step's device is lost to the run: its driver died (or could not be reached:
    `cause`), or it answered a device error (`error_code`, with the driver's reason)."""

    def __init__(self, index: int, device: Device, cause: BaseException | None,
                 error_code: int | None = None, driver_reason: str = "") -> None:
        super().__init__(str(cause) if cause is not None else code_name(error_code))
        self.index = index
        self.device = device
        self.cause = cause
        self.error_code = error_code
        self.driver_reason = driver_reason

    def reason(self) -> str | None:
        """A device error in words (None for a death)."""
        if self.error_code is None:
            return None
        return code_name(self.error_code) + (f": {self.driver_reason}"
                                             if self.driver_reason else "")

    def error(self) -> NNRtError:
        """What the run raises without failover: as on one device."""
        if self.error_code is None:
            return ConnectionLost(f"{self.device.name}: {self.cause}")
        return DeviceUnavailable(f"{self.device.name}: the driver's Run failed: "
                                 f"{code_name(self.error_code)}", reason=self.driver_reason)


class HeteroAsyncRun(AcceptedRun):
    """One accepted asynchronous run over steps (accepted_run.AcceptedRun); a driver's death
    under it is reported once, before OnRunDone, whichever step met it."""

    def __init__(self, runner: HeteroRunner, model: PreparedModel, inputs: list, outputs: list,
                 timeout_ms: int, user_data: Any, on_done: Callable | None,
                 on_died: Callable | None, describe: Describe) -> None:
        super().__init__(model, inputs, outputs, timeout_ms, user_data, on_done, on_died)
        self.runner = runner
        self.describe = describe
        self.died = False

    @property
    def label(self) -> str:
        return self.runner.compilation.group.name

    def _service_died(self) -> None:
        """A driver died under the run (reported once, before OnRunDone)."""
        with self._lock:
            if self.died:
                return
            self.died = True
        notify(self.on_died, "NN_OnServiceDied", self.user_data)

    def execute(self) -> None:
        remaining = self.time_left()
        if remaining is None:
            return
        try:
            self.runner.run(self.executor, self.inputs, self.outputs, remaining, self.describe,
                            self.ticket, on_died=self._service_died)
        except NNRtError as exc:
            if isinstance(exc, ConnectionLost):
                self._service_died()
            if isinstance(exc, RunTimeout):
                exc = RunTimeout(f"{self.runner.compilation.group.name}: no result within "
                                 f"{self.timeout_ms} ms; the driver was told to abandon the run")
            if self.claim():
                log.warning("OH_NNExecutor_RunAsync: %s", exc.message)
                self.deliver(exc.code, error=exc)
            return
        except Exception as exc:
            log.exception("OH_NNExecutor_RunAsync over steps failed unexpectedly")
            if self.claim():
                self.deliver(OH_NN_FAILED, error=Failed(f"the run failed: {exc}"))
            return
        if self.claim():
            self.deliver(OH_NN_SUCCESS)

    def expire(self) -> None:
        """On the deadline thread: late. The step in flight is abandoned (the ticket), the
        callback runs on the callback pool."""
        if self.claim():
            self.ticket.cancel()
            from .execution import _callbacks

            _callbacks().submit(self.deliver, OH_NN_TIMEOUT, False, RunTimeout(
                f"{self.label}: no result within {self.timeout_ms} ms"))


def _bytes_of(data_type: int, shape: Sequence[int]) -> int:
    dtype = numpy_dtype(data_type)
    return math.prod(max(d, 0) for d in shape) * (dtype.itemsize if dtype is not None else 1)


def _dims_of(tensor: Any) -> list[int]:
    """A front end tensor's current dims (Binding.dims, or the C API's descriptor)."""
    dims = getattr(tensor, "dims", None)
    if dims is None:
        desc = getattr(tensor, "desc", None)
        dims = getattr(desc, "shape", None) or []
    return list(dims)


__all__ = ["HeteroCompilation", "HeteroRunner", "RunStats", "DeviceGroup", "auto_order",
           "device_list",
           "OH_NN_CONNECTION_EXCEPTION"]
