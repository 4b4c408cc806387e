"""`nnrt devmgr`: the device manager, a supervisor that runs the configured drivers.

    nnrt devmgr                                   # /etc/nnrt/devmgr.toml, else one cpu driver
    nnrt devmgr --config deploy/devmgr.toml --runtime-dir /tmp/rt
    python -m nnrt.devmgr ...                     # the same, as `nnrt devmgr` execs it

The device manager is manager.py; its drivers' supervision supervisor.py (warm spares:
standby.py); what it asks of drivers and of /proc probes.py; its Prometheus metrics
metrics.py (`--metrics-address`).

Logs go to stderr, one line per event; when stderr is the journal (`JOURNAL_STREAM`) lines
carry a `<N>` syslog priority and no timestamp.
Exit codes: 0 clean stop, 1 failed to start (bad configuration, ...), 2 bad usage,
3 another device manager already runs in the runtime directory.
"""

from __future__ import annotations

import argparse
import logging
import sys

from nnrt.devmgr.config import default_config_path
from nnrt.common.devmgr_cli import add_arguments
from nnrt.server.sd_notify import Notifier
from nnrt.server.journal import JournalFormatter, stderr_is_journal
from nnrt.common.runtime_dir import runtime_dir

from . import metrics as metrics_module
from .manager import DeviceManager

log = logging.getLogger("nnrt.devmgr")


def setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if stderr_is_journal():
        handler.setFormatter(JournalFormatter("%(message)s"))
    else:
        handler.setFormatter(
            logging.Formatter("%(asctime)s nnrt-devmgr %(levelname)s: %(message)s"))
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)


def run(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)
    explicit = args.config is not None
    path = args.config if explicit else default_config_path()
    notifier = Notifier()
    metrics = None
    try:
        manager = DeviceManager(path, args.runtime_dir or runtime_dir(), notifier,
                                explicit_config=explicit)
        if getattr(args, "metrics_address", None):
            try:
                metrics = metrics_module.serve(manager, args.metrics_address)
            except (OSError, ValueError) as exc:
                log.error("cannot serve metrics on %s: %s", args.metrics_address, exc)
                return 1
        return manager.run()
    finally:
        if metrics is not None:
            metrics.close()
        notifier.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nnrt devmgr",
                                     description="Run and supervise the configured NNRt drivers.")
    add_arguments(parser)
    return run(parser.parse_args(argv))
