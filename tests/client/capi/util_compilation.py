"""Helpers for the compilation, model-cache, tensor and device tests.

Besides small model builders (through the C API itself), this module holds a test-only
device, `FeatureCpuDevice`: the CPU device plus the features the real CPU driver lacks —
model cache (ExportModelCache / PrepareModelFromModelCache), offline models, float16,
performance modes, priorities — switchable per driver process, and failure modes for the
capability queries. It runs in a driver process of its own (`start_feature_driver`), so
the cache round trips go across processes exactly as with a real driver.

`failing` names what is broken in a driver: the capability queries (`fp16_query`,
`perf_query`, `prio_query`, `cache_query`, `type_query`), `supported` (GetSupportedOperation
fails), `unsupported` (every node refused), `prepare`, `export`; `devtype=N` makes it report
HDI DeviceType N; `nofeatures` turns every feature off (a device like the CPU driver).

Test-only formats: a cache is two blobs, `MAGIC` and a pickle of the validated Graph; an
offline model is a serialised HDI Model without constants.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from nnrt.client import capi
from nnrt.common.hdi_model import IODesc, LoweredModel
from nnrt.client.core.device import device_id_of
from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import model_types_pb2 as mt
from nnrt.protos import node_attrs_pb2 as na
from tests.client.capi.util_capi import F32, W, Graph, desc
from tests.conftest import RunningDriver, health_status

REPO = Path(__file__).resolve().parents[3]
MAGIC = b"feature-cpu-cache-1"

ALL_FEATURES = ("cache", "offline", "float16", "performance", "priority")


# -- models through the C API ---------------------------------------------------------------------


def unsupported_model() -> capi.OH_NNModel:
    """A finished model whose one operation (SQRT) the CPU driver cannot compute."""
    g = Graph()
    x, y = g.tensor(F32, [4]), g.tensor(F32, [4])
    g.add_op(capi.OH_NN_OPS_SQRT, [x], [y])
    return g.finish([x], [y])


def lowered_add(w: np.ndarray = W) -> LoweredModel:
    """The same model as util_capi.add_model, built directly at the HDI level (no OH_NNModel)."""
    b = HdiModelBuilder("NNR_Model")
    x = b.input("Tensor: 0", np.float32, [2, 3])
    c = b.constant("Tensor: 1", np.asarray(w, np.float32))
    y = b.tensor("Tensor: 3", np.float32, [2, 3])
    b.node(na.NODE_TYPE_ADD_FUSION, [x, c], [y])
    b.mark_outputs(y)
    return LoweredModel(b, [IODesc("Tensor: 0", F32, [2, 3], 0)],
                        [IODesc("Tensor: 3", F32, [2, 3], 0)])


def offline_model_bytes() -> bytes:
    """The test device's offline format: a constant-free HDI Model (z = x + y, float32 [4])."""
    b = HdiModelBuilder("offline")
    x = b.input("x", np.float32, [4])
    y = b.input("y", np.float32, [4])
    z = b.tensor("z", np.float32, [4])
    b.node(na.NODE_TYPE_ADD_FUSION, [x, y], [z])
    b.mark_outputs(z)
    return b.model().SerializeToString()


def build(model, *, device_id: int = 0, cache: tuple[str, int] | None = None,
          extensions: dict[str, bytes] | None = None):
    """(code, compilation) of Construct + options + Build."""
    c = capi.OH_NNCompilation_Construct(model)
    assert c is not None
    assert capi.OH_NNCompilation_SetDevice(c, device_id) == 0
    if cache is not None:
        assert capi.OH_NNCompilation_SetCache(c, cache[0], cache[1]) == 0
    for name, value in (extensions or {}).items():
        assert capi.OH_NNCompilation_AddExtensionConfig(c, name, value, len(value)) == 0
    return capi.OH_NNCompilation_Build(c), c


