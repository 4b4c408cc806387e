"""`nnrt-driver <kind>`: run one driver in the foreground.

    nnrt-driver cpu                       # $NNRT_RUNTIME_DIR/cpu.sock (+ cpu.session)
    nnrt-driver cpu --name cpu1 --runtime-dir /tmp/rt
    nnrt-driver cpu --fault-run-delay-ms 500
    nnrt-driver cpu --fault-injection     # no fault yet; the admin SetFaults may set some
    nnrt-driver gpu                       # the first OpenCL GPU
    nnrt-driver gpu --cl-device any       # any OpenCL device (PoCL's CPU device in tests)
    nnrt-driver gpu --cl-device 1:0 --gpu-memory-mb 4096
    nnrt-driver accel --spec npu-sim.toml   # the NPU simulator with a spec of your own

The driver first takes its name lock, `flock` on `<runtime dir>/<name>.lock` with its pid
in it (common/runtime_dir.py), so that a driver still loading is visible and a second one of
that name stops at once (exit 3).
SIGTERM or SIGINT: stop accepting, let calls in flight finish (up to --grace seconds),
remove the sockets and the lock file, exit 0. `--lifeline-fd N` (client/core/embedded.py): the same stop when
the inherited pipe N reaches EOF, i.e. the process holding its write end is gone.

`--standby-fd N` (server/devmgr.py, `standby = true`): a warm spare. The process imports
everything and creates its device, then, before claiming any socket, says b"R" (ready) on
the inherited socket N and waits there: b"G" (go) from the device manager means the live
driver of this name died, so it claims the (stale) sockets and serves at once; EOF means
the device manager let it go or died, and it exits 0 without ever having served. A socket
rather than a signal: the go cannot arrive before the process listens for it, and its EOF
doubles as a second lifeline.
Exit codes: 0 clean stop, 1 failed to start (no such OpenCL device, say), 2 bad usage,
3 another driver already listens on the socket.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import select
import signal
import socket
import sys
import threading
from pathlib import Path

from nnrt.drivers import DEVICE_KINDS, DeviceUnavailable, load_device
from nnrt.hdi.reference import graph_checks as reference
from nnrt.drivers.cpu.ort import int8_kernels  # its choices and variable (numpy alone)
from nnrt.server import buffers
from nnrt.hdi import cache_key
from nnrt.common.cpus import usable_cores
from nnrt.common.faults import DEVICE_STATUS, PLAIN_FIELDS, Faults
from nnrt.server.faults import FaultInjection
from nnrt.server.host import STALL_TIMEOUT, DriverAlreadyRunning, DriverHost
from nnrt.server.journal import JournalFormatter, stderr_is_journal
from nnrt.server.prometheus import DriverCollector, MetricsServer
from nnrt.server.sd_notify import Notifier, keep_watchdog
from nnrt.common.devmgr_cli import metrics_address, parse_address
from nnrt.common.version import installed_version
from nnrt.common.runtime_dir import DriverLock, NameLocked, UnsafeRuntimeDir, runtime_dir
from nnrt.server.sessions import (DEFAULT_MAX_RUNS_PER_SESSION, DEFAULT_MAX_SESSIONS_PER_UID,
                                  MAX_SPIN_US, SPIN_S, ChannelPolicy)

log = logging.getLogger("nnrt.driver")


def build_parser() -> argparse.ArgumentParser:
    """nnrt-driver's argument parser (also what the device manager's configuration checks a
    driver's `options` with, server/devmgr_config.py); `parse_args` adds the range checks."""
    parser = argparse.ArgumentParser(
        prog="nnrt-driver", description="Run one NNRt HDI driver in the foreground.")
    parser.add_argument("kind", choices=sorted(DEVICE_KINDS), help="which device to serve")
    parser.add_argument("--name", help="socket name (default: the kind)")
    parser.add_argument("--version", action="version",
                        version=f"nnrt-driver {installed_version()}")
    parser.add_argument("--runtime-dir", type=Path,
                        help="socket directory (default: $NNRT_RUNTIME_DIR, else /run/nnrt when "
                             "usable, else $XDG_RUNTIME_DIR/nnrt, else /tmp/nnrt-$UID)")
    parser.add_argument("--state-dir", type=Path,
                        help="where the key that authenticates model caches is kept (default: "
                             "$NNRT_STATE_DIR, else systemd's $STATE_DIRECTORY, else the "
                             "runtime directory)")
    parser.add_argument("--grace", type=float, default=10.0,
                        help="seconds calls in flight may take to finish at SIGTERM (default 10)")
    parser.add_argument("--log-level", default="INFO",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument("--metrics-address", metavar="HOST:PORT", type=metrics_address,
                        help="serve the driver's own Prometheus metrics over HTTP there (off "
                             "by default; HOST alone: port 9720, :PORT: 127.0.0.1); the "
                             "device manager's --metrics-address covers all its drivers")
    parser.add_argument("--stall-timeout", type=float, default=STALL_TIMEOUT, metavar="S",
                        help="health says NOT_SERVING when the session channel's thread "
                             "does not come round for S seconds (a long run never does; runs "
                             f"not moving for S s are logged) (default {STALL_TIMEOUT:g}; "
                             "0: off)")
    parser.add_argument("--lifeline-fd", type=int, default=None, metavar="N",
                        help="an inherited pipe's read end: its EOF (every writer gone, i.e. "
                             "the parent died) stops the driver as SIGTERM does")
    parser.add_argument("--standby-fd", type=int, default=None, metavar="N",
                        help="start as a warm spare (the device manager's standby): load "
                             "everything, say b'R' on the inherited socket N, serve only when "
                             "b'G' arrives there; exit 0 at its EOF")
    budgets = parser.add_argument_group(
        "budgets (beyond one: NNRT_OUT_OF_MEMORY with the sizes; what is held keeps working)")
    budgets.add_argument("--max-driver-memory-mb", type=int, default=None, metavar="N",
                         help="shared memory all sessions together may hold (default: half "
                              "the physical memory)")
    budgets.add_argument("--max-session-memory-mb", type=int, default=None, metavar="N",
                         help="shared memory one session may hold (default: a quarter of the "
                              "driver's budget)")
    budgets.add_argument("--max-uid-memory-mb", type=int, default=None, metavar="N",
                         help="shared memory the sessions of one peer uid may hold together "
                              "(default: half the driver's budget, so one user never takes "
                              "what the others need)")
    budgets.add_argument("--max-model-memory-mb", type=int, default=None, metavar="N",
                         help="memory one run of a prepared model may write, worked out by "
                              "shape inference at prepare, or at each run for dynamic inputs "
                              "(default: the default session budget)")
    channel = parser.add_argument_group("session channel (who may open a session, how much "
                                        "one may ask at once)")
    channel.add_argument("--max-runs-per-session", type=int,
                         default=DEFAULT_MAX_RUNS_PER_SESSION, metavar="N",
                         help="Runs of one session in flight on the session channel; one "
                              "more is answered NNRT_DEVICE_BUSY at once (default "
                              f"{DEFAULT_MAX_RUNS_PER_SESSION})")
    channel.add_argument("--max-sessions-per-uid", type=int,
                         default=DEFAULT_MAX_SESSIONS_PER_UID, metavar="N",
                         help="sessions one peer uid may have open at once, root included; "
                              "one more is refused (HDF_ERR_NOPERM, with the reason) "
                              f"(default {DEFAULT_MAX_SESSIONS_PER_UID})")
    channel.add_argument("--spin-us", type=int, default=round(SPIN_S * 1e6), metavar="US",
                         help="after answering a quick Run of the only active session on its "
                              "own thread, poll up to this many µs for that client's next "
                              "Run before sleeping (saves the wake-up of a sleeping thread; "
                              "costs up to that much CPU per run, only while one client "
                              "runs back to back); 0: never (default "
                              f"{round(SPIN_S * 1e6)}, 0 on a single CPU)")
    channel.add_argument("--allow-uid", type=int, action="append", default=[], metavar="UID",
                         help="only processes of this uid (repeatable), or of an --allow-gid "
                              "group, may open sessions (default: anyone who can open the "
                              "0660 socket)")
    channel.add_argument("--allow-gid", type=int, action="append", default=[], metavar="GID",
                         help="only processes in this group (primary or supplementary; "
                              "repeatable), or of an --allow-uid, may open sessions")
    cpu = parser.add_argument_group("cpu driver")
    cpu.add_argument("--engine", choices=["ort", "numpy"], default=None,
                     help="ort (default, or $NNRT_CPU_ENGINE): onnxruntime computes what it can express exactly, "
                          "numpy kernels the rest; numpy: the numpy reference kernels only")
    cpu.add_argument("--threads", type=int, default=None, metavar="N",
                     help="onnxruntime's intra-op threads, shared by every model (default: "
                          "the cores this process may use)")
    cpu.add_argument("--int8-kernels", choices=int8_kernels.CHOICES, default=None,
                     help="onnxruntime's int8 kernels: auto (default, or "
                          "$NNRT_ORT_INT8_KERNELS): u8s8 where the CPU makes them exact "
                          "(VNNI; ARM), s8s8 elsewhere (u8s8 saturates without VNNI), each "
                          "checked at start; numpy: quantised nodes on the numpy kernels")
    gpu = parser.add_argument_group("gpu driver")
    gpu.add_argument("--cl-device", default=None, metavar="gpu|any|P:D",
                     help="the OpenCL device: gpu (default: the first device of type GPU), "
                          "any (any type, e.g. PoCL's CPU device), or platform:device indices")
    gpu.add_argument("--gpu-memory-mb", type=int, default=None, metavar="N",
                     help="device memory the driver may use (default: the device's global "
                          "memory); beyond it prepare and runs get NNRT_OUT_OF_MEMORY")
    accel = parser.add_argument_group("accel driver (the NPU simulator)")
    accel.add_argument("--spec", type=Path, default=None, metavar="SPEC.toml",
                       help="the simulated device's specification (default: the built-in "
                            "one, a small mobile NPU)")
    faults = parser.add_argument_group("fault injection (for tests; off by default)")
    faults.add_argument("--fault-run-delay-ms", type=int, default=0, metavar="N",
                        help="delay every Run by N ms (abandoned when its caller gives up)")
    faults.add_argument("--fault-run-hang", action="store_true",
                        help="every Run blocks forever")
    faults.add_argument("--fault-exit-on-run", type=int, default=0, metavar="N",
                        help="SIGKILL this process at the Nth Run")
    faults.add_argument("--fault-exit-on-prepare", type=int, default=0, metavar="N",
                        help="SIGKILL this process at the Nth Prepare* call")
    faults.add_argument("--fault-injection", action="store_true",
                        help="allow the admin service's SetFaults to change faults at runtime "
                             "(implied by every --fault-* option)")
    faults.add_argument("--fault-exit-on-run-probability", type=float, default=0.0, metavar="P",
                        help="SIGKILL this process at any Run with probability P")
    faults.add_argument("--fault-seed", type=int, default=None, metavar="N",
                        help="seed of the random draws (reproducible probabilistic faults)")
    faults.add_argument("--fault-exit-on-export-cache", action="store_true",
                        help="SIGKILL this process while exporting a model cache")
    faults.add_argument("--fault-device-status", choices=sorted(DEVICE_STATUS),
                        help="what GetDeviceStatus reports")
    faults.add_argument("--fault-device-busy", action="store_true",
                        help="Prepare* and Run answer NNRT_DEVICE_BUSY")
    faults.add_argument("--fault-corrupt-exported-cache", action="store_true",
                        help="flip a byte of every exported model cache")
    faults.add_argument("--fault-slow-start-ms", type=int, default=0, metavar="N",
                        help="wait N ms before claiming the sockets and serving")
    faults.add_argument("--fault-admit-delay-ms", type=int, default=0, metavar="N",
                        help="every Prepare* waits N ms between the device's prepare and its "
                             "session taking the model")
    return parser


def parse_args(argv: list[str] | None,
               parser: argparse.ArgumentParser | None = None) -> argparse.Namespace:
    parser = build_parser() if parser is None else parser
    args = parser.parse_args(argv)
    for option in ("fault_run_delay_ms", "fault_exit_on_run", "fault_exit_on_prepare",
                   "fault_slow_start_ms", "fault_admit_delay_ms"):
        if getattr(args, option) < 0:
            parser.error(f"--{option.replace('_', '-')} must be >= 0")
    if args.max_runs_per_session < 1:
        parser.error("--max-runs-per-session must be >= 1")
    if args.max_sessions_per_uid < 1:
        parser.error("--max-sessions-per-uid must be >= 1")
    if not 0 <= args.spin_us <= MAX_SPIN_US:
        parser.error(f"--spin-us must be between 0 and {MAX_SPIN_US}")
    if any(i < 0 for i in args.allow_uid + args.allow_gid):
        parser.error("--allow-uid and --allow-gid take ids >= 0")
    if not args.stall_timeout >= 0 or args.stall_timeout == float("inf"):
        parser.error("--stall-timeout must be a number of seconds >= 0")
    if args.lifeline_fd is not None:
        try:
            os.fstat(args.lifeline_fd)
        except (OSError, OverflowError):
            parser.error(f"--lifeline-fd {args.lifeline_fd} is not an open file descriptor")
    if args.standby_fd is not None:
        try:
            os.fstat(args.standby_fd)
        except (OSError, OverflowError):
            parser.error(f"--standby-fd {args.standby_fd} is not an open file descriptor")
    if not 0.0 <= args.fault_exit_on_run_probability <= 1.0:
        parser.error("--fault-exit-on-run-probability must be within [0, 1]")
    if args.kind != "gpu" and (args.cl_device is not None or args.gpu_memory_mb is not None):
        parser.error("--cl-device and --gpu-memory-mb are options of the gpu driver")
    for option in ("max_driver_memory_mb", "max_session_memory_mb", "max_uid_memory_mb",
                   "max_model_memory_mb"):
        if getattr(args, option) is not None and getattr(args, option) <= 0:
            parser.error(f"--{option.replace('_', '-')} must be > 0")
    if args.gpu_memory_mb is not None and args.gpu_memory_mb <= 0:
        parser.error("--gpu-memory-mb must be > 0")
    if args.kind != "cpu" and (args.engine is not None or args.threads is not None or
                               args.int8_kernels is not None):
        parser.error("--engine, --threads and --int8-kernels are options of the cpu driver")
    int8_env = os.environ.get(int8_kernels.ENV)
    if args.kind == "cpu" and args.int8_kernels is None and int8_env and \
            int8_env.lower() not in int8_kernels.CHOICES:
        parser.error(f"${int8_kernels.ENV}={int8_env!r} is not one of "
                     f"{', '.join(int8_kernels.CHOICES)}")
    if args.threads is not None and args.threads <= 0:
        parser.error("--threads must be > 0")
    if args.kind != "accel" and args.spec is not None:
        parser.error("--spec is an option of the accel driver")
    return args


def device_options(args: argparse.Namespace) -> dict[str, object]:
    """The options of the device kind being started."""
    if args.kind == "gpu":
        return {"cl_device": args.cl_device or "gpu", "memory_limit_mb": args.gpu_memory_mb}
    if args.kind == "accel":
        return {"spec_path": args.spec}
    # NNRT_CPU_ENGINE: the default engine of every CPU driver started without --engine
    # (how the test suite runs whole with either engine).
    return {"engine": args.engine or os.environ.get("NNRT_CPU_ENGINE", "ort"),
            "threads": args.threads, "int8_kernels": args.int8_kernels}


def fault_injection(args: argparse.Namespace) -> FaultInjection:
    """The FaultInjection the options ask for; allowed at runtime when any of them is given."""
    faults = Faults(
        **{name: getattr(args, f"fault_{name}") for name in PLAIN_FIELDS},
        device_status=None if args.fault_device_status is None
        else DEVICE_STATUS[args.fault_device_status],
    )
    allowed = (args.fault_injection or faults.any or args.fault_slow_start_ms > 0
               or args.fault_admit_delay_ms > 0 or args.fault_seed is not None)
    return FaultInjection(faults, allowed=allowed, seed=args.fault_seed,
                          slow_start_ms=args.fault_slow_start_ms,
                          admit_delay_ms=args.fault_admit_delay_ms)


def watch_lifeline(fd: int, stop: threading.Event) -> None:
    """Stop the driver when the pipe `fd` reaches EOF or fails: its write end lives only in
    the parent (client/core/embedded.py), and the kernel closes it however the parent ends,
    SIGKILL included. A pipe, not PR_SET_PDEATHSIG: that signal fires when the parent
    *thread* that forked exits, which would kill a driver an application started from a
    short-lived thread."""
    def watch() -> None:
        try:
            while os.read(fd, 4096):
                pass  # nothing is ever written; data would only mean a confused parent
            log.warning("lifeline fd %d closed: the parent process is gone, stopping", fd)
        except OSError as exc:
            log.warning("lifeline fd %d failed (%s): stopping", fd, exc)
        stop.set()

    threading.Thread(target=watch, name="nnrt-lifeline", daemon=True).start()


def wait_for_takeover(fd: int, stop: threading.Event) -> bool:
    """A spare's wait (`--standby-fd`): say ready on `fd`, then block until the device
    manager says go (True) or the socket reaches EOF, fails, or the process is asked to stop
    (False). Nothing has claimed a socket yet, so a spare that never gets its go leaves
    nothing behind."""
    channel = socket.socket(fileno=fd)
    try:
        channel.sendall(b"R")
        log.info("standby: loaded, waiting to take over")
        while not stop.is_set():
            # select wakes at once on the go; the timeout only bounds a SIGTERM's wait.
            readable, _, _ = select.select([channel], [], [], 0.2)
            if not readable:
                continue
            data = channel.recv(16)
            if data.startswith(b"G"):
                log.warning("standby: the live driver is gone, taking over")
                return True
            if not data:
                log.info("standby: the device manager let this spare go (or is gone): "
                         "exiting")
                return False
            log.warning("standby: unexpected %r on the standby socket: ignored", data)
        return False
    except OSError as exc:
        log.warning("standby: the standby socket failed (%s): exiting", exc)
        return False
    finally:
        channel.close()


def configure_budgets(args: argparse.Namespace) -> None:
    """The process's memory budgets (server/buffers.py, hdi/reference/graph_checks.py) from the
    options; an option left out keeps its documented default."""
    def mib(n: int | None) -> int | None:
        return None if n is None else n << 20

    buffers.configure_budget(mib(args.max_driver_memory_mb), mib(args.max_session_memory_mb))
    reference.configure_model_memory_limit(mib(args.max_model_memory_mb))


def channel_policy(args: argparse.Namespace) -> ChannelPolicy:
    """The session channel's limits the options ask for."""
    return ChannelPolicy(max_runs_per_session=args.max_runs_per_session,
                         max_sessions_per_uid=args.max_sessions_per_uid,
                         max_uid_memory=None if args.max_uid_memory_mb is None
                         else args.max_uid_memory_mb << 20,
                         allow_uids=frozenset(args.allow_uid),
                         allow_gids=frozenset(args.allow_gid),
                         spin_s=args.spin_us / 1e6 if usable_cores() > 1 else 0.0)


def raise_fd_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns (soft, hard) in force.

    Every session, buffer and gRPC connection holds fds, and systemd's default soft limit
    (1024) is reached by ~500 small buffers of one session. The hard limit is what the
    administrator granted (LimitNOFILE= in the units); the soft one is only a guard for
    programs that select() on fds below 1024, which nothing in a driver does (epoll). An
    unlimited hard limit is capped at the kernel's fs.nr_open."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if hard == resource.RLIM_INFINITY:
        try:
            target = int(Path("/proc/sys/fs/nr_open").read_text())
        except (OSError, ValueError):
            target = 1 << 20
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError) as exc:
            log.warning("cannot raise the fd limit from %d to %d: %s", soft, target, exc)
    log.info("fd limit: %s (hard %s)", soft, hard)
    return soft, hard


