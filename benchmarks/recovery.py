"""Crash and recovery timings, measured across real processes.

* driver cold start → ready: spawning `nnrt-driver cpu` until grpc.health.v1 says SERVING;
* SIGKILL → NN_OnServiceDied: a run in flight (the driver delays every Run by 200 ms, so
  one always is) is told its driver died;
* SIGKILL → first successful run again, side by side in one run under one device manager:
  **cold** (the device manager starts a new driver process: restart policy "always", no
  backoff) and **warm standby** (`standby = true`, turned on by a SIGHUP reload: a spare
  process already loaded takes over the name); each time the executor re-prepares from its
  kept cache and a RunSync succeeds with correct results. Before each kill the standby
  phase waits until a new spare is ready again, as an operator's driver would be.

The run in flight at each kill is slowed to 200 ms through the admin service's SetFaults on
the live process only, so the process that takes over (cold or spare) runs at full speed and
the recovery figure holds no injected delay. Medians over `--kills` kills per mode (default
10); the cold phase runs first, then the same device manager reloads with standby on.

    python benchmarks/recovery.py [--kills 10]
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc
import numpy as np
from grpc_health.v1 import health_pb2

import nnrt.client.core.device as devices_module
from nnrt.client import capi
from nnrt.protos import admin_pb2 as apb
from nnrt.protos import admin_pb2_grpc
from nnrt.devmgr.probes import health_status
from nnrt.common.devmgr_ctl import DevmgrUnavailable, request

from _common import float32_desc, u32  # benchmarks/_common.py (run as a script)

CONFIG = """\
[devmgr]
probe_interval = 0.2
[defaults]
restart = "always"
backoff_initial = 0.01
backoff_max = 0.01
crash_loop_failures = 1000
[drivers.cpu]
kind = "cpu"
options = {{ fault-injection = true }}
standby = {standby}
"""


def cold_starts(directory: Path, count: int) -> list[float]:
    times = []
    for i in range(count):
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "nnrt.server", "cpu", "--name", f"c{i}",
                                 "--runtime-dir", str(directory), "--log-level", "WARNING"])
        sock = directory / f"c{i}.sock"
        while health_status(sock) != health_pb2.HealthCheckResponse.SERVING:
            if time.perf_counter() - started > 30:
                raise RuntimeError("driver did not start")
            time.sleep(0.002)
        times.append(time.perf_counter() - started)
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
    return times


def driver_pid(directory: Path, old: int | None = None, spare: bool = False) -> int:
    """The pid of the ready driver (not `old`), once its spare is ready too if `spare`."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            (cpu,) = request(directory, {"cmd": "status"})["drivers"]
            if cpu["state"] == "ready" and cpu["pid"] != old and (
                    not spare or (cpu["standby"] or {}).get("state") == "ready"):
                return cpu["pid"]
        except DevmgrUnavailable:
            pass
        time.sleep(0.01)
    raise RuntimeError("the device manager did not bring the driver back")


def slow_runs(directory: Path, delay_ms: int) -> None:
    """Every Run of the live driver sleeps `delay_ms` first (the admin service's SetFaults):
    a run is surely in flight at the kill; the process that takes over runs at full speed."""
    with grpc.insecure_channel(f"unix:{directory / 'cpu.sock'}") as channel:
        reply = admin_pb2_grpc.NnrtAdminStub(channel).SetFaults(
            apb.FaultConfig(runDelayMs=delay_ms), timeout=5)
    if reply.returnCode != 0:
        raise RuntimeError(f"SetFaults refused: {reply.returnCode}")


def tensor(values: np.ndarray | None = None) -> capi.NN_Tensor:
    desc = float32_desc([4])
    t = capi.OH_NNTensor_Create(0, desc)
    capi.OH_NNTensorDesc_Destroy(desc)
    if values is not None:
        np.frombuffer(capi.OH_NNTensor_GetDataBuffer(t), np.float32)[:] = values
    return t


