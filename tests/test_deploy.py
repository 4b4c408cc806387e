"""deploy/: the systemd units verify, agree with each other and with tmpfiles.d, and the
configuration the device manager's unit names exists and parses."""

from __future__ import annotations

import configparser
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nnrt.server.devmgr_config import (DEFAULT_CONFIG_TEXT, SYSTEM_CONFIG, load_config,
                                       parse_config)

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
UNITS = ("nnrt-devmgr.service", "nnrt-driver@.service")
INSTALLED_BIN = "/usr/local/bin/"


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read_string((DEPLOY / name).read_text())
    return parser


def test_units_pass_systemd_analyze_verify(tmp_path):
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd; "
                    ".ci/run installs it in CI)")
    # The units name the installed commands; verify them against this checkout's.
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "nnrt").exists() and (bin_dir / "nnrt-driver").exists()
    for name in UNITS:
        text = (DEPLOY / name).read_text().replace(INSTALLED_BIN, f"{bin_dir}/")
        (tmp_path / name).write_text(text)
    done = subprocess.run(
        [tool, "verify", "--man=no", str(tmp_path / "nnrt-devmgr.service"),
         str(tmp_path / "nnrt-driver@cpu.service")],
        capture_output=True, text=True, timeout=60)
    ours = [line for line in (done.stdout + done.stderr).splitlines()
            if "nnrt" in line or str(tmp_path) in line]
    assert done.returncode == 0 and ours == [], done.stdout + done.stderr


def test_devmgr_unit_is_a_notify_service_with_watchdog_and_hardening():
    service = unit("nnrt-devmgr.service")["Service"]
    assert service["Type"] == "notify"
    assert service["Restart"] == "on-failure"
    assert int(service["WatchdogSec"]) > 0
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert service["RestrictAddressFamilies"] == "AF_UNIX"
    for key in ("NoNewPrivileges", "ProtectHome", "PrivateTmp"):
        assert service[key] == "yes", key
    assert service["ProtectSystem"] == "strict"
    # longer than the device manager's own SIGTERM → SIGKILL bound for its drivers
    stop_timeout = load_config(DEPLOY / "devmgr.toml").settings.stop_timeout
    assert int(service["TimeoutStopSec"]) > stop_timeout


def test_the_config_the_unit_names_exists_and_parses():
    argv = shlex.split(unit("nnrt-devmgr.service")["Service"]["ExecStart"])
    assert argv[:2] == [f"{INSTALLED_BIN}nnrt", "devmgr"]
    named = Path(argv[argv.index("--config") + 1])
    assert named == SYSTEM_CONFIG  # also the default when no --config is given
    shipped = DEPLOY / named.name  # installed from deploy/
    assert shipped.exists()
    assert f"{shipped.relative_to(ROOT)}" in (DEPLOY / "nnrt-devmgr.service").read_text()
    config = load_config(shipped)
    assert [(d.name, d.kind) for d in config.drivers] == [("cpu", "cpu")]
    # the built-in default (no file installed) is the same configuration
    builtin = parse_config(DEFAULT_CONFIG_TEXT)
    assert (builtin.settings, builtin.drivers) == (config.settings, config.drivers)


def test_units_and_tmpfiles_agree():
    devmgr, driver = unit("nnrt-devmgr.service")["Service"], unit("nnrt-driver@.service")["Service"]
    (entry,) = [line.split() for line in (DEPLOY / "nnrt.conf").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    kind, path, mode, user, group = entry[:5]
    assert (kind, path) == ("d", "/run/nnrt")
    for service in (devmgr, driver):
        assert service["Environment"] == f"NNRT_RUNTIME_DIR={path}"
        assert f"/run/{service['RuntimeDirectory']}" == path
        assert service["RuntimeDirectoryMode"] == mode
        assert service["RuntimeDirectoryPreserve"] == "yes"  # the two share the directory
        assert service["Group"] == group
        assert service.get("User", "root") == user
        assert service["RestrictAddressFamilies"] == "AF_UNIX"


def test_ci_installs_systemd_analyze_only_when_missing():
    script = (ROOT / ".ci" / "run").read_text()
    assert "command -v systemd-analyze" in script
    assert "apt-get install -y --no-install-recommends systemd" in script
