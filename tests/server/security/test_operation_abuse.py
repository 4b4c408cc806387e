"""Operations a client must not be able to abuse (issue 25, items 7-9).

Drivers start isolated from the caller's working directory (`python -P`, cwd /); health
means "this process serves" (a long or hung run is its caller's business, a stopped process
is still found); the device manager's control socket checks who asks (SO_PEERCRED), bounds
its threads and backs off at the fd limit; the admin service follows --allow-uid and shows
a non-privileged caller only its own sessions' pids.

Tests run as root; "another user" is uid 65534 (nobody) in group 0, which the 0660 sockets
of a root-owned runtime directory under /tmp let in.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import grpc
import pytest
from google.protobuf import empty_pb2
from grpc_health.v1 import health_pb2

from nnrt.client.core.driver import DriverClient
from nnrt.client.core.embedded import EmbeddedDrivers
from nnrt.common.devmgr_ctl import MAX_CONNECTIONS, ctl_path, request
from nnrt.common.errors import HDF_ERR_NOPERM
from nnrt.common.runtime_dir import grpc_socket
from nnrt.protos import admin_pb2, admin_pb2_grpc
from nnrt.devmgr.config import ConfigError, parse_config

from tests.conftest import health_status, start_driver, wait_until
from tests.devmgr.util import FAST_CONFIG, Devmgr, pid_alive, start_devmgr
from tests.helpers.admin import set_faults
from tests.helpers.hdi_models import add_model, io

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                                reason="needs root and setpriv(1) to act as another user")

SERVING = health_pb2.HealthCheckResponse.SERVING
OTHER = 65534  # nobody
PLANTED = ("argparse", "numpy")


@pytest.fixture
def base() -> Iterator[Path]:
    """A root-owned 0755 directory under /tmp that uid 65534 may enter."""
    path = Path(tempfile.mkdtemp(prefix="nnrt-ops-", dir="/tmp"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def plant(directory: Path) -> Path:
    """Modules named like the driver's imports in `directory`: imported, each notes it in
    the marker file and hands over to the real module (so a driver would still work)."""
    directory.mkdir(parents=True, exist_ok=True)
    marker = directory / "PLANTED-CODE-RAN"
    for name in PLANTED:
        (directory / f"{name}.py").write_text(textwrap.dedent(f"""\
            import os, sys, importlib
            with open({str(marker)!r}, "a") as f:
                f.write(f"{name} in pid {{os.getpid()}}\\n")
            here = os.path.dirname(os.path.abspath(__file__))
            del sys.modules[__name__]
            sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
            sys.modules[__name__] = importlib.import_module(__name__)
            """))
    return marker


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` (all its threads) in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def threads_of(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def as_other(function, *args, uid: int = OTHER):
    """Run `function(*args)` (plain sockets only) in a forked child as `uid`, group 0; its
    JSON-able result."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no grpc, no threads of the parent's used
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(0)
            os.setuid(uid)
            result = {"value": function(*args)}
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            result = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(write_end, json.dumps(result).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    result = json.loads(data)
    assert "error" not in result, result
    return result["value"]


def start_isolated_devmgr(where: Path, config: str, cwd: Path) -> Devmgr:
    """`nnrt devmgr` started from `cwd` as its console script would be (no cwd on sys.path:
    the script's own isolation is not what is tested here, its drivers' is)."""
    where.mkdir(parents=True, exist_ok=True)
    config_path = where / "devmgr.toml"
    config_path.write_text(config)
    log_path = where / "devmgr.log"
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "nnrt.devmgr", "--config", str(config_path),
             "--runtime-dir", str(where / "rt")], cwd=cwd, env=env,
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    return Devmgr(proc, where / "rt", config_path, log_path)


# -- 7. drivers start isolated from the caller's working directory -----------------------------