def run_add(compilation, x: np.ndarray) -> np.ndarray:
    """Run a built [2, 3] → [2, 3] compilation once; the output as an array."""
    ex = capi.OH_NNExecutor_Construct(compilation)
    assert ex is not None
    dx, dy = desc([2, 3]), desc([2, 3])
    device = compilation.built.device.id  # tensors live in the memory of the model's device
    tx, ty = capi.OH_NNTensor_Create(device, dx), capi.OH_NNTensor_Create(device, dy)
    capi.OH_NNTensorDesc_Destroy(dx)
    capi.OH_NNTensorDesc_Destroy(dy)
    try:
        np.frombuffer(capi.OH_NNTensor_GetDataBuffer(tx), np.float32)[:] = x.reshape(-1)
        assert capi.OH_NNExecutor_RunSync(ex, [tx], 1, [ty], 1) == 0
        return np.frombuffer(capi.OH_NNTensor_GetDataBuffer(ty), np.float32).reshape(2, 3).copy()
    finally:
        capi.OH_NNTensor_Destroy(tx)
        capi.OH_NNTensor_Destroy(ty)
        capi.OH_NNExecutor_Destroy(ex)


# -- the feature device (runs inside a driver process) --------------------------------------------


def feature_id(name: str = "feature") -> int:
    """The device ID of the feature driver whose socket name is `name`."""
    return device_id_of(f"nnrt-{name}_nnrt_v2_1", name)


def _feature_device(name: str, features: set[str], failing: set[str]):
    """A device called `nnrt-<name>`: the CPU device's kernels (through the `Device`
    interface only) with `features` on and `failing` broken."""
    from nnrt.drivers.cpu.device import CpuDevice
    from nnrt.hdi.device import Device, PreparedModel
    from nnrt.common.errors import (
        NNRT_DEVICE_ERROR,
        NNRT_INVALID_MODEL_CACHE,
        NNRT_INVALID_PARAMETER,
        NNRT_NOT_SUPPORT,
        DriverError,
    )
    from nnrt.hdi.model_validation import build_graph

    log = logging.getLogger("feature-cpu")
    cpu = CpuDevice()

    class Caps:
        def _answer(self, query: str, feature: str) -> bool:
            if query in failing:
                raise DriverError(NNRT_DEVICE_ERROR, f"{query} broken on purpose")
            return feature in features

        float16 = property(lambda self: self._answer("fp16_query", "float16"))
        performance_mode = property(lambda self: self._answer("perf_query", "performance"))
        priority = property(lambda self: self._answer("prio_query", "priority"))
        model_cache = property(lambda self: self._answer("cache_query", "cache"))
        dynamic_input = True

    class FeaturePrepared(PreparedModel):
        """A CPU prepared model that can also export itself (the validated graph, pickled)."""

        def __init__(self, inner: PreparedModel, graph) -> None:
            super().__init__(inner.inputs, inner.outputs)
            self.inner = inner
            self.graph = graph

        def input_dim_ranges(self):
            return self.inner.input_dim_ranges()

        def static_output_shapes(self):
            return self.inner.static_output_shapes()

        def run(self, inputs, cancelled):
            return self.inner.run(inputs, cancelled)

        def close(self) -> None:
            self.inner.close()

        def export_cache(self) -> list[bytes]:
            if "export" in failing:
                raise DriverError(NNRT_DEVICE_ERROR, "export broken on purpose")
            if "cache" not in features:
                return super().export_cache()
            return [MAGIC, pickle.dumps(self.graph)]

    def compiled(graph, config) -> FeaturePrepared:
        return FeaturePrepared(cpu.prepare(graph, config), graph)

    class FeatureDevice(Device):
        kind = "feature-cpu"
        vendor = cpu.vendor
        version = cpu.version
        capabilities = Caps()

        @property
        def device_type(self) -> int:
            if "type_query" in failing:
                raise DriverError(NNRT_DEVICE_ERROR, "GetDeviceType broken on purpose")
            for quirk in failing:
                if quirk.startswith("devtype="):
                    return int(quirk.split("=", 1)[1])
            return ht.CPU

        def supported_operations(self, graph):
            if "supported" in failing:
                raise DriverError(NNRT_DEVICE_ERROR, "GetSupportedOperation broken on purpose")
            if "unsupported" in failing:
                return [False] * len(graph.nodes)
            return cpu.supported_operations(graph)

        def check_extensions(self, extensions: dict[str, bytes]) -> None:
            log.info("extensions: %s", sorted(extensions.items()))
            if "reject" in extensions:
                raise DriverError(NNRT_INVALID_PARAMETER, "extension 'reject' refused")

        def prepare(self, graph, config):
            if "prepare" in failing:
                raise DriverError(NNRT_DEVICE_ERROR, "PrepareModel broken on purpose")
            log.info("compiling %d nodes (float16=%s mode=%d priority=%d)", len(graph.nodes),
                     config.enable_float16, config.mode, config.priority)
            return compiled(graph, config)

        def prepare_from_cache(self, blobs, config):
            if "cache" not in features:
                return super().prepare_from_cache(blobs, config)
            if len(blobs) != 2 or blobs[0] != MAGIC:
                raise DriverError(NNRT_INVALID_MODEL_CACHE, "not a feature-cpu cache")
            try:
                graph = pickle.loads(blobs[1])
            except Exception as exc:
                raise DriverError(NNRT_INVALID_MODEL_CACHE, f"bad cache: {exc}")
            log.info("restored %d nodes from a cache", len(graph.nodes))
            return compiled(graph, config)

        def prepare_offline(self, blobs, config):
            if "offline" not in features:
                return super().prepare_offline(blobs, config)
            try:
                model = mt.Model.FromString(blobs[0])
            except Exception as exc:
                raise DriverError(NNRT_NOT_SUPPORT, f"not an offline model: {exc}")

            def no_constants(buffer):
                raise DriverError(NNRT_NOT_SUPPORT, "offline models carry no constants")

            log.info("offline model of %d bytes", len(blobs[0]))
            return compiled(build_graph(model, no_constants), config)

    device = FeatureDevice()
    device.name = f"nnrt-{name}"
    return device


