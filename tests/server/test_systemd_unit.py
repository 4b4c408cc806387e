"""A driver as a systemd unit of its own (deploy/nnrt-driver@.service, Type=notify):
READY=1 once it serves, WATCHDOG=1 only while its own health says SERVING, STATUS= lines,
STOPPING=1 at a stop; `nnrt-driver --version`."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

import pytest

from nnrt.server.sd_notify import Notifier, keep_watchdog
from tests.conftest import start_driver
from tests.devmgr.util import NotifyListener
from tests.project.test_deploy import unit


@pytest.mark.multiprocess
def test_a_driver_notifies_ready_pings_while_serving_and_says_stopping(tmp_path, monkeypatch):
    listener = NotifyListener(tmp_path)
    monkeypatch.setenv("NOTIFY_SOCKET", listener.address)
    # a ping every 0.2 s (the listener's drain waits for 0.1 s of quiet)
    monkeypatch.setenv("WATCHDOG_USEC", "400000")
    driver = start_driver(tmp_path / "rt", "cpu")
    try:
        assert listener.wait_for("READY=1", timeout=10)
        assert listener.wait_for("WATCHDOG=1", timeout=10, count=3)
        fields = listener.fields()
        assert f"STATUS=serving nnrt-cpu on {driver.session_path}" in fields, fields
    finally:
        assert driver.stop(signal.SIGTERM) == 0
    assert listener.wait_for("STOPPING=1", timeout=10)
    listener.close()


def test_the_watchdog_pings_only_while_serving(tmp_path):
    """No ping while the health names a reason (systemd restarts the unit at WatchdogSec);
    STATUS= says why, and the serving status again once it recovers."""
    listener = NotifyListener(tmp_path)
    # a ping every 0.2 s (the listener's drain waits for 0.1 s of quiet)
    notifier = Notifier({"NOTIFY_SOCKET": listener.address, "WATCHDOG_USEC": "400000"})
    state = {"reason": None}
    stop = threading.Event()
    pinger = threading.Thread(target=keep_watchdog,
                              args=(notifier, lambda: state["reason"], stop, "serving cpu"))
    pinger.start()
    try:
        assert listener.wait_for("WATCHDOG=1", timeout=5, count=3)
        state["reason"] = "the session channel is wedged"
        assert listener.wait_for("STATUS=NOT SERVING: the session channel is wedged", timeout=5)
        before = listener.fields().count("WATCHDOG=1")  # the listener keeps every field
        stop.wait(1.0)  # several intervals without a ping
        assert listener.fields().count("WATCHDOG=1") == before
        state["reason"] = None
        assert listener.wait_for("STATUS=serving cpu", timeout=5)
        assert listener.wait_for("WATCHDOG=1", timeout=5, count=before + 1)
    finally:
        stop.set()
        pinger.join(5)
        notifier.close()
        listener.close()
    assert not pinger.is_alive()


def test_the_driver_unit_is_a_notify_service_run_by_its_own_user():
    service = unit("nnrt-driver@.service")["Service"]
    assert (service["Type"], service["NotifyAccess"]) == ("notify", "main")
    assert float(service["WatchdogSec"]) > 0
    assert service["User"] == "nnrt" and service["Group"] == "nnrt"


@pytest.mark.multiprocess
def test_the_driver_says_its_version():
    from nnrt.common.version import installed_version

    done = subprocess.run([sys.executable, "-m", "nnrt.server", "--version"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert done.stdout.strip() == f"nnrt-driver {installed_version()}"