@pytest.mark.multiprocess
def test_planted_modules_in_the_applications_cwd_do_not_run_in_an_embedded_driver(
        tmp_path, monkeypatch):
    marker = plant(tmp_path / "app")
    monkeypatch.chdir(tmp_path / "app")
    embedded = EmbeddedDrivers(("cpu",))
    directory = embedded.start()
    try:
        (pid,) = embedded.pids
        assert os.readlink(f"/proc/{pid}/cwd") == "/"
        with DriverClient.connect("cpu", directory, timeout=5) as client:  # it works
            model_id = add_model().prepare(client)
            _, x = client.allocate_buffer(16)
            _, y = client.allocate_buffer(16)
            assert client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=10).returnCode == 0
            x.close(), y.close()
    finally:
        embedded.stop()
    assert not marker.exists(), marker.read_text()


@pytest.mark.multiprocess
def test_planted_modules_in_the_devmgrs_cwd_do_not_run_in_its_drivers(tmp_path, devmgrs):
    marker = plant(tmp_path / "cwd")
    devmgr = start_isolated_devmgr(tmp_path / "dm", FAST_CONFIG + """
        [drivers.cpu]
        kind = "cpu"
        standby = true
    """, cwd=tmp_path / "cwd")
    devmgrs.append(devmgr)
    drivers = devmgr.wait_drivers(lambda ds: ds["cpu"]["state"] == "ready"
                                  and ds["cpu"]["standby"]["state"] == "ready", "spare ready")
    for pid in (drivers["cpu"]["pid"], drivers["cpu"]["standby"]["pid"]):
        assert os.readlink(f"/proc/{pid}/cwd") == "/"
        assert "-P" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1].decode()
    assert health_status(grpc_socket(devmgr.runtime_dir, "cpu")) == SERVING
    assert devmgr.stop() == 0
    assert not marker.exists(), marker.read_text()


def test_a_relative_path_in_a_drivers_options_is_refused():
    with pytest.raises(ConfigError, match=r"--spec npu\.toml: give an absolute path "
                                          r"\(drivers start in /\)"):
        parse_config('[drivers.npu]\nkind = "accel"\noptions = { spec = "npu.toml" }\n')


# -- 8. health is the process's, not a run's ---------------------------------------------------


@pytest.mark.multiprocess
def test_a_hung_run_keeps_the_driver_serving_and_the_devmgr_does_not_restart_it(
        tmp_path, devmgrs):
    # FAST_CONFIG: probes every 0.2 s, 2 misses restart; the driver's stall timeout 2 s
    devmgr = start_devmgr(tmp_path, FAST_CONFIG + """
        [drivers.cpu]
        kind = "cpu"
        options = { fault-injection = true, grace = 1 }
    """)
    devmgrs.append(devmgr)
    before = devmgr.wait_ready("cpu")["cpu"]
    path = grpc_socket(devmgr.runtime_dir, "cpu")
    client = DriverClient.connect("cpu", devmgr.runtime_dir, timeout=5)
    try:
        model_id = add_model().prepare(client)
        _, x = client.allocate_buffer(16)
        _, y = client.allocate_buffer(16)
        assert set_faults(SimpleNamespace(grpc_path=path), runHang=True).returnCode == 0
        hung = threading.Thread(target=lambda: pytest.raises(
            TimeoutError, client.run, model_id, [io(x, 4)], [io(y, 4)], timeout=0.3))
        hung.start()
        seen = []
        started = time.monotonic()
        while time.monotonic() - started < 4.5:  # past the 2 s stall and two probes
            seen.append(health_status(path, timeout=1.0))
            time.sleep(0.1)
        hung.join(5)
        assert set(seen) == {SERVING}, seen
        after = devmgr.drivers()["cpu"]
        assert (after["pid"], after["restarts"], after["state"]) == \
               (before["pid"], 0, "ready"), devmgr.log()
        # Another session is served meanwhile.
        with DriverClient.connect("cpu", devmgr.runtime_dir, timeout=5) as other:
            assert add_model().prepare(other) > 0
        log = devmgr.log()
        assert "runs in flight without progress for 2." in log and "still SERVING" in log, log
        assert "NOT_SERVING" not in log and "health probe failed" not in log, log
        x.close(), y.close()
    finally:
        client.close()
    assert devmgr.stop() == 0


