"""Clients that load a driver process: `Steady` (the well-behaved one), the `FLOODER` script
(Runs sent without waiting), the driver's RSS, and the checkout's root to run scripts in."""

from __future__ import annotations

import textwrap
import threading
import time
from pathlib import Path

import numpy as np

from nnrt.common.errors import NNRT_SUCCESS
from tests.helpers.hdi_models import add_model, io


ROOT = Path(__file__).resolve().parent.parent.parent


class Steady:
    """A well-behaved client: the add model run in a loop on a thread of its own, every
    result checked, the longest run timed."""

    def __init__(self, driver) -> None:
        self.client = driver.client()
        self.model = add_model().prepare(self.client)
        _, self.x = self.client.allocate_buffer(16)
        _, self.y = self.client.allocate_buffer(16)
        self.runs = 0
        self.failures: list[object] = []
        self.longest = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="steady", daemon=True)

    def run_once(self) -> None:
        value = float(self.runs % 1000)
        self.x.array(np.float32, [4])[:] = value
        started = time.monotonic()
        reply = self.client.run(self.model, [io(self.x, 4)], [io(self.y, 4)], timeout=10)
        self.longest = max(self.longest, time.monotonic() - started)
        if reply.returnCode != NNRT_SUCCESS:
            self.failures.append(f"run {self.runs}: returnCode {reply.returnCode}")
        elif not np.array_equal(self.y.array(np.float32, [4]), value + np.arange(4)):
            self.failures.append(f"run {self.runs}: wrong result {self.y.array(np.float32, [4])}")
        self.runs += 1

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception as exc:  # noqa: BLE001 - reported by check()
                self.failures.append(exc)
            time.sleep(0.002)

    def check(self, min_runs: int = 1) -> None:
        assert not self.failures, self.failures[:5]
        assert self.runs >= min_runs

    def __enter__(self) -> Steady:
        self.run_once()  # warm: the first run compiles nothing later runs would wait for
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(15)
        self.x.close(), self.y.close()
        self.client.close()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


FLOODER = textwrap.dedent("""
    import json, queue, sys, threading
    from collections import Counter
    from pathlib import Path
    from nnrt.client.core.driver import DriverClient, Waiter, run_request_bytes
    from nnrt.protos import hdi_pb2 as pb
    from nnrt.common import session_channel as channel
    from tests.helpers.hdi_models import add_model, io

    client = DriverClient.connect(sys.argv[2], Path(sys.argv[1]))
    model = add_model().prepare(client)
    _, x = client.allocate_buffer(16)
    _, y = client.allocate_buffer(16)
    data = run_request_bytes(model, [io(x, 4)], [io(y, 4)])
    # Run packets as fast as the socket takes them, never waiting for a reply before the
    # next; a second thread waits for them in order (and so reads the replies meanwhile).
    sent = queue.Queue()
    codes, unanswered = Counter(), 0

    def collect():
        global unanswered
        while (item := sent.get()) is not None:
            seq, waiter = item
            if client._await(seq, waiter, 20) and waiter.answered:
                codes[pb.RunReply.FromString(waiter.reply).returnCode] += 1
            else:
                unanswered += 1

    collector = threading.Thread(target=collect)
    collector.start()
    # argv[3] Runs, and on while the file argv[4] (when given) does not exist, up to 8x that
    least = int(sys.argv[3])
    until = Path(sys.argv[4]) if len(sys.argv) > 4 else None
    count = 0
    for _ in range(8 * least if until is not None else least):
        if until is not None and count >= least and count % 256 == 0 and until.exists():
            break
        seq = next(client._seq)
        waiter = Waiter()
        client._waiters[seq] = waiter
        try:
            header = channel.RUN_REQUEST.pack(seq, 10000, channel.NO_THINK_TIME)
            client._sock.send(channel.RUN + header + data)
        except OSError:
            break
        sent.put((seq, waiter))
        count += 1
    sent.put(None)
    collector.join(60)
    waiters = range(count)
    print(json.dumps({"sent": len(waiters), "codes": codes, "unanswered": unanswered,
                      "alive": client.alive}), flush=True)
""")
