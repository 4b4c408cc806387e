"""`nnrt demo --recovery`: recovery you can watch.

A device manager is started in a private runtime directory with two CPU drivers, `cpu0` and
`cpu1` (the configuration is RECOVERY_CONFIG, shipped as deploy/devmgr-demo.toml for doing the
same by hand). Client processes (`--clients`, default 2) compile the demo's MLP and run it in a
loop, each run checked against numpy; a run that fails is retried until it succeeds or its
deadline passes (then it is lost). Then `cpu0` is hurt, one scenario after another:

    cold restart / SIGKILL    the device manager starts a new process (restart = "always")
    cold restart / SIGSTOP    a wedge: the device manager's health probes find it, kill it,
                              start a new process
    warm standby / SIGKILL    `standby = true` (a SIGHUP reload): the warm spare takes over
    warm standby / SIGSTOP    the wedge found, the spare takes over
    failover / SIGKILL        the clients' model compiled over ["cpu0", "cpu1"]: runs go on
                              on cpu1 at once, back on cpu0 once it serves again

Shown live, in ms from the signal: the death noticed (by the device manager's supervision,
or by a client whose run failed, whichever is first), the driver back (a restart or the
spare's takeover, as the device manager reports it ready under a new pid), the first good
run again (the first successful run that started after the signal), and the runs lost,
retried and wrong. A summary table at the end, or JSON (`--json`; the live lines then go to
stderr).

Clocks: every process stamps with CLOCK_MONOTONIC (time.monotonic), one clock for the whole
machine, so a client's stamps and the signal's are comparable. The device manager's state is
polled every POLL_INTERVAL: its figures carry that much resolution.

Bounded: every wait is bounded by the demo's deadline (`--timeout`, default
RECOVERY_TIMEOUT s); at the end, or at Ctrl-C or the deadline, the clients (their stdin is
their lifeline), the device manager (SIGTERM; its drivers follow their lifeline) and the
private directory go. The device manager also gets SIGTERM should this process die
(PR_SET_PDEATHSIG, set in the child before exec).

The client side runs in this module too (`python -m nnrt.client.commands.demo --client`):
it reads one mode per line on stdin (`single`: the model compiled for cpu0 alone; `hetero`:
over cpu0 then cpu1) and writes one JSON object per line on stdout.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import logging
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

log = logging.getLogger("nnrt.demo")

RECOVERY_TIMEOUT = 90.0  # s, the whole recovery demo; it takes ~15-30 s
POLL_INTERVAL = 0.005  # s between the device manager's status polls during a scenario
SCENARIO_TIMEOUT = 20.0  # s for one scenario to settle
RUN_TIMEOUT = 5.0  # s, one attempt of a client's run (a wedged driver holds it until killed)
RUN_DEADLINE = 15.0  # s a client retries one run before it counts as lost
RUN_PAUSE = 0.005  # s between a client's runs (and between the attempts of a failed one)
DEFAULT_CLIENTS = 2
LIVE, SPARE = "cpu0", "cpu1"  # the driver hurt; the other device for failover

# The device manager's configuration (deploy/devmgr-demo.toml is the same with standby on; a
# test keeps the two in step). Probes every 0.2 s, two missed: a wedge is found in < 1 s;
# restarts at once and without a crash-loop limit, since the demo kills on purpose.
RECOVERY_CONFIG = """\
[devmgr]
ready_timeout = 30
stop_timeout = 5
probe_interval = 0.2
probe_timeout = 0.3
probe_failures = 2

[defaults]
restart = "always"
backoff_initial = 0.05
backoff_max = 1
crash_loop_failures = 0
backoff_reset_after = 1

[drivers.cpu0]
kind = "cpu"
options = {{ fault-injection = true }}
standby = {standby}