@pytest.mark.multiprocess
def test_a_stopped_driver_is_still_found_unhealthy_and_restarted(tmp_path, devmgrs):
    devmgr = start_devmgr(tmp_path, FAST_CONFIG + """
        [drivers.cpu]
        kind = "cpu"
    """)
    devmgrs.append(devmgr)
    pid = devmgr.wait_ready("cpu")["cpu"]["pid"]
    os.kill(pid, signal.SIGSTOP)
    stopped = time.monotonic()
    assert wait_until(lambda: not pid_alive(pid), 10), devmgr.log()
    assert time.monotonic() - stopped < 5
    after = devmgr.wait_ready("cpu")["cpu"]
    assert after["pid"] != pid and after["restarts"] == 1
    assert "driver cpu: not answering health probes: killing pid" in devmgr.log()
    assert devmgr.stop() == 0


# -- 9. the control socket: who asks, how many at once, at the fd limit ------------------------


def _ask(directory: str, message: dict) -> dict:
    return request(Path(directory), message, timeout=5)


@pytest.mark.multiprocess
def test_the_control_socket_lets_only_root_and_its_user_control_drivers(base, devmgrs):
    devmgr = start_devmgr(base, FAST_CONFIG + """
        [drivers.cpu]
        kind = "cpu"
    """)
    devmgrs.append(devmgr)
    pid = devmgr.wait_ready("cpu")["cpu"]["pid"]
    rt = str(devmgr.runtime_dir)
    for command in ("stop", "restart", "start"):
        answer = as_other(_ask, rt, {"cmd": command, "driver": "cpu"})
        assert answer["ok"] is False and answer["code"] == "not-permitted", answer
        assert f"uid {OTHER} may not {command} drivers: only root" in answer["error"]
    status = as_other(_ask, rt, {"cmd": "status"})  # read-only: the group may
    assert status["ok"] and status["drivers"][0]["pid"] == pid
    assert devmgr.drivers()["cpu"]["pid"] == pid  # nothing was stopped
    assert f"control socket: stop refused for uid {OTHER}" in devmgr.log()
    # root may
    assert request(devmgr.runtime_dir, {"cmd": "restart", "driver": "cpu"})["ok"]
    devmgr.wait_drivers(lambda ds: ds["cpu"]["pid"] not in (None, pid)
                        and ds["cpu"]["state"] == "ready", "restarted by root")
    assert devmgr.stop() == 0


@pytest.mark.multiprocess
def test_a_connection_flood_holds_a_bounded_number_of_threads(tmp_path, devmgrs):
    devmgr = start_devmgr(tmp_path, "[devmgr]\nstop_timeout = 5\n")  # no drivers
    devmgrs.append(devmgr)
    assert wait_until(lambda: ctl_path(devmgr.runtime_dir).exists(), 20), devmgr.log()
    assert devmgr.status()["ok"]
    idle = threads_of(devmgr.proc.pid)
    flood, busy, most = [], 0, idle
    try:
        for _ in range(200):  # connections that never send their request
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.setblocking(False)
            try:
                conn.connect(str(ctl_path(devmgr.runtime_dir)))
            except BlockingIOError:  # the listen queue is full for a moment: a refusal too
                conn.close()
                time.sleep(0.01)
                continue
            flood.append(conn)
            most = max(most, threads_of(devmgr.proc.pid))
        for conn in flood:
            conn.setblocking(False)
            try:
                busy += b'"code": "busy"' in conn.recv(4096)
            except BlockingIOError:
                pass
        most = max(most, threads_of(devmgr.proc.pid))
    finally:
        for conn in flood:
            conn.close()
    assert most <= idle + MAX_CONNECTIONS, (idle, most)
    assert busy >= len(flood) - MAX_CONNECTIONS - 16 > 0, (busy, len(flood))  # the rest queued
    # the held slots free themselves (the request timeout): served again
    assert wait_until(lambda: request(devmgr.runtime_dir, {"cmd": "status"}).get("ok"), 10)
    assert wait_until(lambda: threads_of(devmgr.proc.pid) <= idle, 10)
    assert "control requests at once" in devmgr.log() or "the limit: refused" in devmgr.log()
    assert devmgr.stop() == 0


