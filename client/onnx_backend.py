"""nnrt as an ONNX backend: `onnx.backend.base.Backend` implemented over nnrt devices, so that
onnx's own backend tests (`onnx.backend.test`) and code written for any ONNX backend run on
nnrt drivers.

    from nnrt.client.onnx_backend import NnrtBackend
    rep = NnrtBackend.prepare(model, "CPU")          # imported, compiled once for the device
    outputs = rep.run([x])                           # by position (or a dict by name)
    outputs = NnrtBackend.run_node(node, [x, y])     # one node, for onnx's node tests

Decisions:

* **Devices**: onnx's device strings name nnrt devices. "CPU" (onnx's default) is the CPU
  driver's device; any other string is an nnrt device name, ID or type, as
  `Model.compile` takes it ("gpu", "accelerator", "nnrt-cpu_nnrt_v2_1"); an "NNRT:" prefix is
  allowed ("NNRT:gpu"). `supports_device` is True when a driver of that device answers now.
* **prepare** imports the model (`nnrt.client.onnx_import`: OnnxImportError names the node,
  the operator and why a model cannot be mapped exactly) and compiles it once; the
  returned `NnrtBackendRep` runs it as often as wanted and must be closed (or used as a
  context manager) to give the device's memory back; a rep that is garbage collected is
  closed then.
* **Inputs** go by position (the graph's inputs, initializers excluded) or by name; a
  rank-0 input is fed as the [1] tensor the model takes, a rank-0 output comes back with
  shape (), as onnxruntime gives it.
* **run_node** wraps the node into a one-node model typed from the inputs it is given
  (outputs' types and shapes from onnx's inference, or `outputs_info` when given), then
  prepares and runs it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from onnx.backend.base import Backend, BackendRep, namedtupledict

from .api import Compiled, Executor, Model
from .onnx_import import IOInfo, as_fed, as_given, describe_io, import_onnx, load_onnx

__all__ = ["NnrtBackend", "NnrtBackendRep", "nnrt_device"]

log = logging.getLogger(__name__)

DEFAULT_DEVICE = "CPU"


def nnrt_device(device: str) -> str:
    """The nnrt device name of an ONNX backend device string ("CPU" -> "cpu")."""
    if not isinstance(device, str) or not device.strip():
        raise TypeError(f"an ONNX backend device is a non-empty string, not {device!r}")
    name = device.strip()
    if name[:5].upper() == "NNRT:":
        name = name[5:]
    return "cpu" if name.upper() == "CPU" else name


class NnrtBackendRep(BackendRep):
    """A model compiled for one nnrt device, run with numpy inputs."""

    def __init__(self, model: Model, compiled: Compiled, inputs: Sequence[IOInfo],
                 outputs: Sequence[IOInfo]) -> None:
        self._model: Model | None = model
        self._compiled: Compiled | None = compiled
        self._executor: Executor | None = compiled.executor()
        self.inputs = list(inputs)
        self.outputs = list(outputs)

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        """The outputs, in the graph's order (a namedtuple also indexed by output name).
        `inputs`: a sequence in the graph's input order, a mapping by name, or one array
        for a one-input model. `timeout=` (seconds) is passed to the run."""
        if self._executor is None:
            raise RuntimeError("the backend rep is closed")
        unknown = set(kwargs) - {"timeout"}
        if unknown:
            raise TypeError(f"unexpected arguments {sorted(unknown)}")
        names = [i.name for i in self.inputs]
        if isinstance(inputs, Mapping):
            missing = [n for n in names if n not in inputs]
            extra = [n for n in inputs if n not in names]
            if missing or extra:
                raise ValueError(f"inputs: missing {missing}, unknown {extra} (the model takes "
                                 f"{names})")
            given = [inputs[n] for n in names]
        elif isinstance(inputs, np.ndarray) and len(names) == 1:
            given = [inputs]
        else:
            given = list(inputs) if inputs is not None else []
            if len(given) != len(names):
                raise ValueError(f"{len(given)} inputs given, the model takes {len(names)} "
                                 f"({names})")
        arrays = [as_fed(info, value) for info, value in zip(self.inputs, given)]
        result = self._executor.run(*arrays, **kwargs)
        results = list(result) if isinstance(result, tuple) else [result]
        shaped = [as_given(info, r) for info, r in zip(self.outputs, results)]
        return namedtupledict("Outputs", [o.name for o in self.outputs])(*shaped)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.close()
            self._executor = None
        if self._compiled is not None:
            self._compiled.close()
            self._compiled = None
        if self._model is not None:
            self._model.close()
            self._model = None

    def __enter__(self) -> NnrtBackendRep:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the driver frees the session's resources
            pass


class NnrtBackend(Backend):
    """onnx's Backend over nnrt devices (see the module docstring)."""

    @classmethod
    def is_compatible(cls, model: Any, device: str = DEFAULT_DEVICE, **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model: Any, device: str = DEFAULT_DEVICE, **kwargs: Any) -> NnrtBackendRep:
        """Import `model` (a ModelProto, its bytes or a path) and compile it for `device`.
        kwargs: `input_shapes` (for the import), `float16` (relaxed precision)."""
        unknown = set(kwargs) - {"input_shapes", "float16"}
        if unknown:
            raise TypeError(f"unexpected arguments {sorted(unknown)}")
        proto = load_onnx(model)
        inputs, outputs = describe_io(proto)
        imported = import_onnx(proto, input_shapes=kwargs.get("input_shapes"))
        try:
            compiled = imported.compile(nnrt_device(device),
                                        float16=bool(kwargs.get("float16", False)))
        except BaseException:
            imported.close()
            raise
        return NnrtBackendRep(imported, compiled, inputs, outputs)

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = DEFAULT_DEVICE,
                  **kwargs: Any) -> tuple[Any, ...]:
        with cls.prepare(model, device, **kwargs) as rep:
            return rep.run(inputs)

    @classmethod
    def run_node(cls, node: Any, inputs: Any, device: str = DEFAULT_DEVICE,
                 outputs_info: Sequence[tuple[Any, tuple[int, ...]]] | None = None,
                 **kwargs: Any) -> tuple[Any, ...]:
        """Run one node on `inputs` (arrays in the node's input order, or by name).
        `outputs_info`: (numpy dtype, shape) per output, where inference cannot tell.
        kwargs: `opset_version` (default: onnx's current one), and prepare's."""
        from onnx import helper

        opset = kwargs.pop("opset_version", None)
        names = [n for n in node.input if n]
        if isinstance(inputs, Mapping):
            arrays = {n: np.asarray(inputs[n]) for n in names}
        else:
            arrays = dict(zip(names, (np.asarray(x) for x in inputs)))
            if len(arrays) != len(names):
                raise ValueError(f"{len(inputs)} inputs given, the node takes {len(names)}")
        graph_inputs = [helper.make_tensor_value_info(
            n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in arrays.items()]
        outs = [o for o in node.output if o]
        if outputs_info is not None:
            graph_outputs = [helper.make_tensor_value_info(
                o, helper.np_dtype_to_tensor_dtype(np.dtype(t)), s)
                for o, (t, s) in zip(outs, outputs_info)]
        else:
            graph_outputs = [helper.make_tensor_value_info(o, 0, None) for o in outs]
        graph = helper.make_graph([node], f"{node.op_type}_node", graph_inputs, graph_outputs)
        opsets = [helper.make_opsetid(node.domain or "", opset)] if opset else None
        model = helper.make_model(graph, **({"opset_imports": opsets} if opsets else {}))
        model = _typed_outputs(model)
        with cls.prepare(model, device, **kwargs) as rep:
            return rep.run([arrays[n] for n in names])

    @classmethod
    def supports_device(cls, device: str) -> bool:
        from nnrt.client.core.device import find_device, registry
        from nnrt.client.core.errors import NNRtError

        try:
            find_device(registry().devices(), nnrt_device(device))
        except (NNRtError, LookupError, TypeError):
            return False
        return True


def _typed_outputs(model: Any) -> Any:
    """The model with its outputs' types and shapes from onnx's inference (run_node's
    outputs are declared untyped when the caller gives no outputs_info)."""
    from onnx import shape_inference

    try:
        inferred = shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # the import reports what inference cannot do, by node
        return model
    known = {v.name: v for v in [*inferred.graph.value_info, *inferred.graph.output]}
    for out in model.graph.output:
        if not out.type.tensor_type.elem_type and out.name in known:
            out.CopyFrom(known[out.name])
    return model
