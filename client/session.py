"""`nnrt.client.InferenceSession`: onnxruntime's session API over nnrt devices, so that code
written for onnxruntime switches to nnrt drivers by changing one import.

    from nnrt.client import InferenceSession, SessionOptions
    session = InferenceSession("resnet.onnx", providers=["CPUExecutionProvider"])
    session = InferenceSession("resnet.onnx",
                               providers=[("NnrtExecutionProvider", {"device": "gpu"})])
    [x_arg] = session.get_inputs()                  # .name, .shape, .type ("tensor(float)")
    probs, = session.run(None, {x_arg.name: batch})  # or run(["probs"], {...})

Decisions:

* A model is an `.onnx` file (imported by `client/onnx_import/`), its bytes, an
  `onnx.ModelProto`, or a saved `.nnrt` model (`common/model_file.py`). It is compiled once,
  at construction, for one device; `run` computes every output and returns those asked for
  (None: all, in the graph's order), as numpy arrays. Inputs go by name, in any order; a
  missing or unknown name raises ValueError as onnxruntime's InvalidArgument would.
* Providers, in order of preference; of one nnrt can serve, its device is used:
  `"CPUExecutionProvider"` → the CPU driver's device; `"NnrtExecutionProvider"` with
  options `{"device": ID, name or type}` (as `Model.compile` takes it; without one, the
  first device). Other providers (CUDA, TensorRT, ...) are skipped with a warning, as
  onnxruntime skips unavailable ones; with none given, the first device.
  `provider_options` may also come as a separate list, as in onnxruntime.
* Several providers nnrt serves (`[("NnrtExecutionProvider", {"device": "gpu"}),
  "CPUExecutionProvider"]`): node-by-node fallback along the list, as onnxruntime does —
  the model is compiled over those devices in that order (client/core/hetero.py), each node
  on the first that supports it; `get_providers()` lists those the plan uses.
* `SessionOptions`: `priority` and `performance_mode` ("low" / "medium" / "high" /
  "extreme", or the OH_NN enums), `enable_float16` (relaxed float16 precision),
  `cache_dir` / `cache_version` (the compilation cache), `run_timeout` (seconds, per run;
  default DEFAULT_RUN_TIMEOUT). onnxruntime's other options (thread counts, graph
  optimisation level, execution mode, profiling, memory arena and pattern, session config
  entries, ...) are accepted and have no effect (the driver schedules its own work and keeps
  its own memory): each one set to something other than its default is said once per
  process, at WARNING (`SessionOptions.intra_op_num_threads = 4 has no effect in nnrt ...`),
  as is an attribute onnxruntime does not have either.
* `RunOptions` (onnxruntime's): `terminate = True`, from any thread, cancels the runs in
  flight that use it (the driver abandons them; each raises RunCancelled) and refuses new
  ones until it is set back to False; `timeout` (seconds, nnrt's) bounds each run. Its log
  fields and config entries are kept and have no effect.
* `io_binding()` (onnxruntime's IOBinding): inputs and outputs bound once to tensors in
  shared memory with the driver, then `run_with_iobinding` as often as wanted with no copy
  at all — the driver reads the bound inputs and writes the bound outputs in the same pages
  the application maps. `bind_cpu_input(name, array)` copies the array in once (binding the
  same shape again reuses the memory); `input_array(name)`, nnrt's, is a writable view of a
  bound input, to write the next run's data in place; `bind_output(name)` (host memory
  only: `device_type="cpu"`; nnrt allocates, so no `buffer_ptr`); `get_outputs()` gives
  the bound outputs over the shared pages (`.numpy()`: a view, no copy, valid until the
  next run or clear), `copy_outputs_to_cpu()` copies. An output not bound is still given
  memory (the device writes every output) and not returned. `synchronize_inputs/outputs`
  have nothing to wait for (the device works in the shared pages and the run returns once
  it has).
* Shapes in `get_inputs()` / `get_outputs()` are the ONNX graph's (dim_param names or
  None for dynamic dimensions); types are onnxruntime's strings. A rank-0 ONNX output is
  returned with shape () (the device computes it as [1]).
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from nnrt.client.capi.enums import OH_NN_PerformanceMode, OH_NN_Priority
from nnrt.client.core.driver import RunTicket
from nnrt.client.core.errors import RunCancelled

from .api import DEFAULT_RUN_TIMEOUT, Compiled, Executor, Model
from .io_binding import IOBinding, SharedTensor, _type_name
from .onnx_import import as_fed, as_given

__all__ = ["InferenceSession", "IOBinding", "NodeArg", "RunOptions", "SessionOptions",
           "SharedTensor", "get_available_providers"]

log = logging.getLogger(__name__)

PROVIDERS = ("NnrtExecutionProvider", "CPUExecutionProvider")
_LEVELS = {"none": 0, "low": 1, "medium": 2, "high": 3, "extreme": 4}


def get_available_providers() -> list[str]:
    """The execution providers nnrt serves (onnxruntime's function of the same name)."""
    return list(PROVIDERS)


@dataclass(frozen=True)
class NodeArg:
    """An input or output: name, shape (ints, dim_param names or None) and type string."""

    name: str
    shape: list[int | str | None]
    type: str


@dataclass
class SessionOptions:
    """How the session compiles and runs (see the module docstring)."""

    priority: str | int | None = None
    performance_mode: str | int | None = None
    enable_float16: bool = False
    cache_dir: str | None = None
    cache_version: int = 0
    run_timeout: float | None = None
    input_shapes: dict[str, list[int | None]] | None = None  # for the ONNX import
    # onnxruntime's knobs, accepted for compatibility and without effect (IGNORED_OPTIONS):
    # the driver schedules its own work and keeps its own memory
    intra_op_num_threads: int = 0
    inter_op_num_threads: int = 0
    graph_optimization_level: Any = None
    execution_mode: Any = None
    enable_profiling: bool = False
    profile_file_prefix: str = "onnxruntime_profile_"
    optimized_model_filepath: str = ""
    enable_cpu_mem_arena: bool = True
    enable_mem_pattern: bool = True
    enable_mem_reuse: bool = True
    use_deterministic_compute: bool = False
    log_severity_level: int = 2
    log_verbosity_level: int = 0
    logid: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def add_session_config_entry(self, key: str, value: str) -> None:
        self.extra[key] = value

    def get_session_config_entry(self, key: str) -> str:
        return self.extra[key]


# SessionOptions fields nnrt accepts and does not use (said once each, when set).
IGNORED_OPTIONS = ("intra_op_num_threads", "inter_op_num_threads", "graph_optimization_level",
                   "execution_mode", "enable_profiling", "profile_file_prefix",
                   "optimized_model_filepath", "enable_cpu_mem_arena", "enable_mem_pattern",
                   "enable_mem_reuse", "use_deterministic_compute", "log_severity_level",
                   "log_verbosity_level", "logid")
_warned: set[str] = set()
_warned_lock = threading.Lock()


def _warn_once(key: str, message: str, *args: Any) -> None:
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    log.warning(message, *args)


def _warn_ignored(options: SessionOptions) -> None:
    """Each option set that nnrt does not use, said once per process."""
    defaults = SessionOptions()
    for name in IGNORED_OPTIONS:
        value = getattr(options, name)
        if value != getattr(defaults, name):
            _warn_once(name, "SessionOptions.%s = %r has no effect in nnrt (the driver "
                       "schedules its own work and keeps its own memory)", name, value)
    for key in options.extra:
        _warn_once(f"entry:{key}", "SessionOptions session config entry %r has no effect in "
                   "nnrt", key)
    known = {f.name for f in fields(SessionOptions)}
    for name in vars(options):
        if name not in known:
            _warn_once(f"unknown:{name}", "SessionOptions.%s is not an option nnrt or "
                       "onnxruntime knows; ignored", name)


class RunOptions:
    """onnxruntime's RunOptions: `terminate` cancels the runs in flight that use it (each
    raises RunCancelled) and refuses new ones while set; `timeout` (s, nnrt's) bounds a run;
    the log fields and config entries are kept and have no effect."""

    def __init__(self) -> None:
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.only_execute_path_to_fetches = False
        self.timeout: float | None = None
        self._terminate = False
        self._lock = threading.Lock()
        self._in_flight: set[RunTicket] = set()
        self._entries: dict[str, str] = {}

    @property
    def terminate(self) -> bool:
        return self._terminate

    @terminate.setter
    def terminate(self, value: bool) -> None:
        with self._lock:
            self._terminate = bool(value)
            tickets = list(self._in_flight) if value else []
        for ticket in tickets:  # the driver abandons each; its run raises RunCancelled
            ticket.cancel()

    def add_run_config_entry(self, key: str, value: str) -> None:
        self._entries[key] = value

    def get_run_config_entry(self, key: str) -> str:
        return self._entries[key]

    def _begin(self) -> RunTicket:
        with self._lock:
            if self._terminate:
                raise RunCancelled("the run was not started: RunOptions.terminate is set")
            ticket = RunTicket()
            self._in_flight.add(ticket)
        return ticket

    def _end(self, ticket: RunTicket) -> None:
        with self._lock:
            self._in_flight.discard(ticket)


def _level(value: str | int | None, enum: type, what: str) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        if value.lower() not in _LEVELS or (enum is OH_NN_Priority and value.lower() ==
                                            "extreme"):
            raise ValueError(f"{what} {value!r} is not one of "
                             f"{[k for k in _LEVELS if enum is not OH_NN_Priority or k != 'extreme']}")
        return enum(_LEVELS[value.lower()])
    return enum(int(value))


def _device_of(providers: Sequence[Any] | None,
               provider_options: Sequence[Mapping[str, Any]] | None) -> tuple[Any, list[str]]:
    """(the device to compile for, the providers used) from onnxruntime-style arguments;
    several that nnrt serves: (their devices in order, their names), node-by-node fallback."""
    if not providers:
        return None, ["NnrtExecutionProvider"]
    served = _served(providers, provider_options)
    if len(served) > 1:
        return [device for _, device in served], [name for name, _ in served]
    entries: list[tuple[str, Mapping[str, Any]]] = []
    for k, p in enumerate(providers):
        name, options = (p, {}) if isinstance(p, str) else (p[0], dict(p[1]))
        if provider_options is not None and k < len(provider_options):
            options = {**options, **provider_options[k]}
        entries.append((name, options))
    for name, options in entries:
        if name == "CPUExecutionProvider":
            return "cpu", [name]
        if name == "NnrtExecutionProvider":
            unknown = set(options) - {"device"}
            if unknown:
                raise ValueError(f"NnrtExecutionProvider options {sorted(unknown)} are not "
                                 f"known (only 'device')")
            return options.get("device"), [name]
        log.warning("execution provider %s is not available in nnrt; skipped", name)
    raise ValueError(f"none of the providers {[n for n, _ in entries]} is available "
                     f"(available: {list(PROVIDERS)})")


def _served(providers: Sequence[Any],
            provider_options: Sequence[Mapping[str, Any]] | None) -> list[tuple[str, Any]]:
    """(provider name, device) of each provider nnrt serves, in order, a device once."""
    from nnrt.client.core.device import find_device, registry

    served: list[tuple[str, Any]] = []
    seen = set()
    available = None
    for k, p in enumerate(providers):
        name, options = (p, {}) if isinstance(p, str) else (p[0], dict(p[1]))
        if provider_options is not None and k < len(provider_options):
            options = {**options, **provider_options[k]}
        if name not in PROVIDERS:
            continue
        wanted = "cpu" if name == "CPUExecutionProvider" else options.get("device")
        if available is None:
            available = registry().devices()
        device = find_device(available, wanted)
        if device.id not in seen:
            seen.add(device.id)
            served.append((name, device))
    return served


class InferenceSession:
    """A model compiled for one nnrt device, run with numpy feeds by input name."""

    def __init__(self, path_or_bytes: Any, sess_options: SessionOptions | None = None,
                 providers: Sequence[Any] | None = None,
                 provider_options: Sequence[Mapping[str, Any]] | None = None,
                 **kwargs: Any) -> None:
        if kwargs:
            raise TypeError(f"unexpected arguments {sorted(kwargs)}")
        self._options = sess_options or SessionOptions()
        _warn_ignored(self._options)
        self._bindings: list[IOBinding] = []  # free ones, for runs with RunOptions
        self._bindings_lock = threading.Lock()
        self._every_binding: weakref.WeakSet[IOBinding] = weakref.WeakSet()  # freed at close
        device, self._providers = _device_of(providers, provider_options)
        fallback = self._providers if isinstance(device, list) else None
        self._model, self._inputs, self._outputs = self._load(path_or_bytes)
        options = self._options
        try:
            self._compiled: Compiled | None = self._model.compile(
                device, performance=_level(options.performance_mode, OH_NN_PerformanceMode,
                                           "performance_mode"),
                priority=_level(options.priority, OH_NN_Priority, "priority"),
                float16=options.enable_float16, cache_dir=options.cache_dir,
                cache_version=options.cache_version)
            self._executor: Executor | None = self._compiled.executor()
            if fallback is not None:  # those the plan uses, as onnxruntime lists them
                used = {s.device.id for s in self._compiled.hetero.preferred.steps}
                self._providers = list(dict.fromkeys(
                    name for name, d in zip(fallback, device) if d.id in used))
        except BaseException:
            self._model.close()
            raise

    def _load(self, source: Any) -> tuple[Model, list[NodeArg], list[NodeArg]]:
        from nnrt.common import model_file
        from .onnx_import import describe_io, import_onnx

        if isinstance(source, (str, os.PathLike)):
            with open(source, "rb") as f:
                if f.read(len(model_file.MAGIC)) == model_file.MAGIC:
                    model = Model.load(source)
                    lowered = model.handle.lowered()

                    def arg(d: Any) -> NodeArg:
                        dtype = model_file.dtype_of(d)
                        return NodeArg(d.name, [None if s < 0 else s for s in d.shape],
                                       _type_name(dtype))

                    return model, [arg(d) for d in lowered.inputs], \
                        [arg(d) for d in lowered.outputs]
        from .onnx_import import load_onnx

        proto = load_onnx(source)
        inputs, outputs = describe_io(proto)
        model = import_onnx(proto, input_shapes=self._options.input_shapes)
        return (model, [NodeArg(i.name, i.shape, i.type) for i in inputs],
                [NodeArg(o.name, o.shape, o.type) for o in outputs])

    # -- onnxruntime's API -------------------------------------------------------------------

    def get_inputs(self) -> list[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        return list(self._outputs)

    def get_overridable_initializers(self) -> list[NodeArg]:
        return []  # constants are folded into the compiled model

    def get_providers(self) -> list[str]:
        return list(self._providers)

    def get_session_options(self) -> SessionOptions:
        return self._options

    def _timeout(self, run_options: Any) -> float:
        return (getattr(run_options, "timeout", None) or self._options.run_timeout
                or DEFAULT_RUN_TIMEOUT)

    def io_binding(self) -> IOBinding:
        """Inputs and outputs bound once in shared memory, run many times with no copy."""
        self._live_executor()
        binding = IOBinding(self)
        with self._bindings_lock:
            self._every_binding.add(binding)
        return binding

    def run_with_iobinding(self, iobinding: IOBinding, run_options: RunOptions | None = None
                           ) -> None:
        """Run on the bound tensors; the outputs are in the binding (get_outputs)."""
        if iobinding._session is not self:
            raise ValueError("the IOBinding belongs to another session")
        iobinding._run(run_options, self._timeout(run_options))

    def _live_executor(self) -> Executor:
        if self._executor is None:
            raise RuntimeError("the session is closed")
        return self._executor

    def run(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any],
            run_options: RunOptions | None = None) -> list[np.ndarray]:
        """The outputs named (None: all) for the inputs fed by name. With `run_options`, the
        run can be terminated from another thread (RunOptions.terminate)."""
        self._live_executor()
        names = [i.name for i in self._inputs]
        missing = [n for n in names if n not in input_feed]
        unknown = [n for n in input_feed if n not in names]
        if missing or unknown:
            raise ValueError(f"inputs: missing {missing}, unknown {unknown} (the model takes "
                             f"{names})")
        out_names = [o.name for o in self._outputs]
        wanted = list(output_names) if output_names else out_names
        bad = [n for n in wanted if n not in out_names]
        if bad:
            raise ValueError(f"no output named {bad} (outputs: {out_names})")
        if isinstance(run_options, RunOptions):
            results = self._run_terminable(input_feed, run_options)
        else:
            arrays = [as_fed(arg, input_feed[arg.name]) for arg in self._inputs]
            result = self._live_executor().run(*arrays, timeout=self._timeout(run_options))
            results = list(result) if isinstance(result, tuple) else [result]
        by_name = {}
        for arg, r in zip(self._outputs, results):
            by_name[arg.name] = as_given(arg, r)
        return [by_name[n] for n in wanted]

    def _run_terminable(self, input_feed: Mapping[str, Any], run_options: RunOptions
                        ) -> list[np.ndarray]:
        """A run over a pooled IOBinding (its ticket is what `terminate` cancels); the
        outputs copied out, as onnxruntime's run returns arrays of the caller's own."""
        with self._bindings_lock:
            binding = self._bindings.pop() if self._bindings else IOBinding(self)
        try:
            for arg in self._inputs:
                binding.bind_cpu_input(arg.name, input_feed[arg.name])
            binding._run(run_options, self._timeout(run_options))
            results = binding._arrays(self._outputs, copy=True)
        except BaseException:
            binding.clear_binding_inputs()
            binding.clear_binding_outputs()
            raise
        with self._bindings_lock:
            self._bindings.append(binding)
        return results

    def close(self) -> None:
        with self._bindings_lock:
            bindings = [*self._bindings, *self._every_binding]
            self._bindings = []
        for binding in bindings:
            binding.clear_binding_inputs()
            binding.clear_binding_outputs()
        if self._executor is not None:
            self._executor.close()
            self._executor = None
        if self._compiled is not None:
            self._compiled.close()
            self._compiled = None
        self._model.close()

    def __enter__(self) -> InferenceSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