def serve(runtime_dir: str, name: str, features: str, failing: str) -> None:
    """Entry point of a feature-driver process: serve until SIGTERM."""
    from nnrt.server.host import DriverHost

    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    broken = set(filter(None, failing.split(",")))
    enabled = set() if "nofeatures" in broken else set(filter(None, features.split(",")))
    device = _feature_device(name, enabled, broken)
    host = DriverHost(device, Path(runtime_dir), name)
    host.start()
    stop.wait()
    host.stop(2.0)
    logging.shutdown()
    os._exit(0)


def start_feature_driver(runtime_dir: Path, name: str = "feature",
                         features: Sequence[str] = ALL_FEATURES, failing: Sequence[str] = (),
                         timeout: float = 20.0) -> RunningDriver:
    """A feature-device driver process in `runtime_dir`, SERVING when this returns."""
    return start_feature_drivers(runtime_dir, {name: failing}, features, timeout)[name]


def start_feature_drivers(runtime_dir: Path, failing: dict[str, Sequence[str]],
                          features: Sequence[str] = ALL_FEATURES,
                          timeout: float = 20.0) -> dict[str, RunningDriver]:
    """Feature drivers (socket name → what is broken in it), started side by side."""
    runtime_dir.mkdir(parents=True, exist_ok=True)
    code = "import sys; from tests.client.capi.util_compilation import serve; serve(*sys.argv[1:])"
    drivers = {}
    for name, broken in failing.items():
        log_path = runtime_dir.parent / f"{name}-{time.monotonic_ns()}.log"
        with open(log_path, "wb") as log_file:
            proc = subprocess.Popen(
                [sys.executable, "-c", code, str(runtime_dir), name, ",".join(features),
                 ",".join(broken)],
                cwd=REPO, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        drivers[name] = RunningDriver(proc, runtime_dir, name, log_path)
    deadline = time.monotonic() + timeout
    waiting = dict(drivers)
    while waiting and time.monotonic() < deadline:
        for name, driver in list(waiting.items()):
            if driver.proc.poll() is not None:
                _stop_all(drivers)
                raise RuntimeError(f"feature driver {name} exited with {driver.proc.returncode}:"
                                   f"\n{driver.log()}")
            if driver.session_path.exists() and health_status(driver.grpc_path) == 1:
                del waiting[name]
        time.sleep(0.02)
    if waiting:
        _stop_all(drivers)
        raise RuntimeError(f"feature drivers {sorted(waiting)} not ready within {timeout} s")
    return drivers


def _stop_all(drivers: dict[str, RunningDriver]) -> None:
    for driver in drivers.values():
        if driver.proc.poll() is None:
            driver.proc.kill()
            driver.proc.wait(5)