[drivers.cpu1]
kind = "cpu"
"""

SCENARIOS: tuple[tuple[str, str, bool, str], ...] = (
    # (name, signal, standby, the clients' mode)
    ("cold restart", "SIGKILL", False, "single"),
    ("cold restart", "SIGSTOP", False, "single"),
    ("warm standby", "SIGKILL", True, "single"),
    ("warm standby", "SIGSTOP", True, "single"),
    ("failover", "SIGKILL", True, "hetero"),
)


def recovery_config(standby: bool) -> str:
    return RECOVERY_CONFIG.format(standby="true" if standby else "false")


class DemoFailed(RuntimeError):
    """The demo could not go on (a process did not start, a scenario did not settle)."""


# -- the client process -----------------------------------------------------------------------


def _emit(out: TextIO, lock: threading.Lock, **event: Any) -> None:
    with lock:
        out.write(json.dumps(event) + "\n")
        out.flush()


def client_main() -> int:
    """A client: the MLP compiled for cpu0 and for [cpu0, cpu1], run in a loop in the mode
    stdin last named; one JSON line per run (and per failed attempt) on stdout."""
    import numpy as np

    from nnrt.client.api import Model
    from nnrt.client.demo import mlp_weights, numpy_mlp

    logging.basicConfig(level=logging.ERROR)  # refusals while a driver is down are expected
    out, lock = sys.stdout, threading.Lock()
    sizes, batch = (16, 32, 10), 4
    w1, b1, w2, b2 = mlp_weights(sizes)
    x = np.random.default_rng(os.getpid()).standard_normal((batch, sizes[0])).astype(np.float32)
    want = numpy_mlp(x, w1, b1, w2, b2)
    mode = ["single"]
    ended = threading.Event()

    def read_modes() -> None:  # EOF (the demo gone): stop
        for line in sys.stdin:
            if line.strip() in ("single", "hetero"):
                mode[0] = line.strip()
        ended.set()

    threading.Thread(target=read_modes, daemon=True).start()
    with Model() as model:
        inputs = model.input([batch, sizes[0]])
        hidden = model.fully_connected(inputs, w1, b1, activation="relu")
        model.outputs(model.softmax(model.fully_connected(hidden, w2, b2)))
        with model.compile(LIVE) as single, model.compile([LIVE, SPARE]) as hetero, \
                single.executor() as on_one, hetero.executor() as on_two:
            executors = {"single": on_one, "hetero": on_two}
            for executor in executors.values():
                executor.run(x, timeout=RUN_TIMEOUT)
            _emit(out, lock, ev="ready", pid=os.getpid())
            while not ended.is_set():
                current = mode[0]
                _one_run(executors[current], current, x, want, ended, out, lock)
                ended.wait(RUN_PAUSE)
    return 0


def _one_run(executor: Any, mode: str, x: Any, want: Any, ended: threading.Event,
             out: TextIO, lock: threading.Lock) -> None:
    """One run of the application: retried until it succeeds or RUN_DEADLINE passes."""
    import numpy as np

    from nnrt.client.core.errors import NNRtError

    first = time.monotonic()
    attempts = 0
    while True:
        attempts += 1
        started = time.monotonic()
        try:
            got = executor.run(x, timeout=RUN_TIMEOUT)
        except NNRtError as exc:
            now = time.monotonic()
            _emit(out, lock, ev="error", t=now, mode=mode, error=str(exc)[:200])
            if now - first > RUN_DEADLINE or ended.is_set():
                _emit(out, lock, ev="run", mode=mode, first=first, start=started, end=now,
                      attempts=attempts, ok=False, wrong=False)
                return
            ended.wait(RUN_PAUSE)
            continue
        wrong = not np.allclose(got, want, rtol=1e-4, atol=1e-6)
        _emit(out, lock, ev="run", mode=mode, first=first, start=started, end=time.monotonic(),
              attempts=attempts, ok=True, wrong=wrong)
        return


# -- the demo's side -------------------------------------------------------------------------


@dataclass
class ScenarioResult:
    name: str
    signal: str
    pid: int
    noticed_ms: float | None = None
    noticed_by: str | None = None
    back_ms: float | None = None
    back_how: str | None = None  # restart | takeover | failover
    first_good_run_ms: float | None = None
    runs: int = 0
    retried: int = 0
    lost: int = 0
    wrong: int = 0

    @property
    def ok(self) -> bool:
        return (self.first_good_run_ms is not None and self.back_ms is not None
                and self.lost == 0 and self.wrong == 0)


@dataclass
class Client:
    proc: subprocess.Popen
    events: queue.Queue = field(default_factory=queue.Queue)
    ready: bool = False


def _die_with_parent() -> None:
    """In the device manager's child before exec: SIGTERM when the demo dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class RecoveryDemo:
    """The device manager, the client processes, the scenarios; `say` prints a live line."""

    def __init__(self, clients: int, deadline: float, say: Callable[[str], None]) -> None:
        self.client_count = clients
        self.deadline = deadline
        self.say = say
        self.directory = Path(tempfile.mkdtemp(prefix="nnrt-demo-"))
        self.runtime = self.directory / "rt"
        self.config = self.directory / "devmgr.toml"
        self.devmgr: subprocess.Popen | None = None
        self.clients: list[Client] = []
        self.totals = {"runs": 0, "retried": 0, "lost": 0, "wrong": 0}

    # -- bounds --------------------------------------------------------------------------

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise DemoFailed("the demo's deadline passed (--timeout)")
        return left

    def _wait_for(self, what: str, predicate: Callable[[], Any], bound: float,
                  interval: float = 0.02) -> Any:
        until = min(time.monotonic() + bound, self.deadline)
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() >= until:
                self._left()
                raise DemoFailed(f"{what}: not within {bound:g} s")
            time.sleep(interval)

    # -- the device manager --------------------------------------------------------------

    def start_devmgr(self) -> None:
        from nnrt.common.devmgr_cli import CHILD_CWD, module_argv

        self.config.write_text(recovery_config(standby=False))
        argv = [*module_argv("nnrt.devmgr"), "--config", str(self.config),
                "--runtime-dir", str(self.runtime), "--log-level", "WARNING"]
        with open(self.directory / "devmgr.log", "wb") as log_file:
            self.devmgr = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file,
                                           stderr=subprocess.STDOUT, cwd=CHILD_CWD,
                                           start_new_session=True,
                                           preexec_fn=_die_with_parent)
        self._wait_for("the drivers ready", lambda: self._all_ready(standby=False), 60)

    def status(self) -> dict[str, dict]:
        from nnrt.common.devmgr_ctl import DevmgrUnavailable, request

        if self.devmgr is not None and self.devmgr.poll() is not None:
            raise DemoFailed(f"the device manager exited ({self.devmgr.returncode}): "
                             f"{self._devmgr_log_tail()}")
        try:
            answer = request(self.runtime, {"cmd": "status"}, timeout=1.0)
        except DevmgrUnavailable:
            return {}
        return {d["name"]: d for d in answer.get("drivers", ())}

    def _all_ready(self, standby: bool) -> dict[str, dict] | None:
        drivers = self.status()
        if set(drivers) != {LIVE, SPARE} or any(d["state"] != "ready" for d in drivers.values()):
            return None
        if standby and (drivers[LIVE].get("standby") or {}).get("state") != "ready":
            return None
        return drivers

    def set_standby(self, standby: bool) -> None:
        """The configuration rewritten and reloaded (SIGHUP): the spare starts or goes."""
        text = recovery_config(standby)
        if self.config.read_text() != text:
            self.config.write_text(text)
            self.devmgr.send_signal(signal.SIGHUP)
            self.say(f"standby {'on' if standby else 'off'} for {LIVE} (config reloaded, SIGHUP)")

    def _devmgr_log_tail(self) -> str:
        try:
            lines = (self.directory / "devmgr.log").read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(lines[-3:]) or "(empty log)"

    # -- the clients ---------------------------------------------------------------------

    def start_clients(self) -> None:
        from nnrt.common.devmgr_cli import CHILD_CWD, module_argv
        from nnrt.common.runtime_dir import ENV as RUNTIME_ENV

        env = {**os.environ, RUNTIME_ENV: str(self.runtime), "NNRT_NO_EMBEDDED": "1"}
        for _ in range(self.client_count):
            proc = subprocess.Popen([*module_argv("nnrt.client.commands.demo"), "--client"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, env=env, cwd=CHILD_CWD,
                                    text=True, bufsize=1,
                                    # a terminal's Ctrl-C is the demo's: it ends them in order
                                    start_new_session=True)
            client = Client(proc)
            threading.Thread(target=self._read_client, args=(client,), daemon=True).start()
            self.clients.append(client)
        self._wait_for("the clients ready (models compiled, a first run)",
                       lambda: (self._pump(), all(c.ready for c in self.clients))[1], 60)

    @staticmethod
    def _read_client(client: Client) -> None:
        for line in client.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("ev") == "ready":
                client.ready = True
            else:
                client.events.put(event)
        client.events.put({"ev": "exit"})

    @staticmethod
    def _drain(client: Client) -> list[dict]:
        events = []
        while True:
            try:
                events.append(client.events.get_nowait())
            except queue.Empty:
                return events

    def set_mode(self, mode: str) -> None:
        for client in self.clients:
            client.proc.stdin.write(mode + "\n")
            client.proc.stdin.flush()
        since = time.monotonic()
        pending = {c.proc.pid for c in self.clients}

        def all_switched() -> bool:  # a good run in the new mode, started after the switch
            for client, event in self._pump():
                if (event["ev"] == "run" and event["ok"] and event["mode"] == mode
                        and event["start"] > since):
                    pending.discard(client.proc.pid)
            return not pending

        self._wait_for(f"the clients running in mode {mode}", all_switched, 30)

    def _pump(self) -> list[tuple[Client, dict]]:
        """Every client's new events, counted in the totals; DemoFailed when one exited."""
        taken = []
        for client in self.clients:
            for event in self._drain(client):
                if event["ev"] == "exit":
                    raise DemoFailed(f"client {client.proc.pid} exited "
                                     f"({client.proc.poll()})")
                self._count(event)
                taken.append((client, event))
        return taken

    def _count(self, event: dict) -> None:
        if event["ev"] == "run":
            self.totals["runs"] += 1
            self.totals["retried"] += event["attempts"] > 1 and event["ok"]
            self.totals["lost"] += not event["ok"]
            self.totals["wrong"] += event["wrong"]

    # -- a scenario ----------------------------------------------------------------------

    def scenario(self, name: str, signal_name: str, standby: bool, mode: str) -> ScenarioResult:
        self.set_standby(standby)
        drivers = self._wait_for(f"{LIVE} ready" + (" with its spare" if standby else ""),
                                 lambda: self._all_ready(standby), 30)
        self.set_mode(mode)
        old = drivers[LIVE]
        pid, takeovers = old["pid"], old.get("takeovers") or 0
        sig = signal.Signals[signal_name]
        result = ScenarioResult(name, signal_name, pid)
        how_clients = ("the model over [cpu0, cpu1]" if mode == "hetero"
                       else f"the model on {LIVE}")
        self.say(f"[{name}] {signal_name} {LIVE} (pid {pid}); clients run {how_clients}")
        os.kill(pid, sig)
        killed = time.monotonic()
        good_after: dict[int, bool] = {c.proc.pid: False for c in self.clients}
        back_at: float | None = None
        try:
            while True:
                self._left()
                if time.monotonic() - killed > SCENARIO_TIMEOUT:
                    raise DemoFailed(f"[{name} / {signal_name}] did not settle within "
                                     f"{SCENARIO_TIMEOUT:g} s")
                entry = self.status().get(LIVE)
                now = time.monotonic()  # after the answer: the device manager's figures are
                # bounds from above (a poll's round trip at most late), never early
                if entry is not None:
                    if result.noticed_ms is None and (entry["pid"] != pid
                                                      or entry["state"] != "ready"):
                        self._noticed(result, now - killed, "the device manager")
                    if (back_at is None and entry["state"] == "ready"
                            and entry["pid"] not in (pid, None)):
                        back_at = now
                        took_over = (entry.get("takeovers") or 0) > takeovers
                        result.back_how = "takeover" if took_over else "restart"
                        result.back_ms = (now - killed) * 1000
                        if result.noticed_ms is None:
                            self._noticed(result, now - killed, "the device manager")
                        self.say(f"  +{result.back_ms:8.1f} ms  {LIVE} back: "
                                 f"{'the spare took over' if took_over else 'restarted'}, "
                                 f"pid {entry['pid']} ready")
                for client, event in self._pump():
                    self._scenario_event(result, client, event, killed, back_at, good_after)
                spare = (entry or {}).get("standby") or {}
                spare_ok = not standby or spare.get("state") == "ready"
                if back_at is not None and all(good_after.values()) and spare_ok:
                    break
                time.sleep(POLL_INTERVAL)
        finally:
            if sig == signal.SIGSTOP and _alive(pid):  # not killed by the device manager
                os.kill(pid, signal.SIGKILL)
        if mode == "hetero" and result.first_good_run_ms is not None:
            result.back_how = f"failover ({SPARE}), {result.back_how}"
        self.say(f"  runs lost: {result.lost} ({result.runs} runs, {result.retried} retried, "
                 f"{result.wrong} wrong)")
        return result

    def _noticed(self, result: ScenarioResult, seconds: float, by: str) -> None:
        result.noticed_ms, result.noticed_by = seconds * 1000, by
        self.say(f"  +{result.noticed_ms:8.1f} ms  death noticed by {by}")

    def _scenario_event(self, result: ScenarioResult, client: Client, event: dict,
                        killed: float, back_at: float | None, good_after: dict[int, bool]) -> None:
        pid = client.proc.pid
        if event["ev"] == "error" and event["t"] > killed and result.noticed_ms is None:
            self._noticed(result, event["t"] - killed, f"client {pid} (a run failed)")
        if event["ev"] != "run" or event["end"] < killed:
            return
        result.runs += 1
        result.retried += event["attempts"] > 1 and event["ok"]
        result.lost += not event["ok"]
        result.wrong += event["wrong"]
        if event["ok"] and event["start"] > killed and result.first_good_run_ms is None:
            result.first_good_run_ms = (event["end"] - killed) * 1000
            self.say(f"  +{result.first_good_run_ms:8.1f} ms  first good run again "
                     f"(client {pid}, {event['attempts']} attempt"
                     f"{'s' if event['attempts'] != 1 else ''})")
        if event["ok"] and back_at is not None and event["start"] > back_at:
            good_after[pid] = True

    # -- the end -------------------------------------------------------------------------

    def close(self) -> None:
        for client in self.clients:
            try:
                client.proc.stdin.close()  # EOF: the client ends its loop
            except OSError:
                pass
        for client in self.clients:
            _end(client.proc, 10)
        if self.devmgr is not None:
            if self.devmgr.poll() is None:
                self.devmgr.send_signal(signal.SIGTERM)
            _end(self.devmgr, 20)
        shutil.rmtree(self.directory, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _end(proc: subprocess.Popen, bound: float) -> None:
    try:
        proc.wait(bound)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@contextmanager
def recovery_demo(clients: int, timeout: float,
                  say: Callable[[str], None]) -> Iterator[RecoveryDemo]:
    demo = RecoveryDemo(clients, time.monotonic() + timeout, say)
    try:
        yield demo
    finally:
        demo.close()


def run_recovery(clients: int, timeout: float, say: Callable[[str], None]) -> dict:
    """The whole recovery demo; its results as `--json` prints them."""
    started = time.monotonic()
    with recovery_demo(clients, timeout, say) as demo:
        say(f"runtime dir: {demo.runtime} (private, removed at the end)")
        demo.start_devmgr()
        drivers = demo.status()
        say(f"device manager pid {demo.devmgr.pid}: drivers "
            + ", ".join(f"{n} (pid {d['pid']})" for n, d in sorted(drivers.items())))
        demo.start_clients()
        say(f"{clients} client process{'es' if clients != 1 else ''} "
            f"(pid {', '.join(str(c.proc.pid) for c in demo.clients)}) run the MLP in a "
            f"loop, each result checked against numpy")
        results = [demo.scenario(*spec) for spec in SCENARIOS]
        totals = dict(demo.totals)
    return {"clients": clients, "seconds": round(time.monotonic() - started, 3),
            "scenarios": [asdict(r) | {"ok": r.ok} for r in results],
            "totals": totals, "ok": all(r.ok for r in results) and totals["lost"] == 0
            and totals["wrong"] == 0}


LEGEND = "\n" + textwrap.fill(
    f"in ms from the signal: NOTICED, the death seen (by the device manager, or a client's "
    f"failed run); BACK, the device manager reports {LIVE} ready under a new pid (HOW: a new "
    f"process, or the warm spare taking over; failover: the runs went on on {SPARE} "
    f"meanwhile); FIRST GOOD RUN, the first successful run that started after the signal. "
    f"RETRIED: runs that succeeded after a failed attempt; LOST: runs that never succeeded "
    f"(deadline {RUN_DEADLINE:g} s); WRONG: results off numpy's.", 96)


def summary_table(report: dict) -> str:
    from .common import table

    def ms(value: float | None) -> str | None:
        return None if value is None else f"{value:.1f} ms"

    rows = [(s["name"], s["signal"], ms(s["noticed_ms"]), ms(s["back_ms"]), s["back_how"],
             ms(s["first_good_run_ms"]), s["runs"], s["retried"], s["lost"], s["wrong"])
            for s in report["scenarios"]]
    return table(("SCENARIO", "SIGNAL", "NOTICED", "BACK", "HOW", "FIRST GOOD RUN", "RUNS",
                  "RETRIED", "LOST", "WRONG"), rows)


def cmd_recovery(args: argparse.Namespace) -> int:
    """`nnrt demo --recovery`."""
    from .common import EXIT_FAILURE, EXIT_OK, print_json, say

    stream = sys.stderr if args.json else sys.stdout

    def live(line: str) -> None:
        print(line, file=stream, flush=True)

    try:
        report = run_recovery(args.clients, args.timeout, live)
    except DemoFailed as exc:
        say(f"demo --recovery: {exc}")
        return EXIT_FAILURE
    if args.json:
        print_json(report)
    else:
        print()
        print(summary_table(report))
        print(LEGEND)
        t = report["totals"]
        print(f"\nall runs: {t['runs']}, retried {t['retried']}, lost {t['lost']}, wrong "
              f"{t['wrong']}; {report['seconds']:.1f} s")
    return EXIT_OK if report["ok"] else EXIT_FAILURE


def _client_entry() -> int:
    parser = argparse.ArgumentParser(prog="nnrt-demo-client")
    parser.add_argument("--client", action="store_true", required=True)
    parser.parse_args()
    try:
        return client_main()
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(_client_entry())
