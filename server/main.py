"""`nnrt-driver <kind>`: run one driver in the foreground.

    nnrt-driver cpu                       # $NNRT_RUNTIME_DIR/cpu.sock (+ cpu.session)
    nnrt-driver cpu --name cpu1 --runtime-dir /tmp/rt
    nnrt-driver cpu --fault-run-delay-ms 500
    nnrt-driver cpu --fault-injection     # no fault yet; the admin SetFaults may set some
    nnrt-driver gpu                       # the first OpenCL GPU
    nnrt-driver gpu --cl-device any       # any OpenCL device (PoCL's CPU device in tests)
    nnrt-driver gpu --cl-device 1:0 --gpu-memory-mb 4096
    nnrt-driver accel --spec npu-sim.toml   # the NPU simulator with a spec of your own
    nnrt-driver template --help           # a vendor's kind: the host's options, then its own

KIND is an installed driver kind (nnrt.hdi.plugin: the `nnrt.drivers` entry points, ours
among them, and $NNRT_DRIVER_PLUGINS); it comes before its own options, since it decides
which exist. Its options are declared by its plugin (drivers/<kind>/kind.py for ours),
the rest are the host's, here.

The driver first takes its name lock, `flock` on `<runtime dir>/<name>.lock` with its pid
in it (common/runtime_dir.py), so that a driver still loading is visible and a second one of
that name stops at once (exit 3).
SIGTERM or SIGINT: stop accepting, let calls in flight finish (up to --grace seconds),
remove the sockets and the lock file, exit 0. `--lifeline-fd N` (client/core/embedded.py): the same stop when
the inherited pipe N reaches EOF, i.e. the process holding its write end is gone.

`--standby-fd N` (devmgr/standby.py, `standby = true`): a warm spare. The process imports
everything and creates its device, then, before claiming any socket, says b"R" (ready) on
the inherited socket N and waits there: b"G" (go) from the device manager means the live
driver of this name died, so it claims the (stale) sockets and serves at once; EOF means
the device manager let it go or died, and it exits 0 without ever having served. A socket
rather than a signal: the go cannot arrive before the process listens for it, and its EOF
doubles as a second lifeline.
Exit codes: 0 clean stop, 1 failed to start (no such OpenCL device, say, or a driver plugin
that cannot be used), 2 bad usage, 3 another driver already listens on the socket.
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
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from nnrt.hdi.plugin import (DeviceUnavailable, DriverKind, PluginError, installed_kinds)
from nnrt.hdi.reference import graph_checks as reference
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
from nnrt.server.channel_connection import DEFAULT_MAX_RUNS_PER_SESSION, SPIN_S, ChannelPolicy
from nnrt.server.channel_server import MAX_SPIN_US
from nnrt.server.uid_quotas import DEFAULT_MAX_SESSIONS_PER_UID

log = logging.getLogger("nnrt.driver")


def build_parser(kind: DriverKind | None = None, origin: str = "",
                 add_help: bool = True) -> argparse.ArgumentParser:
    """nnrt-driver's argument parser: the host's options and, given a kind, that driver's own
    (one argument group, declared by its plugin). `parse_args` picks the kind and adds the
    range checks; the device manager's configuration checks a driver's `options` with it
    (devmgr/config.py)."""
    parser = argparse.ArgumentParser(
        prog="nnrt-driver", description="Run one NNRt HDI driver in the foreground.",
        epilog=_kinds_epilog() if kind is None and add_help else None, add_help=add_help,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", nargs=None if add_help else "?",
                        help="which device to serve (an installed driver kind; "
                             "`nnrt devices --kinds` lists them; its options follow it)")
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
                              "Run before sleeping, while a CPU is spare (no runnable task "
                              "waits for one): saves the wake-up of a sleeping thread, costs "
                              "up to that much CPU per run, only while one client runs back "
                              "to back; 0: never (default "
                              f"{round(SPIN_S * 1e6)}, 0 on a single CPU)")
    channel.add_argument("--allow-uid", type=int, action="append", default=[], metavar="UID",
                         help="only processes of this uid (repeatable), or of an --allow-gid "
                              "group, may open sessions (default: anyone who can open the "
                              "0660 socket)")
    channel.add_argument("--allow-gid", type=int, action="append", default=[], metavar="GID",
                         help="only processes in this group (primary or supplementary; "
                              "repeatable), or of an --allow-uid, may open sessions")
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
    if kind is not None:
        group = parser.add_argument_group(
            f"{kind.name} driver ({origin or 'its own options'})", kind.summary)
        before = len(parser._actions)
        kind.add_options(group)
        parser.set_defaults(driver_dests=tuple(a.dest for a in parser._actions[before:]))
    return parser


def _kinds_epilog() -> str:
    lines = ["driver kinds (`nnrt-driver KIND --help`: its options):"]
    for name, entry in installed_kinds().items():
        try:
            summary = entry.load().summary
        except PluginError:
            summary = f"unusable ({entry.where}): see the log"
        lines.append(f"  {name:<10} {summary}")
    if len(lines) == 1:
        lines.append("  none installed (reinstall nnrt: its own kinds are entry points)")
    return "\n".join(lines)


def _declared(kind: DriverKind) -> list[tuple[str, ...]]:
    """The option strings of each option a kind declares, in its order."""
    probe = argparse.ArgumentParser(add_help=False)
    try:
        kind.add_options(probe.add_argument_group(kind.name))
    except Exception:  # that plugin's fault, reported when that kind is started
        return []
    return [tuple(a.option_strings) for a in probe._actions if a.option_strings]


def _whose(given: list[str], this: str) -> str | None:
    """`--x and --y are options of the gpu driver` when an option given to `this` kind is
    another installed kind's; None when no kind declares it."""
    names = {g.partition("=")[0] for g in given}
    for name, entry in installed_kinds().items():
        if name == this:
            continue
        try:
            declared = _declared(entry.load())
        except PluginError:
            continue
        if any(names & set(strings) for strings in declared):
            options = [strings[-1] for strings in declared]
            listed = options[0] if len(options) == 1 else \
                f"{', '.join(options[:-1])} and {options[-1]}"
            return (f"{listed} {'is an option' if len(options) == 1 else 'are options'} of "
                    f"the {name} driver")
    return None


