"""`nnrt.client.InferenceSession`: onnxruntime's session API over nnrt devices, so that code
written for onnxruntime switches to nnrt drivers by changing one import.

    from nnrt.client import InferenceSession, SessionOptions
    session = InferenceSession("resnet.onnx", providers=["CPUExecutionProvider"])
    session = InferenceSession("resnet.onnx",
                               providers=[("NnrtExecutionProvider", {"device": "gpu"})])
    [x_arg] = session.get_inputs()                  # .name, .shape, .type ("tensor(float)")
    probs, = session.run(None, {x_arg.name: batch})  # or run(["probs"], {...})

Decisions:

* A model is an `.onnx` file (imported by `client/onnx_import.py`), its bytes, an
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
  `cache_dir` / `cache_version` (the compilation cache), `run_timeout` (seconds, per run);
  onnxruntime's thread counts and graph optimisation level are accepted and have no effect
  (the driver schedules its own work).
* Shapes in `get_inputs()` / `get_outputs()` are the ONNX graph's (dim_param names or
  None for dynamic dimensions); types are onnxruntime's strings. A rank-0 ONNX output is
  returned with shape () (the device computes it as [1]).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from nnrt.client.capi.enums import OH_NN_PerformanceMode, OH_NN_Priority

from .api import Compiled, Executor, Model

__all__ = ["InferenceSession", "NodeArg", "SessionOptions", "get_available_providers"]

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
    # onnxruntime's knobs, accepted for compatibility; the driver schedules its own work
    intra_op_num_threads: int = 0
    inter_op_num_threads: int = 0
    graph_optimization_level: Any = None
    log_severity_level: int = 2
    extra: dict[str, Any] = field(default_factory=dict)

    def add_session_config_entry(self, key: str, value: str) -> None:
        self.extra[key] = value


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

    def run(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any],
            run_options: Any = None) -> list[np.ndarray]:
        """The outputs named (None: all) for the inputs fed by name."""
        if self._executor is None:
            raise RuntimeError("the session is closed")
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
        arrays = []
        for arg in self._inputs:
            value = np.asarray(input_feed[arg.name])
            arrays.append(value.reshape(1) if not arg.shape and value.ndim == 0 else value)
        timeout = getattr(run_options, "timeout", None) or self._options.run_timeout
        result = self._executor.run(*arrays, timeout=timeout)
        results = list(result) if isinstance(result, tuple) else [result]
        by_name = {}
        for arg, r in zip(self._outputs, results):
            by_name[arg.name] = r.reshape(()) if not arg.shape and r.size == 1 else r
        return [by_name[n] for n in wanted]

    def close(self) -> None:
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


def _type_name(dtype: np.dtype) -> str:
    names = {"float32": "float", "float64": "double", "bool": "bool"}
    return f"tensor({names.get(dtype.name, dtype.name)})"
