"""One model on several devices (decision 12): a compilation for a preference list of devices
runs its partitions as steps, and moves to the devices still alive when a driver dies.

Build (`HeteroCompilation.build`): each device is asked GetSupportedOperation of the whole
model once — in float16 mode the float16 form of it (partition.relaxed_query), of the devices
that have the mode; a device without a capability the compilation asks for (float16, a
performance mode, a priority) takes no node and says why. The partitioner
(client/core/partition.py) makes the steps; each is prepared on its device as a model of its
own (PrepareModel with the compilation's config), its cache kept for recovery as for a single
device.

Runs (`HeteroRunner`, one per executor): client/core/hetero_run.py.

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
(the C API's cache directory: one cache per partition, client/capi/compilation_build.py).
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nnrt.common.dtypes import numpy_dtype
from nnrt.common.errors import NNRT_SUCCESS, code_name
from nnrt.common.hdi_model import LoweredModel, PrepareError
from nnrt.protos import hdi_types_pb2 as ht

from .built_model import BuiltModel
from .compiler import check_capabilities, keep_cache, built_model, prepare_failed
from .device import Device, find_device
from .driver import DriverClient, DriverGone
from .errors import (OH_NN_CONNECTION_EXCEPTION, OH_NN_FAILED, ConnectionLost, DeviceNotFound,
                     InvalidParameter, NNRtError)
from .hetero_run import HeteroRunner, RunStats
from .partition import Plan, PartitionError, Step, Support, node_type_name, partition, \
    relaxed_query, sub_model
from .prepared_model import PreparedModel

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
        # directory (client/capi/compilation_build.py: one cache per partition).
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


__all__ = ["HeteroCompilation", "HeteroRunner", "RunStats", "DeviceGroup", "auto_order",
           "device_list",
           "OH_NN_CONNECTION_EXCEPTION"]
