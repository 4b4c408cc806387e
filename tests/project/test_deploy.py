"""deploy/: the systemd units verify, agree with each other, with tmpfiles.d and sysusers.d,
name their commands without a hard-coded prefix, and the configuration the device manager's
unit names exists and parses."""

from __future__ import annotations

import configparser
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nnrt.devmgr.config import (DEFAULT_CONFIG_TEXT, SYSTEM_CONFIG, load_config,
                                       parse_config)

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
UNITS = ("nnrt-devmgr.service", "nnrt-driver@.service")
GPU_DROP_IN = DEPLOY / "nnrt-driver@gpu.service.d" / "gpu.conf"


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read_string((DEPLOY / name).read_text())
    return parser


def exec_starts(text: str) -> list[str]:
    return [line.split("=", 1)[1] for line in text.splitlines()
            if line.startswith("ExecStart=")]


@pytest.mark.multiprocess
def test_units_pass_systemd_analyze_verify(tmp_path):
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd; "
                    ".ci/run installs it in CI)")
    # The shipped units, unchanged, name bare commands that systemd finds in /usr/local/bin
    # or /usr/bin. This checkout's are in a venv: docs/operations.md's drop-in for an installation
    # elsewhere (`ExecStart=`, then the absolute command) points them there, as a user would.
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "nnrt").exists() and (bin_dir / "nnrt-driver").exists()
    for name in UNITS:
        text = (DEPLOY / name).read_text()
        (tmp_path / name).write_text(text)
        (command,) = exec_starts(text)
        drop_in = tmp_path / f"{name}.d"
        drop_in.mkdir()
        (drop_in / "prefix.conf").write_text(
            f"[Service]\nExecStart=\nExecStart={bin_dir}/{command}\n")
    done = subprocess.run(
        [tool, "verify", "--man=no", str(tmp_path / "nnrt-devmgr.service"),
         str(tmp_path / "nnrt-driver@cpu.service")],
        capture_output=True, text=True, timeout=60)
    ours = [line for line in (done.stdout + done.stderr).splitlines()
            if "nnrt" in line or str(tmp_path) in line]
    assert done.returncode == 0 and ours == [], done.stdout + done.stderr


def test_units_name_no_documentation_that_nothing_installs():
    """`Documentation=` must lead somewhere on the machine: neither pip nor these units install
    nnrt's docs, so a file:// path (once README.md under /usr/share/doc) would be a dead link in
    `systemctl status`; a unit names none until a page has a public address."""
    for name in (*UNITS, GPU_DROP_IN.relative_to(DEPLOY)):
        for line in (DEPLOY / name).read_text().splitlines():
            assert not line.startswith("Documentation="), (name, line)


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
    assert argv[:2] == ["nnrt", "devmgr"]
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
        # the model-cache key (hdi/cache_key.py reads $STATE_DIRECTORY): the two share it
        assert (service["StateDirectory"], service["StateDirectoryMode"]) == ("nnrt", "0700")


def test_ci_installs_systemd_analyze_only_when_missing():
    script = (ROOT / ".ci" / "run").read_text()
    assert "command -v systemd-analyze >/dev/null 2>&1 || wanted+=(systemd)" in script
    assert 'apt-get install -y --no-install-recommends "$package"' in script


def test_units_do_not_hard_code_where_the_commands_are():
    """Bare names (systemd's fixed search path: /usr/local/bin, /usr/bin, ...), the same in
    the template, the device manager's unit and the GPU driver's drop-in."""
    commands = {name: exec_starts((DEPLOY / name).read_text()) for name in UNITS}
    gpu = exec_starts(GPU_DROP_IN.read_text())
    assert gpu[0] == ""  # the drop-in resets the template's command, then gives its own
    every = [c for listed in commands.values() for c in listed] + [gpu[1]]
    assert len(every) == 3
    for argv in map(shlex.split, every):
        assert "/" not in argv[0] and argv[0] in ("nnrt", "nnrt-driver"), argv
    for path in DEPLOY.rglob("*"):
        if path.is_file():
            settings = [line for line in path.read_text().splitlines()
                        if not line.lstrip().startswith("#")]
            assert not [line for line in settings if "/usr/local/bin" in line], path
    # and the pip-installed scripts carry those names
    import tomllib
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert {"nnrt", "nnrt-driver"} <= set(scripts)


@pytest.mark.multiprocess
def test_sysusers_creates_the_user_and_group_the_units_and_tmpfiles_use(tmp_path):
    entries = [line.split(maxsplit=4) for line in
               (DEPLOY / "nnrt-sysusers.conf").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    # a system user and its group, ids from the system range, home the state directory
    assert entries == [["u", "nnrt", "-", '"NNRt', 'drivers" /var/lib/nnrt']]
    users = {unit(name)["Service"]["User"] for name in UNITS}
    groups = {unit(name)["Service"]["Group"] for name in UNITS}
    tmpfiles = [line.split() for line in (DEPLOY / "nnrt.conf").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    assert users == {t[3] for t in tmpfiles} == {"nnrt"}  # not root
    assert groups == {t[4] for t in tmpfiles} == {"nnrt"}
    for name in UNITS:
        assert "nnrt-sysusers.conf" in (DEPLOY / name).read_text()  # says where the group is from
    tool = shutil.which("systemd-sysusers")
    if tool is None:
        pytest.skip("systemd-sysusers is not installed")
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    as_root = os.geteuid() == 0  # writing a root's /etc/group needs root (chown)
    done = subprocess.run([tool, f"--root={root}", *([] if as_root else ["--dry-run"]),
                           str(DEPLOY / "nnrt-sysusers.conf")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Creating group 'nnrt'" in done.stdout + done.stderr
    assert "Creating user 'nnrt'" in done.stdout + done.stderr
    if as_root:
        (line,) = (root / "etc" / "group").read_text().splitlines()
        assert line.startswith("nnrt:x:")
        (user,) = (root / "etc" / "passwd").read_text().splitlines()
        assert user.startswith("nnrt:x:") and user.split(":")[5] == "/var/lib/nnrt"
