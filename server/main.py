"""`nnrt-driver <kind>`: run one driver in the foreground.

    nnrt-driver cpu                       # $NNRT_RUNTIME_DIR/cpu.sock (+ cpu.session)
    nnrt-driver cpu --name cpu1 --runtime-dir /tmp/rt
    nnrt-driver cpu --fault-run-delay-ms 500

SIGTERM or SIGINT: stop accepting, let calls in flight finish (up to --grace seconds),
remove the sockets, exit 0. Exit codes: 0 clean stop, 1 failed to start, 2 bad usage,
3 another driver already listens on the socket.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from nnrt.drivers import DEVICE_KINDS, load_device
from nnrt.server.faults import FaultInjection
from nnrt.server.host import DriverAlreadyRunning, DriverHost
from nnrt.server.runtime_dir import runtime_dir

log = logging.getLogger("nnrt.driver")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="nnrt-driver", description="Run one NNRt HDI driver in the foreground.")
    parser.add_argument("kind", choices=sorted(DEVICE_KINDS), help="which device to serve")
    parser.add_argument("--name", help="socket name (default: the kind)")
    parser.add_argument("--runtime-dir", type=Path,
                        help="socket directory (default: $NNRT_RUNTIME_DIR, see README)")
    parser.add_argument("--grace", type=float, default=10.0,
                        help="seconds calls in flight may take to finish at SIGTERM (default 10)")
    parser.add_argument("--log-level", default="INFO",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    faults = parser.add_argument_group("fault injection (for tests; off by default)")
    faults.add_argument("--fault-run-delay-ms", type=int, default=0, metavar="N",
                        help="delay every Run by N ms (abandoned when its caller gives up)")
    faults.add_argument("--fault-run-hang", action="store_true",
                        help="every Run blocks forever")
    faults.add_argument("--fault-exit-on-run", type=int, default=0, metavar="N",
                        help="SIGKILL this process at the Nth Run")
    faults.add_argument("--fault-exit-on-prepare", type=int, default=0, metavar="N",
                        help="SIGKILL this process at the Nth Prepare* call")
    args = parser.parse_args(argv)
    for option in ("fault_run_delay_ms", "fault_exit_on_run", "fault_exit_on_prepare"):
        if getattr(args, option) < 0:
            parser.error(f"--{option.replace('_', '-')} must be >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level, stream=sys.stderr,
        format=f"%(asctime)s nnrt-driver[{args.name or args.kind}] %(levelname)s %(name)s: %(message)s",
    )
    faults = FaultInjection(
        run_delay_ms=args.fault_run_delay_ms,
        run_hang=args.fault_run_hang,
        exit_on_run=args.fault_exit_on_run,
        exit_on_prepare=args.fault_exit_on_prepare,
    )
    if faults.enabled:
        log.warning("FAULT INJECTION ENABLED: %s", faults.describe())
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        device = load_device(args.kind)
        host = DriverHost(device, args.runtime_dir or runtime_dir(), args.name or args.kind, faults)
        host.start()
    except DriverAlreadyRunning as exc:
        log.error("%s", exc)
        return 3
    except Exception:
        log.exception("driver failed to start")
        return 1
    stop.wait()
    host.stop(args.grace)
    # A run that ignored the grace (a hung device) must not keep the process alive: the
    # interpreter would join its worker thread at exit. Everything is released by now.
    logging.shutdown()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
