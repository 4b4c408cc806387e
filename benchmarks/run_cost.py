"""CPU time of a tiny Run, client and driver side, whole and stage by stage.

What a Run costs the machine, not how long it takes: wall time on a small VM swings with
its wake-ups from one sitting to the next, CPU time does not. The same tiny Run as
benchmarks/transport.py (c) — a one-element ADD through OH_NNExecutor_RunSync, tensors
made once — `--runs` times in a row (10 000 by default), against a CPU driver in its own
process:

(1) cost   user + system time of the client process (getrusage) and of the driver process
           (every thread's run time from /proc/<pid>/task/*/schedstat, in ns), divided by
           the runs; the target (issue 32) is <= 30 µs for both together. Measured as the
           user runs it (client and driver poll while a CPU is spare: common/cpus.py, the
           Run's packets in the session's Run mailbox: common/run_mailbox.py), pinned to a
           CPU each (no CPU spare: nobody polls) and both on one CPU, and in further
           drivers with both polling the socket (no mailbox) and with neither side polling. Beside it the floors: a bare 64-byte
           SOCK_SEQPACKET ping-pong between two Python processes, blocking recv on both
           sides, and the same in C (compiled here with $CC or cc, where there is one: the
           kernel's part, mostly the wake-up of the other CPU on a VM), measured alike.
(2) stages the same runs with each stage's functions wrapped by thread-CPU timers (this
           benchmark's own instrumentation, in a child client process and a driver started
           with the wrappers; nothing of it is in the product): client check (C API
           argument checks), encode (the request's bytes), send, wait (polling the mailbox
           or the socket, or asleep; the receive), decode (the reply and output shapes);
           driver wake (the selector), poll (the spin for the next Run), receive or take
           (the socket's packet, the mailbox's request), admit
           (the run's admission and choice of thread), check (the known request's lookup,
           the run's counters), compute (buffers borrowed, the bound onnxruntime call),
           reply (the reply's send). The timers add ~1 µs a stage; (1) is the clean figure.
(3) cold   calls after the machine idled 0.2 s (models.py's default rounds are such calls):
           the first call's wall and client CPU time against the next nine's, beside the C
           ping-pong's and a bit of plain Python work's (no system call: what the machine
           itself does to code that idled, on a VM a cold core).

    python benchmarks/run_cost.py [--runs 10000] [--no-stages]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

TRANSPORT = Path(__file__).with_name("transport.py")  # its --serve-pingpong: the floor
CPU_TARGET_US = 30.0
_STAGES: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # name -> [ns, calls]


def process_cpu_ns(pid: int) -> int:
    """On-CPU ns of every thread of `pid` (schedstat: ns precision, unlike stat's ticks)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended meanwhile (its time is lost: a few µs at most)
    return total


def self_cpu_ns() -> int:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return round((usage.ru_utime + usage.ru_stime) * 1e9)


def peer_pid(sock: socket.socket) -> int:
    import struct
    pid, _, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return pid


def timed_stage(name: str, fn):
    """`fn` with its calls' thread CPU time added to stage `name` (nested stages count in
    both: the report subtracts)."""
    clock = time.thread_time_ns
    cell = _STAGES[name]

    def wrapper(*args, **kwargs):
        started = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            cell[0] += clock() - started
            cell[1] += 1
    wrapper.__wrapped__ = fn
    return wrapper


def _reset_stages() -> None:
    for cell in _STAGES.values():  # the wrappers hold the cells: zeroed, not replaced
        cell[0] = cell[1] = 0


# -- the driver with stage timers (a child process) ---------------------------------------------


def probe_driver(directory: str, dump: str) -> int:
    """Serve `nnrt-driver cpu` in `directory` with stage timers; the timers' totals are
    written to `dump` (JSON) whenever `dump`.want appears, and reset when `dump`.reset does."""
    import selectors

    from nnrt.common import session_channel
    from nnrt.server import channel_server, execution, main, run_scheduler, runner

    server = channel_server.SessionChannelServer
    server._serve = timed_stage("serve", server._serve)
    server._start_run = timed_stage("start_run", server._start_run)
    server._spin = timed_stage("poll", server._spin)
    if hasattr(server, "_take_from_mailbox"):  # a Run taken from the mailbox while polling
        server._take_from_mailbox = timed_stage("mailbox", server._take_from_mailbox)
        from nnrt.common import run_mailbox
        run_mailbox.RunMailbox.take_request = timed_stage("take",
                                                          run_mailbox.RunMailbox.take_request)
    server._send_run_reply = staticmethod(timed_stage(
        "reply", server.__dict__["_send_run_reply"].__func__))
    if "_send_alone" in server.__dict__:  # the one-frame Run's reply
        server._send_alone = staticmethod(timed_stage(
            "reply", server.__dict__["_send_alone"].__func__))
    selector = type(selectors.DefaultSelector())
    selector.select = timed_stage("select", selector.select)
    session_channel.receive_packet = timed_stage("receive", session_channel.receive_packet)
    runner.Runner.run_packet = timed_stage("run_packet", runner.Runner.run_packet)
    runner.Runner.estimate = timed_stage("estimate", runner.Runner.estimate)
    if hasattr(runner.Runner, "run_known"):  # the common Run in one frame
        runner.Runner.run_known = timed_stage("run_known", runner.Runner.run_known)
    executing = threading.local()  # inside execution.execute: the scheduler's time is in it
    timed_execute = timed_stage("compute", execution.execute)

    def execute(*args, **kwargs):
        executing.depth = getattr(executing, "depth", 0) + 1
        try:
            return timed_execute(*args, **kwargs)
        finally:
            executing.depth -= 1
    execution.execute = execute
    real_schedule = run_scheduler.RunScheduler.run
    timed_schedule = timed_stage("schedule", real_schedule)

    def schedule(self, *args, **kwargs):  # the computation run_known hands the scheduler
        if getattr(executing, "depth", 0):
            return real_schedule(self, *args, **kwargs)
        return timed_schedule(self, *args, **kwargs)
    run_scheduler.RunScheduler.run = schedule

    def dumper() -> None:
        want, reset = Path(dump + ".want"), Path(dump + ".reset")
        while True:
            time.sleep(0.1)
            if reset.exists():
                _reset_stages()
                reset.unlink()
                threads = {t.name: t.native_id for t in threading.enumerate()}
                Path(dump + ".threads").write_text(json.dumps(threads))
            if want.exists():
                Path(dump).write_text(json.dumps(dict(_STAGES)))
                want.unlink()

    threading.Thread(target=dumper, daemon=True, name="stage-dump").start()
    return main.main(["cpu", "--runtime-dir", directory, "--log-level", "WARNING",
                      *DRIVER_ARGS])


def _ask(dump: str, what: str, timeout: float = 10.0) -> None:
    Path(f"{dump}.{what}").write_text("")
    deadline = time.monotonic() + timeout
    while Path(f"{dump}.{what}").exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the probe driver did not answer {what}")
        time.sleep(0.02)


DRIVER_ARGS: list[str] = []  # --driver-args


def start_driver(directory: str, probe_dump: str | None = None,
                 extra: tuple[str, ...] = ()) -> subprocess.Popen:
    """A CPU driver serving `directory` (with stage timers when `probe_dump`), with
    --driver-args and `extra` options."""
    from nnrt.common.runtime_dir import session_socket

    if probe_dump:
        argv = [sys.executable, __file__, "--probe-driver", directory, "--dump", probe_dump,
                "--driver-args", " ".join(DRIVER_ARGS)]
    else:
        argv = [sys.executable, "-m", "nnrt.server", "cpu", "--runtime-dir", directory,
                "--log-level", "WARNING", *DRIVER_ARGS, *extra]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    path = session_socket(Path(directory), "cpu")
    deadline = time.monotonic() + 60
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("the driver did not start")
        time.sleep(0.05)
    return proc


# -- the client --------------------------------------------------------------------------------


def tiny_run():
    """(run, session socket, close): one RunSync of a one-element ADD, tensors made once."""
    import numpy as np

    from nnrt.client import capi
    from nnrt.client.core.device import registry

    from _common import add_one_executor, float32_desc  # benchmarks/_common.py

    executor = add_one_executor()
    d = float32_desc([1])
    tin, tout = capi.OH_NNTensor_Create(0, d), capi.OH_NNTensor_Create(0, d)
    capi.OH_NNTensorDesc_Destroy(d)
    np.frombuffer(capi.OH_NNTensor_GetDataBuffer(tin), np.float32)[:] = 41.0
    ins, outs = [tin], [tout]
    run_sync = capi.OH_NNExecutor_RunSync

    def run() -> None:
        if run_sync(executor, ins, 1, outs, 1) != 0:
            raise RuntimeError("RunSync failed")

    run()
    assert np.frombuffer(capi.OH_NNTensor_GetDataBuffer(tout), np.float32)[0] == 42.0
    client, _ = executor.session()

    def close() -> None:
        capi.OH_NNTensor_Destroy(tin)
        capi.OH_NNTensor_Destroy(tout)
        capi.OH_NNExecutor_Destroy(executor)
        registry().close()

    return run, client._sock, close


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of `pid` onto `cpus`."""
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(task), cpus)
        except (ProcessLookupError, OSError):
            pass


def measure_cost(run, driver_pid: int, runs: int, split: bool = False,
                 together: bool = False) -> dict[str, float]:
    """CPU per run; `split`: the client on the first CPU, the driver on the second (each
    packet then wakes the other CPU, as two busy processes on a loaded machine see it);
    `together`: both on the first CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    if (split or together) and len(cpus) > 1:
        pin(os.getpid(), {cpus[0]})
        pin(driver_pid, {cpus[1 if split else 0]})
    for _ in range(min(1000, runs // 10)):
        run()
    client0, driver0, wall0 = self_cpu_ns(), process_cpu_ns(driver_pid), time.perf_counter()
    for _ in range(runs):
        run()
    wall = time.perf_counter() - wall0
    client = self_cpu_ns() - client0
    driver = process_cpu_ns(driver_pid) - driver0
    if (split or together) and len(cpus) > 1:
        pin(os.getpid(), set(cpus))
        pin(driver_pid, set(cpus))
    return {"client_us": client / runs / 1e3, "driver_us": driver / runs / 1e3,
            "total_us": (client + driver) / runs / 1e3, "wall_us": wall / runs * 1e6}


def measure_nnrt(runs: int, polling: bool = True) -> tuple[dict, dict, dict]:
    """The tiny Run's CPU (unpinned, pinned apart, pinned together) against a driver of its
    own; `polling` False: neither side polls (NNRT_CLIENT_SPIN_US=0, --spin-us 0)."""
    from nnrt.client.core import driver as core_driver

    with tempfile.TemporaryDirectory(prefix="nnrt-cost-") as directory:
        os.chmod(directory, 0o700)
        os.environ["NNRT_RUNTIME_DIR"] = directory
        before = os.environ.get(core_driver.SPIN_ENV)
        if not polling:
            os.environ[core_driver.SPIN_ENV] = "0"
        proc = start_driver(directory, extra=() if polling else ("--spin-us", "0"))
        try:
            run, sock, close = tiny_run()
            cost = measure_cost(run, peer_pid(sock), runs)
            split = measure_cost(run, peer_pid(sock), runs, split=True)
            together = measure_cost(run, peer_pid(sock), runs, together=True)
            cost["cold"] = measure_cold(run) if polling else {}
            close()
        finally:
            proc.terminate()
            proc.wait(15)
            if before is None:
                os.environ.pop(core_driver.SPIN_ENV, None)
            else:
                os.environ[core_driver.SPIN_ENV] = before
    return cost, split, together


def measure_pingpong(runs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "pp.sock")
        # transport.py's ping-pong server: the same floor both benchmarks measure against
        proc = subprocess.Popen([sys.executable, str(TRANSPORT), "--serve-pingpong", path],
                                stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().strip() == "ready"
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            sock.connect(path)
            ping = b"p" * 64

            def run() -> None:
                sock.send(ping)
                sock.recv(128)

            result = measure_cost(run, proc.pid, runs)
            sock.close()
        finally:
            proc.wait(5)
    return result


# The same ping-pong in C: what two processes that sleep for each other's packet cost the
# machine with no interpreter at all — the kernel's part, which no client or driver code
# can go below (on a VM mostly the wake-up of the other CPU).
NATIVE_PINGPONG = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
static double cpu_us(int who) {
    struct rusage r; getrusage(who, &r);
    return r.ru_utime.tv_sec * 1e6 + r.ru_utime.tv_usec + r.ru_stime.tv_sec * 1e6 + r.ru_stime.tv_usec;
}
static double now_us(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
int main(int argc, char **argv) {
    int n = atoi(argv[1]), sv[2]; char b[64] = {0}; struct timespec t0, t1;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv)) return 1;
    if (fork() == 0) {
        close(sv[0]);
        while (recv(sv[1], b, 64, 0) > 0) send(sv[1], b, 64, 0);
        _exit(0);
    }
    close(sv[1]);
    if (argc > 2) {  /* cold: n rounds of 0.2 s idle, then 10 round trips each, wall µs */
        printf("[");
        for (int r = 0; r < n; r++) {
            usleep(200000);
            for (int i = 0; i < 10; i++) {
                double t = now_us(); send(sv[0], b, 64, 0); recv(sv[0], b, 64, 0);
                printf("%s%f", r || i ? ", " : "", now_us() - t);
            }
        }
        printf("]\n"); close(sv[0]); wait(NULL); return 0;
    }
    for (int i = 0; i < n / 10; i++) { send(sv[0], b, 64, 0); recv(sv[0], b, 64, 0); }
    double c0 = cpu_us(RUSAGE_SELF); clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++) { send(sv[0], b, 64, 0); recv(sv[0], b, 64, 0); }
    clock_gettime(CLOCK_MONOTONIC, &t1); double c1 = cpu_us(RUSAGE_SELF);
    close(sv[0]); wait(NULL);
    double peer = cpu_us(RUSAGE_CHILDREN) * n / (n + n / 10);  /* its warm-up out */
    printf("{\"client_us\": %f, \"driver_us\": %f, \"total_us\": %f, \"wall_us\": %f}\n",
           (c1 - c0) / n, peer / n, (c1 - c0 + peer) / n,
           ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / n);
    return 0;
}
"""


def measure_native_pingpong(runs: int) -> dict[str, dict[str, float]] | None:
    """The C ping-pong's CPU per round trip, unpinned and with both on the first CPU
    (`together`), and its calls after the machine idled (`cold`); None where no C compiler
    is found ($CC, or cc)."""
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        return None
    with tempfile.TemporaryDirectory(prefix="nnrt-pingpong-") as tmp:
        source, binary = os.path.join(tmp, "pingpong.c"), os.path.join(tmp, "pingpong")
        Path(source).write_text(NATIVE_PINGPONG)
        subprocess.run([compiler, "-O2", "-o", binary, source], check=True, timeout=120)
        first = min(os.sched_getaffinity(0))
        result = {}
        for name, pin_first in (("unpinned", False), ("together", True)):
            out = subprocess.run([binary, str(runs)], capture_output=True, text=True,
                                 check=True, timeout=300,
                                 preexec_fn=(lambda: os.sched_setaffinity(0, {first}))
                                 if pin_first else None)
            result[name] = json.loads(out.stdout)
        result["cold"] = measure_native_cold(binary)
    return result


COLD_ROUNDS, COLD_IDLE_S, COLD_CALLS = 15, 0.2, 10


def measure_cold(run) -> dict[str, float]:
    """Calls after the machine idled (COLD_ROUNDS x: COLD_IDLE_S asleep, then COLD_CALLS
    runs): the first call's median wall and client CPU µs against the others' (models.py's
    default rounds are such calls)."""
    first, rest, first_cpu, rest_cpu = [], [], [], []
    for _ in range(COLD_ROUNDS):
        time.sleep(COLD_IDLE_S)
        for call in range(COLD_CALLS):
            cpu, wall = time.thread_time(), time.perf_counter()
            run()
            wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
            (first if call == 0 else rest).append(wall * 1e6)
            (first_cpu if call == 0 else rest_cpu).append(cpu * 1e6)
    median = statistics.median
    return {"first_us": median(first), "first_client_cpu_us": median(first_cpu),
            "rest_us": median(rest), "rest_client_cpu_us": median(rest_cpu)}


def python_work() -> int:
    """A fixed bit of interpreter work, no system call: the machine's own cold factor."""
    table = {}
    for i in range(300):
        table[i] = str(i)
    return len(table)


def measure_cold_python() -> dict[str, float]:
    for _ in range(100):
        python_work()
    first, rest = [], []
    for _ in range(COLD_ROUNDS):
        time.sleep(COLD_IDLE_S)
        for call in range(COLD_CALLS):
            cpu = time.thread_time()
            python_work()
            (first if call == 0 else rest).append((time.thread_time() - cpu) * 1e6)
    return {"first_cpu_us": statistics.median(first), "rest_cpu_us": statistics.median(rest)}


def measure_native_cold(binary: str) -> dict[str, float]:
    times = json.loads(subprocess.run([binary, str(COLD_ROUNDS), "cold"], capture_output=True,
                                      text=True, check=True, timeout=120).stdout)
    first = times[::COLD_CALLS]
    rest = [t for k, t in enumerate(times) if k % COLD_CALLS]
    return {"first_us": statistics.median(first), "rest_us": statistics.median(rest)}


def stage_client(directory: str, dump: str, runs: int) -> None:
    """In a child process: the tiny runs with the client's stage timers, against the probe
    driver; prints one JSON object (the client's stages and the driver's)."""
    os.environ["NNRT_RUNTIME_DIR"] = directory
    from nnrt.client.capi import executor as capi_executor
    from nnrt.client.core import driver as core_driver
    from nnrt.client.core import execution as core_execution
    from nnrt.client.core.prepared_model import PreparedModel

    capi_executor._prepare_run = timed_stage("check", capi_executor._prepare_run)
    capi_executor.io_bytes = timed_stage("encode_io", capi_executor.io_bytes)
    core_driver.run_request_bytes = timed_stage("encode", core_driver.run_request_bytes)
    if hasattr(core_driver, "encode_run"):
        core_driver.encode_run = timed_stage("encode", core_driver.encode_run)
    core_driver.DriverClient._await = timed_stage("wait", core_driver.DriverClient._await)
    from nnrt.client.core import run_mailbox as client_mailbox
    client_mailbox.ClientMailbox.post_and_poll = timed_stage(
        "wait", client_mailbox.ClientMailbox.post_and_poll)
    if hasattr(core_driver.DriverClient, "_wait_run"):
        core_driver.DriverClient._wait_run = timed_stage("wait",
                                                         core_driver.DriverClient._wait_run)
    hot = "run_reply" if hasattr(core_driver.DriverClient, "run_reply") else "run"
    setattr(core_driver.DriverClient, hot,
            timed_stage("client_run", getattr(core_driver.DriverClient, hot)))
    if hasattr(core_driver, "decode_run_reply"):
        core_driver.decode_run_reply = timed_stage("decode", core_driver.decode_run_reply)
    else:
        class _Pb:  # RunReply.FromString timed where driver.py calls it
            def __getattr__(self, name):
                return getattr(real_pb, name)
        real_pb = core_driver.pb

        class _RunReply:
            FromString = staticmethod(timed_stage("decode", real_pb.RunReply.FromString))
        proxy = _Pb()
        proxy.RunReply = _RunReply
        core_driver.pb = proxy
    core_execution.output_shapes = timed_stage("decode", core_execution.output_shapes)
    PreparedModel.store_output_shapes = timed_stage("decode",
                                                    PreparedModel.store_output_shapes)
    capi_executor.OH_NNExecutor_RunSync = timed_stage("runsync",
                                                      capi_executor.OH_NNExecutor_RunSync)
    from nnrt.client import capi
    capi.OH_NNExecutor_RunSync = capi_executor.OH_NNExecutor_RunSync

    run, sock, close = tiny_run()
    driver_pid = peer_pid(sock)
    for _ in range(min(1000, runs // 10)):
        run()
    _reset_stages()
    _ask(dump, "reset")
    threads = json.loads(Path(dump + ".threads").read_text())
    cost = measure_cost(run, driver_pid, runs)
    _ask(dump, "want")
    driver = json.loads(Path(dump).read_text())
    channel_tid = threads.get("session-channel")
    print(json.dumps({"client": dict(_STAGES), "driver": driver, "cost": cost,
                      "runs": runs + min(1000, runs // 10), "channel_tid": channel_tid}))
    close()


def stage_table(result: dict, runs: int) -> list[tuple[str, str, float]]:
    """(side, stage, µs per run) from the timers' inclusive totals."""
    c = {k: v[0] / 1e3 / runs for k, v in result["client"].items()}
    d = {k: v[0] / 1e3 / runs for k, v in result["driver"].items()}
    g = lambda table, k: table.get(k, 0.0)  # noqa: E731
    rows = [
        ("client", "check (C API arguments)", g(c, "check")),
        ("client", "encode (tensors' IOTensors, request bytes)", g(c, "encode") + g(c, "encode_io")),
        ("client", "send (and the run's bookkeeping)",
         g(c, "client_run") - g(c, "wait") - g(c, "encode") + g(c, "encode_io")),
        ("client", "wait (the mailbox or socket polled, or asleep; receive)", g(c, "wait")),
        ("client", "decode (reply, output shapes)", g(c, "decode")),
        ("client", "C API and core glue",
         g(c, "runsync") - g(c, "client_run") - g(c, "check") - g(c, "decode")
         - g(c, "encode_io")),
        ("driver", "wake (selector wait)", g(d, "select") - g(d, "poll") * 0),
        ("driver", "poll (spin for the next Run)", g(d, "poll") - g(d, "mailbox")),
        ("driver", "receive (socket) or take (mailbox)",
         g(d, "receive") + g(d, "take")),
        ("driver", "admit (header, limits, estimate)",
         g(d, "start_run") - g(d, "run_packet") - g(d, "run_known") - g(d, "reply")),
        ("driver", "check (known request, counters)",
         g(d, "run_packet") + g(d, "run_known") - g(d, "compute") - g(d, "schedule")),
        ("driver", "compute (borrow + bound run)", g(d, "compute") + g(d, "schedule")),
        ("driver", "reply (send)", g(d, "reply")),
        ("driver", "loop (dispatch: the selector's, the mailbox's)",
         g(d, "serve") + g(d, "mailbox") - g(d, "receive") - g(d, "take") - g(d, "start_run")),
    ]
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--no-stages", action="store_true", help="skip (2)")
    parser.add_argument("--driver-args", default="",
                        help="more nnrt-driver options, e.g. '--spin-us 0'")
    parser.add_argument("--probe-driver", help=argparse.SUPPRESS)
    parser.add_argument("--dump", help=argparse.SUPPRESS)
    parser.add_argument("--stage-client", help=argparse.SUPPRESS)
    parser.add_argument("--asleep", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--socket", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    DRIVER_ARGS[:] = args.driver_args.split()
    if args.probe_driver:
        return probe_driver(args.probe_driver, args.dump)
    if args.stage_client:
        stage_client(args.stage_client, args.dump, args.runs)
        return 0

    import logging
    logging.basicConfig(level=logging.WARNING)
    os.environ["NNRT_NO_EMBEDDED"] = "1"
    if args.asleep:  # one line of JSON: the tiny Run's cost with neither side polling
        cost = measure_nnrt(args.runs, polling=False)[0]
        cost.pop("cold")
        print(json.dumps(cost))
        return 0
    if args.socket:  # one line of JSON: both polling the socket, no Run mailbox
        from nnrt.client.core.run_mailbox import MAILBOX_ENV
        os.environ[MAILBOX_ENV] = "0"
        cost = measure_nnrt(args.runs)[0]
        cost.pop("cold")
        print(json.dumps(cost))
        return 0
    from nnrt.client.core import driver as core_driver
    path = "native" if getattr(core_driver, "NATIVE", None) else "python"
    print(f"tiny Run (1-element ADD, OH_NNExecutor_RunSync, tensors made once), "
          f"{args.runs} runs, {os.cpu_count()} CPUs, client path: {path}")

    cost, split, together = measure_nnrt(args.runs)
    cold = cost.pop("cold")
    def child(mode: str) -> dict:  # the client's registry is the process's: a new one
        return json.loads(subprocess.run(
            [sys.executable, __file__, mode, "--runs", str(args.runs), "--driver-args",
             args.driver_args], check=True, capture_output=True, text=True,
            timeout=600).stdout.splitlines()[-1])

    socket_polled = child("--socket")
    asleep = child("--asleep")
    floor = measure_pingpong(args.runs)
    native = measure_native_pingpong(args.runs)
    print("\n(1) CPU time per run (µs), client + driver processes")
    print(f"{'':34s} {'client':>8s} {'driver':>8s} {'total':>8s} {'wall':>8s}")
    line = "{:34s} {client_us:8.1f} {driver_us:8.1f} {total_us:8.1f} {wall_us:8.1f}   {}".format
    print(line("nnrt tiny Run", f"target total <= {CPU_TARGET_US:g}: "
               f"{'met' if cost['total_us'] <= CPU_TARGET_US else 'missed'}", **cost))
    print(line("  client and driver pinned", "(one CPU each: polling has no spare CPU, "
               "every packet wakes the other CPU)", **split))
    print(line("  both on one CPU", "", **together))
    print(line("  the socket polled", "(NNRT_RUN_MAILBOX=0: no Run mailbox)",
               **socket_polled))
    print(line("  neither side polling", "(NNRT_CLIENT_SPIN_US=0, --spin-us 0)", **asleep))
    print(line("python ping-pong (64 B, blocking)", "", **floor))
    if native is not None:
        print(line("C ping-pong (64 B, blocking)", "(the kernel's part alone)",
                   **native["unpinned"]))
        print(line("  both on one CPU", "", **native["together"]))
    print(f"\n(3) calls after {COLD_IDLE_S:g} s idle ({COLD_ROUNDS} rounds of {COLD_CALLS} "
          f"calls; median µs): first call, then the others")
    print(f"  nnrt tiny Run   wall {cold['first_us']:7.1f} (client CPU "
          f"{cold['first_client_cpu_us']:6.1f})   then {cold['rest_us']:6.1f} (client CPU "
          f"{cold['rest_client_cpu_us']:5.1f})")
    if native is not None:
        print(f"  C ping-pong     wall {native['cold']['first_us']:7.1f}{'':21s}then "
              f"{native['cold']['rest_us']:6.1f}")
    cold_python = measure_cold_python()
    print(f"  Python work, no system call   (CPU {cold_python['first_cpu_us']:6.1f})   "
          f"then{'':7s}(CPU {cold_python['rest_cpu_us']:6.1f})   the machine's own cold "
          f"factor {cold_python['first_cpu_us'] / cold_python['rest_cpu_us']:.1f}x")

    if not args.no_stages:
        with tempfile.TemporaryDirectory(prefix="nnrt-stages-") as directory:
            os.chmod(directory, 0o700)
            dump = os.path.join(directory, "stages.json")
            proc = start_driver(directory, dump)
            try:
                out = subprocess.run(
                    [sys.executable, __file__, "--stage-client", directory, "--dump", dump,
                     "--runs", str(args.runs)], capture_output=True, text=True, timeout=600)
            finally:
                proc.terminate()
                proc.wait(15)
            if out.returncode:
                print(out.stderr)
                return 1
            result = json.loads(out.stdout.strip().splitlines()[-1])
            runs = result["runs"]  # counted from the reset, after the first warm-up
            print(f"\n(2) per stage, thread CPU µs per run (timers on: total "
                  f"client {result['cost']['client_us']:.1f} + driver "
                  f"{result['cost']['driver_us']:.1f})")
            for side, stage, us in stage_table(result, runs):
                print(f"  {side:7s} {stage:36s} {us:7.1f}")
    print(json.dumps({"cost": cost, "split": split, "together": together,
                      "socket": socket_polled, "asleep": asleep,
                      "pingpong": floor, "native_pingpong": native, "cold": cold,
                      "cold_python": cold_python}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
