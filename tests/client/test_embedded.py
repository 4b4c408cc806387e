"""The embedded default for applications: with no driver in NNRT_RUNTIME_DIR, the client
starts its own as child processes in a private directory, says so, and stops them at exit."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.devmgr.util import processes_using

APP = textwrap.dedent("""
    import numpy as np
    from nnrt.client import Model, list_devices
    devices = list_devices()
    print("devices", [d.name for d in devices])
    w = np.eye(3, dtype=np.float32) * 2
    with Model() as m:
        x = m.input([1, 3])
        m.outputs(m.fully_connected(x, w))
        with m.compile() as compiled, compiled.executor() as ex:
            print("result", ex.run(np.array([[1, 2, 3]], np.float32)).tolist())
""")


@pytest.mark.multiprocess
def test_an_application_with_no_driver_gets_embedded_ones(runtime_dir):
    env = {k: v for k, v in os.environ.items() if k != "NNRT_NO_EMBEDDED"}
    env["NNRT_RUNTIME_DIR"] = str(runtime_dir)
    proc = subprocess.run([sys.executable, "-c", APP], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "devices ['nnrt-cpu_nnrt_v2_1']" in proc.stdout
    assert "result [[2.0, 4.0, 6.0]]" in proc.stdout
    line = re.search(r"no driver in \S+: started the embedded default driver\(s\) cpu in (\S+)",
                     proc.stderr)
    assert line, proc.stderr
    private = Path(line.group(1))
    assert not private.exists()  # removed at exit
    assert processes_using(private) == []  # and its drivers stopped
    assert list(runtime_dir.iterdir()) == []


@pytest.mark.multiprocess
def test_switched_off_the_application_sees_no_device(runtime_dir):
    env = {**os.environ, "NNRT_RUNTIME_DIR": str(runtime_dir), "NNRT_NO_EMBEDDED": "1"}
    proc = subprocess.run([sys.executable, "-c", "from nnrt.client import capi\n"
                           "print(capi.OH_NNDevice_GetAllDevicesID())"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "(<OH_NN_ReturnCode.OH_NN_SUCCESS: 0>, [])"