@pytest.mark.multiprocess
def test_the_control_socket_does_not_spin_at_the_fd_limit(tmp_path, devmgrs):
    devmgr = start_devmgr(tmp_path, "[devmgr]\nstop_timeout = 5\n")  # no drivers
    devmgrs.append(devmgr)
    assert wait_until(lambda: ctl_path(devmgr.runtime_dir).exists(), 20), devmgr.log()
    pid = devmgr.proc.pid
    assert devmgr.status()["ok"]
    limits = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    pending = []
    try:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (len(os.listdir(f"/proc/{pid}/fd")),
                                                       limits[1]))
        for _ in range(8):  # they wait in the listen queue: the socket stays readable
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(str(ctl_path(devmgr.runtime_dir)))
            pending.append(conn)
        assert wait_until(lambda: "control socket: accept() failed" in devmgr.log(), 5), \
            devmgr.log()
        cpu = cpu_seconds(pid)
        time.sleep(2.0)
        spent = cpu_seconds(pid) - cpu
        assert spent < 0.3, f"{spent:.2f} s of CPU in 2 s at the fd limit"
        assert devmgr.log().count("control socket: accept() failed") == 1  # once an episode
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, limits)
        for conn in pending:
            conn.close()
    assert wait_until(lambda: request(devmgr.runtime_dir, {"cmd": "status"}).get("ok"), 5)
    assert wait_until(lambda: "control socket: accepting again" in devmgr.log(), 5)
    assert devmgr.stop() == 0


# -- 9. the admin service follows --allow-uid ---------------------------------------------------


ADMIN_AS_OTHER = """
import json, sys
from pathlib import Path
import grpc
from google.protobuf import empty_pb2
from nnrt.client.core.driver import DriverClient
from nnrt.protos import admin_pb2, admin_pb2_grpc
directory, with_session = Path(sys.argv[1]), sys.argv[2] == "1"
client = DriverClient.connect("cpu", directory, timeout=5) if with_session else None
metadata = client._metadata if client else ()
with grpc.insecure_channel(f"unix:{directory}/cpu.sock") as channel:
    stub = admin_pb2_grpc.NnrtAdminStub(channel)
    status = stub.GetStatus(empty_pb2.Empty(), metadata=metadata, timeout=5)
    faults = stub.SetFaults(admin_pb2.FaultConfig(runDelayMs=1), metadata=metadata, timeout=5)
print(json.dumps({"code": status.returnCode, "faults": faults.returnCode,
                  "sessions": [[s.sessionId, s.peerPid] for s in status.sessions],
                  "uids": [u.uid for u in status.uids],
                  "own": client.session_id if client else None}))
"""


def _admin_as(uid: int, directory: Path, with_session: bool) -> dict:
    done = subprocess.run(
        ["setpriv", "--reuid", str(uid), "--regid", "0", "--clear-groups", sys.executable,
         "-P", "-c", ADMIN_AS_OTHER, str(directory), "1" if with_session else "0"],
        capture_output=True, text=True, timeout=30, cwd="/")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.multiprocess
def test_the_admin_service_follows_allow_uid_and_shows_only_the_callers_pids(base):
    rt = base / "rt"
    driver = start_driver(rt, "cpu", "--allow-uid", "0", "--allow-uid", str(OTHER),
                          "--fault-injection")
    try:
        with DriverClient.connect("cpu", rt, timeout=5) as ours:
            # a plain call (no session) on a restricted driver: refused, root's too
            with grpc.insecure_channel(f"unix:{driver.grpc_path}") as channel:
                stub = admin_pb2_grpc.NnrtAdminStub(channel)
                assert stub.GetStatus(empty_pb2.Empty(), timeout=5).returnCode == \
                    HDF_ERR_NOPERM
                full = stub.GetStatus(empty_pb2.Empty(), metadata=ours._metadata, timeout=5)
            assert full.returnCode == 0
            assert [(s.sessionId, s.peerPid) for s in full.sessions] == \
                   [(ours.session_id, os.getpid())]
            # a uid the driver does not serve: no session, refused
            stranger = _admin_as(OTHER - 1, rt, with_session=False)
            assert (stranger["code"], stranger["faults"]) == (HDF_ERR_NOPERM, HDF_ERR_NOPERM)
            # an allowed user: its own pid, not root's; no faults
            other = _admin_as(OTHER, rt, with_session=True)
            assert other["code"] == 0 and other["faults"] == HDF_ERR_NOPERM
            pids = dict(map(tuple, other["sessions"]))
            assert pids[ours.session_id] == 0  # root's session: listed, its pid not shown
            assert other["uids"] == [OTHER]  # what its own uid holds, not root's
            assert sorted(u.uid for u in full.uids) == [0]  # root sees every uid's
            assert pids[other["own"]] not in (0, os.getpid())
            # root (a session of its own) may set faults
            assert set_faults_with(driver, ours._metadata) == 0
        log = driver.log()
        assert "GetStatus refused: HDF_ERR_NOPERM: no session named" in log, log
        assert f"SetFaults refused (session {other['own']}, uid {OTHER})" in log, log
    finally:
        driver.stop()