def setup_logging(level: str, name: str) -> None:
    """stderr; to the journal (a unit's, or the device manager's stderr that is one) with
    `<N>` priorities and no timestamp, else with a timestamp and the level's name. The
    driver's name stays in every line: the device manager's drivers share its journal."""
    handler = logging.StreamHandler(sys.stderr)
    if stderr_is_journal():
        handler.setFormatter(JournalFormatter(f"nnrt-driver[{name}] %(name)s: %(message)s"))
    else:
        handler.setFormatter(logging.Formatter(
            f"%(asctime)s nnrt-driver[{name}] %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup_logging(args.log_level, args.name or args.kind)
    faults = fault_injection(args)
    if faults.allowed:
        log.warning("FAULT INJECTION ENABLED (SetFaults allowed); in force: %s", faults.describe())
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    if args.lifeline_fd is not None:
        watch_lifeline(args.lifeline_fd, stop)
    raise_fd_limit()
    directory, name = args.runtime_dir or runtime_dir(), args.name or args.kind
    cache_key.configure(cache_key.state_dir(args.state_dir, directory))  # read at the first cache
    lock: DriverLock | None = None
    try:
        # The name lock first (common/runtime_dir.py): a driver still loading is seen as
        # alive by the embedded driver's start rules, and a second one of this name stops
        # here. A spare takes it only at its go: the live driver holds it until it dies.
        if args.standby_fd is None:
            lock = DriverLock.acquire(directory, name)
        configure_budgets(args)
        device = load_device(args.kind, **device_options(args))
        host = DriverHost(device, directory, name, faults,
                          stall_timeout=args.stall_timeout, channel_policy=channel_policy(args))
        if args.standby_fd is not None:
            if not wait_for_takeover(args.standby_fd, stop):
                device.close()
                return 0
            lock = DriverLock.acquire(directory, name)
        if faults.slow_start_ms:
            log.warning("FAULT INJECTION: waiting %d ms before serving", faults.slow_start_ms)
            if stop.wait(faults.slow_start_ms / 1000):
                log.info("stopped before serving")
                device.close()
                lock.release()
                return 0
        host.start()
        metrics = None
        if args.metrics_address is not None:
            try:
                metrics = MetricsServer(DriverCollector(host.admin.status, name, device.kind),
                                        *parse_address(args.metrics_address))
            except OSError as exc:
                log.error("cannot serve metrics on %s: %s", args.metrics_address, exc)
                host.stop(0)
                lock.release()
                return 1
        notifier = Notifier()
        serving = f"serving {device.name} on {host.session_path}"
        notifier.send("READY=1", f"STATUS={serving}")
    except (DriverAlreadyRunning, NameLocked) as exc:
        log.error("%s", exc)
        if lock is not None:
            lock.release()
        return 3
    except (DeviceUnavailable, UnsafeRuntimeDir) as exc:
        log.error("%s", exc)
        if lock is not None:
            lock.release()
        return 1
    except Exception:
        log.exception("driver failed to start")
        if lock is not None:
            lock.release()
        return 1
    if notifier.enabled:  # a unit of its own (Type=notify): pings only while it serves
        keep_watchdog(notifier, lambda: host.unhealthy_reason, stop, serving)
    else:
        stop.wait()
    notifier.send("STOPPING=1", "STATUS=stopping")
    if metrics is not None:
        metrics.close()
    host.stop(args.grace)
    lock.release()
    # A run that ignored the grace (a hung device) must not keep the process alive: the
    # interpreter would join its worker thread at exit. Everything is released by now.
    logging.shutdown()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
