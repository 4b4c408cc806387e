"""The `nnrt` command.

    nnrt demo     drivers up (embedded ones if none is running), an MLP compiled and run
                  across processes, the result shown and checked against numpy;
                  `--recovery`: a driver killed and wedged under a device manager, its
                  recovery shown live (commands/demo.py)
    nnrt devmgr   the device manager: runs the configured drivers and keeps them running
                  (devmgr/); `nnrt devmgr stop|start|restart DRIVER` controls a
                  running one (commands/control.py)
    nnrt fault    set, clear or show the faults a running driver injects (commands/control.py)
    nnrt devices  one line per device (client/commands/devices.py)
    nnrt status   the device manager and drivers: health, runs, memory (client/commands/status.py)
    nnrt run      compile a model (.nnrt or .onnx) and run it once on .npy inputs (commands/run.py)
    nnrt bench    latency percentiles and throughput of a model (commands/bench.py)
    nnrt convert  an ONNX model (.onnx) to a saved model (.nnrt) (commands/convert.py)
    nnrt compile  a saved model to a device's offline model, e.g. the NPU simulator's
                  .npubin (commands/compile.py)
    nnrt conformance --driver "KIND [OPTIONS]"   certify a driver through the HDI: codes,
                  operators, capabilities, crashes, caches, limits (commands/conformance.py)
    nnrt completion bash   a shell completion script from this parser (commands/completion.py)

Decisions, so that it behaves like its peers:

- Exit codes: one per kind of failure, the same in every subcommand (EXIT_CODES in
  client/commands/common.py, shown by `nnrt --help` and in the README).
- `--version` prints the installed distribution's version (importlib.metadata).
- `-v/--verbose` (repeatable: each one a level more, from WARNING — the device manager:
  from INFO) and `--log-level LEVEL` are taken before the subcommand and after it; after it
  wins for `--log-level`, and the `-v`s of both places add up.
- Ctrl-C (SIGINT): the first one raises KeyboardInterrupt, so that sessions close and an
  embedded driver is stopped as at any end; the command then ends with exit 130 and one
  line on stderr, `nnrt: interrupted`, never a traceback. A second Ctrl-C while that
  cleanup runs ends the process at once (130, the same line; an embedded driver still
  goes, through its lifeline). The handler is installed before the heavy imports (numpy,
  gRPC), which is why they happen inside `main`. `nnrt devmgr` is a daemon: it installs its
  own handler, and SIGINT there is a requested stop (exit 0), as SIGTERM is.
- `nnrt demo` has a deadline (`--timeout`, default DEMO_TIMEOUT s) for its job: listing
  the devices, compiling and running; finding or starting the drivers is bounded on its own
  (client/core/embedded.py). Past it: exit 1, one line.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import textwrap
import time

log = logging.getLogger("nnrt")

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
RUNTIME_DIR_DEFAULT = ("default /run/nnrt when it exists and we may enter it, else "
                       "$XDG_RUNTIME_DIR/nnrt, else /tmp/nnrt-$UID")
DEMO_TIMEOUT = 30.0  # s: the demo's job; its runs take milliseconds, its compile ~0.1 s
INTERRUPTED_LINE = "nnrt: interrupted"
# client/commands/common.py's EXIT_INTERRUPTED (a test holds them equal): not imported, since
# that import is heavy and a Ctrl-C may come while it runs.
EXIT_INTERRUPTED = 130


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("nnrt")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


# -- Ctrl-C -------------------------------------------------------------------------------


def _leave_interrupted(_signum=None, _frame=None) -> None:
    """The second Ctrl-C: cleanup is taking too long for the person; go now."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    os.write(2, (INTERRUPTED_LINE + "\n").encode())
    os._exit(130)


def _quiet_teardown() -> None:
    """The command ends by the person's will (Ctrl-C) or its deadline: what the teardown then
    logs at WARNING and below (runs abandoned, sessions closed under them) is the expected
    consequence, not news; the one line says it all. ERROR still shows. `main` undoes it."""
    logging.disable(logging.WARNING)


