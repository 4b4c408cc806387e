"""sd_notify(3) without libsystemd, for the services systemd starts as `Type=notify`: the
device manager (devmgr/) and a driver run as its own unit (server/main.py).

`Notifier` sends datagrams to `$NOTIFY_SOCKET` ('@' = an abstract name); `keep_watchdog`
pings `WATCHDOG=1` every half `$WATCHDOG_USEC` only while the service says it serves, so that
systemd restarts a process that stopped serving (not only one that stopped answering), and
says why in `STATUS=`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Notifier:
    """sd_notify(3) without libsystemd: datagrams to $NOTIFY_SOCKET ('@' = abstract)."""

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        address = environ.get("NOTIFY_SOCKET", "")
        self._address: bytes | None = None
        self._sock: socket.socket | None = None
        if address.startswith(("/", "@")):
            self._address = (b"\0" + address[1:].encode()) if address[0] == "@" \
                else address.encode()
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        elif address:
            log.warning("NOTIFY_SOCKET=%r is not a unix socket address: not notifying", address)
        self.watchdog_interval: float | None = None
        usec, pid = environ.get("WATCHDOG_USEC", ""), environ.get("WATCHDOG_PID", "")
        if usec and (not pid or pid == str(os.getpid())):
            try:
                if int(usec) > 0:
                    self.watchdog_interval = int(usec) / 2e6
            except ValueError:
                log.warning("WATCHDOG_USEC=%r is not a number: no watchdog pings", usec)
        self._warned = False

    @property
    def enabled(self) -> bool:
        return self._sock is not None

    def send(self, *fields: str) -> None:
        if self._sock is None:
            return
        try:
            self._sock.sendto("\n".join(fields).encode(), self._address)
        except OSError as exc:
            if not self._warned:
                log.warning("cannot notify systemd: %s", exc)
                self._warned = True

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def keep_watchdog(notifier: Notifier, unhealthy: Callable[[], str | None],
                  stop: threading.Event, serving_status: str) -> None:
    """Until `stop`: WATCHDOG=1 every half watchdog interval while `unhealthy()` is None;
    none while it names a reason (systemd then restarts the service at WatchdogSec), with
    STATUS= saying why, and `serving_status` again when it recovers. Without a watchdog,
    only the STATUS= changes (every second)."""
    interval = notifier.watchdog_interval or 1.0
    said: str | None = None
    while not stop.wait(interval):
        try:
            reason = unhealthy()
        except Exception:  # the pinger must outlive any surprise; no ping then
            log.exception("health check for the systemd watchdog failed")
            continue
        if reason is None and notifier.watchdog_interval:
            notifier.send("WATCHDOG=1")
        if reason != said:
            notifier.send(f"STATUS={serving_status if reason is None else 'NOT SERVING: ' + reason}")
            said = reason
