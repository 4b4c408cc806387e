"""The GPU driver and the NPU simulator under the device manager and systemd: the shipped
configuration with a driver of each kind parses, the device manager runs all three (gpu on
PoCL here), and the systemd drop-in gives the GPU driver its device nodes."""

from __future__ import annotations

import configparser
import shlex
from pathlib import Path

import pytest

from nnrt.devmgr.config import load_config, parse_config
from tests.devmgr.util import config_text, start_devmgr

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"


def test_the_shipped_gpu_configuration_parses():
    config = load_config(DEPLOY / "devmgr-all.toml")
    drivers = {d.name: d for d in config.drivers}
    assert {n: d.kind for n, d in drivers.items()} == {"cpu": "cpu", "gpu": "gpu",
                                                        "npu": "accel"}
    assert drivers["gpu"].option_args() == ["--cl-device", "gpu"]


@pytest.mark.multiprocess
def test_the_device_manager_runs_a_driver_of_each_kind(tmp_path):
    text = (DEPLOY / "devmgr-all.toml").read_text().replace('cl-device = "gpu"',
                                                            'cl-device = "any"')
    body = text[text.index("[drivers.cpu]"):]
    parse_config(config_text(body))  # still valid with the test's fast timings
    devmgr = start_devmgr(tmp_path, config_text(body))
    try:
        drivers = devmgr.wait_ready("cpu", "gpu", "npu")
        assert drivers["gpu"]["identity"]["device_type"] == "GPU"
        assert drivers["npu"]["identity"]["device_type"] == "ACCELERATOR"
        assert drivers["cpu"]["identity"]["device_type"] == "CPU"
        assert devmgr.stop() == 0
    finally:
        devmgr.kill_everything()


def test_the_systemd_drop_in_gives_the_gpu_driver_its_devices():
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    drop_in = DEPLOY / "nnrt-driver@gpu.service.d" / "gpu.conf"
    # systemd allows the same key twice (an empty ExecStart= resets the template's)
    text = drop_in.read_text()
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    exec_starts = [line.split("=", 1)[1] for line in lines if line.startswith("ExecStart=")]
    assert exec_starts[0] == ""  # resets the template's command
    argv = shlex.split(exec_starts[1])
    assert argv[:2] == ["nnrt-driver", "gpu"] and "--cl-device" in argv  # as the template
    parser.read_string("\n".join(line for line in lines if not line.startswith("ExecStart=")))
    assert parser["Service"]["PrivateDevices"] == "no"