def _first_interrupt(_signum, _frame) -> None:
    signal.signal(signal.SIGINT, _leave_interrupted)
    _quiet_teardown()
    raise KeyboardInterrupt


def _install_interrupt_handler() -> None:
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not ignored by a parent
        signal.signal(signal.SIGINT, _first_interrupt)


# -- the demo -------------------------------------------------------------------------------


class _DemoDeadline(BaseException):
    """Past the demo's deadline; a BaseException, as KeyboardInterrupt, so that no
    `except Exception` on the way turns it into an error code."""


def _on_alarm(_signum, _frame) -> None:
    _quiet_teardown()
    raise _DemoDeadline


def cmd_demo(args: argparse.Namespace) -> int:
    if args.recovery:
        from nnrt.client.commands.demo import RECOVERY_TIMEOUT, cmd_recovery

        if args.device is not None:
            from nnrt.client.commands.common import EXIT_USAGE, say

            say("demo: --device does not go with --recovery (its drivers are cpu0 and cpu1)")
            return EXIT_USAGE
        args.timeout = args.timeout or RECOVERY_TIMEOUT
        return cmd_recovery(args)
    if args.json:
        from nnrt.client.commands.common import EXIT_USAGE, say

        say("demo: --json goes with --recovery")
        return EXIT_USAGE
    args.timeout = args.timeout or DEMO_TIMEOUT
    import numpy as np

    from nnrt.client.commands.common import EXIT_FAILURE, EXIT_UNREACHABLE, say
    from nnrt.client.demo import NoDevice, run_demo
    from nnrt.client.core.device import registry
    from nnrt.client.core.embedded import embedded_disabled, find_or_start
    from nnrt.common.runtime_dir import ENV as RUNTIME_ENV

    try:  # an embedded driver is announced by the report below ("runtime dir: ..."), once
        directory, embedded = find_or_start(announce=False)
    except RuntimeError as exc:
        say(f"demo: {'no device: ' if embedded_disabled() else ''}{exc}")
        return EXIT_UNREACHABLE if embedded_disabled() else EXIT_FAILURE
    os.environ[RUNTIME_ENV] = str(directory)  # the front end finds its devices there
    # The deadline is SIGALRM's (it interrupts any wait in this, the main thread); a timer
    # armed before (pytest-timeout's, say) is put back with what is left of it.
    old_handler = signal.signal(signal.SIGALRM, _on_alarm)
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, args.timeout)
    armed = time.monotonic()
    try:
        result = run_demo(args.device, timeout=args.timeout)
    except _DemoDeadline:
        say(f"demo: did not finish within {args.timeout:g} s (--timeout)")
        return EXIT_FAILURE
    except NoDevice as exc:
        say(f"demo: {exc}")
        return EXIT_UNREACHABLE
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_delay:
            left = max(old_delay - (time.monotonic() - armed), 0.001)
            signal.setitimer(signal.ITIMER_REAL, left, old_interval)
        registry().close()  # end our sessions before the drivers go
        if embedded is not None:
            embedded.stop()
    np.set_printoptions(precision=4, suppress=True)
    where = (f"{directory} (embedded driver started for this run, now stopped)"
             if embedded is not None else f"{directory} (running drivers)")
    print(f"runtime dir:   {where}")
    print(f"device:        {result.device} (its driver runs in its own process)")
    print("model:         MLP 16 -> 32 (ReLU) -> 10 (softmax), batch 4, via nnrt.client")
    print(f"compile:       {result.compile_ms:.1f} ms   run: {result.run_ms:.2f} ms")
    print("probabilities:")
    print(result.probabilities)
    ok = result.max_error < 1e-5
    print(f"numpy check:   max |error| = {result.max_error:.2e}  {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else EXIT_FAILURE


# -- the parser -----------------------------------------------------------------------------


def _logging_options(parser: argparse.ArgumentParser, *, top: bool = False,
                     level: bool = True) -> None:
    """-v and --log-level; SUPPRESS defaults, so a subcommand's never hides the top's."""
    suffix = "_top" if top else ""
    group = parser.add_argument_group("logging")
    group.add_argument("-v", "--verbose", action="count", dest="verbose" + suffix,
                       default=argparse.SUPPRESS,
                       help="log more: -v INFO, -vv DEBUG (nnrt devmgr: from INFO)")
    if level:
        group.add_argument("--log-level", type=str.upper, choices=LEVELS,
                           dest="log_level" + suffix, default=argparse.SUPPRESS,
                           help="log at this level (default WARNING; nnrt devmgr: INFO)")


def _epilog() -> str:
    from nnrt.client.commands.common import EXIT_CODES
    from nnrt.client.core.driver import DEFAULT_SPIN_US, SPIN_ENV
    from nnrt.client.core.embedded import DEFAULT_WAIT, WAIT_ENV
    from nnrt.client.core.run_mailbox import MAILBOX_ENV

    lines = ["exit codes (the same for every command):"]
    for code, meaning in EXIT_CODES.items():
        lines += textwrap.wrap(meaning, 78, initial_indent=f"  {code:<4} ",
                               subsequent_indent=" " * 7)
    lines += [""] + textwrap.wrap(
        f"environment: NNRT_RUNTIME_DIR, where the drivers' sockets are ({RUNTIME_DIR_DEFAULT}); "
        "NNRT_NO_EMBEDDED=1: never start an embedded CPU driver when none runs; "
        f"{WAIT_ENV}: seconds to wait for a driver or device manager that is starting in the "
        f"runtime dir before using it (default {DEFAULT_WAIT:g}); {SPIN_ENV}: how long a run "
        f"the driver answers at once polls for its reply while a CPU is spare, 0-10000 us "
        f"(default {DEFAULT_SPIN_US}; 0: never); {MAILBOX_ENV}=0: such a run always on the "
        f"socket, never through the session's Run mailbox in shared memory (default 1).", 78)
    lines += [""] + textwrap.wrap(
        "durations (--timeout, --interval, --seconds) are seconds, or a number with a unit: "
        "200ms, 1.5s, 2m.", 78)
    return "\n".join(lines)


def cmd_devmgr(args: argparse.Namespace) -> int:
    """`nnrt devmgr`: becomes the device manager's process (exec: same pid, so a service
    manager's signals and readiness protocol reach the device manager itself)."""
    from nnrt.common.devmgr_cli import devmgr_argv

    argv = devmgr_argv(args, args.log_level)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(argv[0], argv)
    return 1  # not reached: execv returns only by raising


def build_parser() -> argparse.ArgumentParser:
    from nnrt.client.commands import bench, completion, conformance, control, devices, run, status
    from nnrt.client.commands import compile as compile_command
    from nnrt.client.commands import convert as convert_command
    from nnrt.client.commands.common import duration, positive_int
    from nnrt.client.commands.demo import DEFAULT_CLIENTS, RECOVERY_TIMEOUT
    from nnrt.common import devmgr_cli

    parser = argparse.ArgumentParser(prog="nnrt", description="NNRt drivers and clients.",
                                     epilog=_epilog(),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"nnrt {version()}")
    _logging_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser("demo", help="run the main job end to end; --recovery: watch a "
                                       "driver crash and recover",
                          description="Start drivers if none runs (an embedded CPU driver), "
                                      "compile an MLP on a device, run it and check the "
                                      "result against numpy. With --recovery: a device "
                                      "manager with two CPU drivers in a private runtime "
                                      "dir, client processes running the MLP in a loop, "
                                      "and a driver killed (SIGKILL) and wedged (SIGSTOP) "
                                      "under cold restart, warm standby and failover to the "
                                      "other device, shown live with a summary.")
    demo.add_argument("--device", help="device name (default: the first device)")
    demo.add_argument("--timeout", type=duration, default=None, metavar="DURATION",
                      help=f"deadline of the whole job (seconds, or e.g. 200ms; default "
                           f"{DEMO_TIMEOUT:g} s, with --recovery {RECOVERY_TIMEOUT:g} s)")
    demo.add_argument("--recovery", action="store_true",
                      help="recovery you can watch: kill and wedge a driver, see it come back")
    demo.add_argument("--clients", type=positive_int, default=DEFAULT_CLIENTS, metavar="N",
                      help=f"--recovery: client processes running the model "
                           f"(default {DEFAULT_CLIENTS})")
    demo.add_argument("--json", action="store_true",
                      help="--recovery: print the results as JSON (live lines on stderr)")
    demo.set_defaults(func=cmd_demo)
    devmgr = sub.add_parser("devmgr", help="run and supervise the configured drivers",
                            description="Run the drivers of a TOML configuration, restart them "
                                        "when they fail; SIGHUP reloads, SIGTERM stops.")
    devmgr_cli.add_arguments(devmgr)
    devmgr.set_defaults(func=cmd_devmgr)
    for action_parser in control.add_devmgr_actions(devmgr).values():
        _logging_options(action_parser)
    for action in devmgr._actions:
        if action.dest == "log_level":  # its own stays; unset, the top's or -v decide (_level)
            action.default = argparse.SUPPRESS
        if "--runtime-dir" in action.option_strings:  # not "see README": pip installs none
            action.help = ("socket directory (default: $NNRT_RUNTIME_DIR, else "
                           f"{RUNTIME_DIR_DEFAULT.removeprefix('default ')})")
    for module in (devices, status, run, bench, compile_command, convert_command, conformance,
                   completion):
        module.add_parser(sub)
    fault_actions = control.add_parser(sub)
    for name, subparser in sub.choices.items():
        _logging_options(subparser, level=name != "devmgr")
    for action_parser in fault_actions:
        _logging_options(action_parser)
    return parser


def _daemon(args: argparse.Namespace) -> bool:
    """`nnrt devmgr` itself (not one of its control actions)."""
    return args.command == "devmgr" and not getattr(args, "devmgr_action", None)


def _level(args: argparse.Namespace) -> str:
    explicit = getattr(args, "log_level", None) or getattr(args, "log_level_top", None)
    if explicit:
        return explicit
    base = logging.INFO if _daemon(args) else logging.WARNING
    verbose = getattr(args, "verbose", 0) + getattr(args, "verbose_top", 0)
    return logging.getLevelName(max(logging.DEBUG, base - 10 * verbose))


def main(argv: list[str] | None = None) -> int:
    previous = signal.getsignal(signal.SIGINT)
    _install_interrupt_handler()
    try:
        return _main(argv)
    finally:  # main() may be called in a longer process (tests)
        signal.signal(signal.SIGINT, previous)
        logging.disable(logging.NOTSET)


def _main(argv: list[str] | None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        args.log_level = _level(args)
        if not _daemon(args):  # the device manager sets up its own (journald)
            logging.basicConfig(level=args.log_level, stream=sys.stderr,
                                format="nnrt: %(levelname)s %(name)s: %(message)s")
        try:
            return args.func(args)
        except Exception as exc:  # a clear message and a usable exit code, not a traceback
            log.error("%s failed: %s", args.command, exc)
            return 1  # EXIT_FAILURE
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, _leave_interrupted)  # the rest must not be stopped halfway
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        print(INTERRUPTED_LINE, file=sys.stderr)
        return EXIT_INTERRUPTED
    except _DemoDeadline:  # the alarm came between the demo's end and its disarming
        print(f"nnrt: demo: did not finish within {args.timeout:g} s (--timeout)",
              file=sys.stderr)
        return 1  # EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
