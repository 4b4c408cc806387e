"""A real driver process with a few of its hooks replaced, for the conditions no option of
the driver produces (a device lost while its process lives, a device without a model
cache): `start_patched_driver(runtime, name, PATCH, kind)` runs `PATCH` (Python source) in
the new process before the driver's main, as `python -c`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from grpc_health.v1 import health_pb2

from nnrt.common.runtime_dir import grpc_socket, session_socket
from nnrt.devmgr.probes import health_status
from tests.conftest import RunningDriver

START_S = 30


def start_patched_driver(runtime: Path, name: str, patch: str, kind: str = "cpu",
                         *args: str, **env: str) -> RunningDriver:
    """The driver `kind` named `name`, `patch` run first; waits (bounded) until it serves."""
    runtime.mkdir(parents=True, exist_ok=True)
    log_path = runtime.parent / f"{name}-{time.monotonic_ns()}.log"
    source = f"{patch}\nimport sys\nfrom nnrt.server.main import main\nsys.exit(main())\n"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", source, kind, "--name", name, "--runtime-dir", str(runtime),
             *args], env={**os.environ, **env},
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    driver = RunningDriver(proc, runtime, name, log_path)
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"driver exited with {proc.returncode}:\n{driver.log()}")
        if session_socket(runtime, name).exists() and health_status(
                grpc_socket(runtime, name)) == health_pb2.HealthCheckResponse.SERVING:
            return driver
        time.sleep(0.05)
    proc.kill()
    proc.wait(5)
    raise RuntimeError(f"driver not ready within {START_S} s:\n{driver.log()}")