def add_one_executor() -> capi.OH_NNExecutor:
    model = capi.OH_NNModel_Construct()
    for _ in range(2):
        desc = float32_desc([4])
        capi.OH_NNModel_AddTensorToModel(model, desc)
        capi.OH_NNTensorDesc_Destroy(desc)
    capi.OH_NNModel_SetTensorData(model, 1, np.ones(4, np.float32), 16)
    desc = capi.OH_NNTensorDesc_Create()
    capi.OH_NNTensorDesc_SetDataType(desc, capi.OH_NN_INT8)
    capi.OH_NNModel_AddTensorToModel(model, desc)
    capi.OH_NNTensorDesc_Destroy(desc)
    capi.OH_NNModel_SetTensorType(model, 2, capi.OH_NN_ADD_ACTIVATIONTYPE)
    capi.OH_NNModel_SetTensorData(model, 2, np.zeros(1, np.int8), 1)
    desc = float32_desc([4])
    capi.OH_NNModel_AddTensorToModel(model, desc)
    capi.OH_NNTensorDesc_Destroy(desc)
    capi.OH_NNModel_AddOperation(model, capi.OH_NN_OPS_ADD, u32([2]), u32([0, 1]), u32([3]))
    capi.OH_NNModel_SpecifyInputsAndOutputs(model, u32([0]), u32([3]))
    assert capi.OH_NNModel_Finish(model) == 0
    compilation = capi.OH_NNCompilation_Construct(model)
    assert capi.OH_NNCompilation_Build(compilation) == 0
    executor = capi.OH_NNExecutor_Construct(compilation)
    capi.OH_NNCompilation_Destroy(compilation)
    capi.OH_NNModel_Destroy(model)
    return executor


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the refusals while the driver is down are expected
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "cold").mkdir()
        starts = cold_starts(tmp / "cold", 10)
        config = tmp / "devmgr.toml"
        config.write_text(CONFIG.format(standby="false"))
        runtime = tmp / "rt"
        devmgr = subprocess.Popen([sys.executable, "-m", "nnrt.client.cli", "devmgr", "--config",
                                   str(config), "--runtime-dir", str(runtime),
                                   "--log-level", "ERROR"], stderr=subprocess.DEVNULL)
        try:
            pid = driver_pid(runtime)
            os.environ["NNRT_RUNTIME_DIR"] = str(runtime)
            executor = add_one_executor()
            x = np.arange(4, dtype=np.float32)
            tin, tout = tensor(x), tensor()
            died_at: list[float] = []
            died = threading.Event()

            def on_died(user_data) -> None:
                died_at.append(time.perf_counter())
                died.set()

            capi.OH_NNExecutor_SetOnServiceDied(executor, on_died)
            capi.OH_NNExecutor_SetOnRunDone(executor, lambda *a: None)
            death_delays: list[float] = []
            recovery: dict[str, list[float]] = {"cold": [], "standby": []}
            for mode in ("cold", "standby"):
                spare = mode == "standby"
                if spare:  # the same device manager, standby turned on in place
                    config.write_text(CONFIG.format(standby="true"))
                    devmgr.send_signal(signal.SIGHUP)
                pid = driver_pid(runtime, spare=spare)
                for _ in range(args.kills):
                    died.clear()
                    slow_runs(runtime, 200)
                    assert capi.OH_NNExecutor_RunAsync(executor, [tin], 1, [tout], 1, 10_000,
                                                       0) == 0
                    time.sleep(0.05)  # the run is inside the driver's 200 ms delay
                    killed = time.perf_counter()
                    os.kill(pid, signal.SIGKILL)
                    assert died.wait(5)
                    death_delays.append(died_at[-1] - killed)
                    while capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) != 0:
                        if time.perf_counter() - killed > 30:
                            raise RuntimeError("no successful run within 30 s")
                        time.sleep(0.002)
                    recovery[mode].append(time.perf_counter() - killed)
                    out = np.frombuffer(capi.OH_NNTensor_GetDataBuffer(tout), np.float32)
                    assert np.array_equal(out, x + 1)
                    pid = driver_pid(runtime, old=pid, spare=spare)
            capi.OH_NNExecutor_Destroy(executor)
            capi.OH_NNTensor_Destroy(tin)
            capi.OH_NNTensor_Destroy(tout)
            devices_module.registry().close()
        finally:
            devmgr.send_signal(signal.SIGTERM)
            devmgr.wait(30)
    ms = lambda values: statistics.median(values) * 1000  # noqa: E731
    n = len(death_delays)
    print(f"driver cold start -> ready (median of {len(starts)}):            {ms(starts):8.1f} ms")
    print(f"SIGKILL -> NN_OnServiceDied (median of {n}):               "
          f"{ms(death_delays):8.1f} ms  (max {max(death_delays) * 1000:.1f})")
    for mode, label in (("cold", "cold restart"), ("standby", "warm standby")):
        values = recovery[mode]
        print(f"SIGKILL -> first successful run, {label} (median of {len(values)}): "
              f"{ms(values):8.1f} ms  (min {min(values) * 1000:.1f}, "
              f"max {max(values) * 1000:.1f})")
    ratio = statistics.median(recovery["cold"]) / statistics.median(recovery["standby"])
    print(f"cold restart / warm standby: {ratio:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