def parse_args(argv: list[str] | None,
               error: Callable[[str], NoReturn] | None = None) -> argparse.Namespace:
    """The options of `nnrt-driver KIND ...`: the kind first (it decides which options
    exist), then the host's and the kind's options, checked. `args.driver_kind` is the
    kind's DriverKind, `args.driver_options` its own options alone. A usage error goes to
    `error` (default: argparse's, exit 2); an unusable kind raises PluginError (exit 1)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    first = build_parser(add_help=False)
    if error is not None:
        first.error = error
    known, _ = first.parse_known_args(argv)
    if known.kind is None:  # `nnrt-driver --help`, or no kind: the full parser says it
        whole = build_parser()
        if error is not None:
            whole.error = error
        whole.parse_args(argv)
        first.error("the following arguments are required: kind")
    entry = installed_kinds().get(known.kind)
    if entry is None:
        # `--engine numpy cpu`: the kind's option came before the kind, which decides it
        later = [w for w in argv if w in installed_kinds()]
        first.error(f"argument kind: invalid choice: {known.kind!r} (choose from "
                    f"{', '.join(installed_kinds()) or 'none: no driver kind is installed'})"
                    + (f"; put the kind {later[0]!r} before its own options" if later else ""))
    kind = entry.load()
    try:
        parser = build_parser(kind, f"{entry.target}, {entry.origin}")
    except Exception as exc:  # argparse's conflict with a host option, or the plugin's bug
        raise PluginError(f"{entry.where}: its options cannot be declared: {exc}") from None
    if error is not None:
        parser.error = error
    args, extras = parser.parse_known_args(argv)
    if extras:
        parser.error(_whose([e for e in extras if e.startswith("-")], kind.name)
                     or f"unrecognized arguments: {' '.join(extras)}")
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
    for option in ("max_driver_memory_mb", "max_session_memory_mb", "max_uid_memory_mb",
                   "max_model_memory_mb"):
        if getattr(args, option) is not None and getattr(args, option) <= 0:
            parser.error(f"--{option.replace('_', '-')} must be > 0")
    args.driver_kind = kind
    args.driver_options = argparse.Namespace(
        **{dest: getattr(args, dest) for dest in args.driver_dests})
    try:
        kind.check_options(args.driver_options)
    except ValueError as exc:
        parser.error(str(exc))
    return args


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
    try:
        args = parse_args(argv)
    except PluginError as exc:  # an unusable driver plugin: a start failure, not bad usage
        setup_logging("INFO", "plugin")
        log.error("%s", exc)
        return 1
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
        device = args.driver_kind.create(args.driver_options)
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