def set_faults_with(driver, metadata) -> int:
    with grpc.insecure_channel(f"unix:{driver.grpc_path}") as channel:
        return admin_pb2_grpc.NnrtAdminStub(channel).SetFaults(
            admin_pb2.FaultConfig(runDelayMs=1), metadata=metadata, timeout=5).returnCode


ADMIN_TOKEN_AS_OTHER = """
import sys
from pathlib import Path
from nnrt.common.runtime_dir import admin_metadata, admin_token_path
directory = Path(sys.argv[1])
try:
    admin_token_path(directory, "cpu").read_text()
    print("read")
except OSError:
    print("refused", admin_metadata(directory, "cpu"))
"""


@pytest.mark.multiprocess
def test_root_and_the_drivers_user_ask_a_restricted_driver_with_its_admin_token(base, capsys):
    """`nnrt status`, `nnrt fault` and the device manager's scrape carry the admin token
    (a 0600 file of the driver's user): root sees a driver that serves only other uids;
    a forged token is a plain call; the token goes with a clean stop."""
    from nnrt.client import cli
    from nnrt.common.runtime_dir import (ADMIN_METADATA_KEY, admin_metadata,
                                         admin_token_path)
    from nnrt.devmgr.metrics import driver_status

    rt = base / "rt"
    driver = start_driver(rt, "cpu", "--allow-uid", str(OTHER), "--fault-injection")
    token = admin_token_path(rt, "cpu")
    try:
        info = token.stat()
        assert info.st_mode & 0o777 == 0o600 and info.st_uid == os.geteuid()
        metadata = admin_metadata(rt, "cpu")
        assert metadata and metadata[0][0] == ADMIN_METADATA_KEY
        with grpc.insecure_channel(f"unix:{driver.grpc_path}") as channel:
            stub = admin_pb2_grpc.NnrtAdminStub(channel)
            forged = ((ADMIN_METADATA_KEY, "0" * 64),)
            assert stub.GetStatus(empty_pb2.Empty(), metadata=forged, timeout=5).returnCode \
                == HDF_ERR_NOPERM
            status = stub.GetStatus(empty_pb2.Empty(), metadata=metadata, timeout=5)
            assert status.returnCode == 0 and status.pid == driver.pid
        assert set_faults_with(driver, metadata) == 0
        assert set_faults_with(driver, forged) == HDF_ERR_NOPERM
        scraped = driver_status(rt, "cpu")  # the device manager's metrics
        assert scraped is not None and scraped.pid == driver.pid
        assert cli.main(["status", "--runtime-dir", str(rt), "--json"]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert any(d.get("pid") == driver.pid for d in shown["drivers"]), shown
        # another uid cannot read it (and so has nothing to send)
        done = subprocess.run(
            ["setpriv", "--reuid", str(OTHER), "--regid", "0", "--clear-groups",
             sys.executable, "-P", "-c", ADMIN_TOKEN_AS_OTHER, str(rt)],
            capture_output=True, text=True, timeout=30, cwd="/")
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["refused", "()"], done.stdout
    finally:
        assert driver.stop() == 0
    assert not token.exists()
