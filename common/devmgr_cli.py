"""The device manager's command line (`nnrt devmgr`, `python -m nnrt.devmgr`): its
options, checked the same way whichever front end parses them, and the argv that hands a
parsed command line on to the device manager's own process (the CLI execs it: the pid a
service manager started stays the device manager's).
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from pathlib import Path

CHILD_CWD = "/"  # where nnrt's own child processes (drivers, the device manager) start
DEFAULT_PORT = 9720  # the metrics endpoint's
DEFAULT_HOST = "127.0.0.1"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path,
                        help="TOML file of the drivers to run (default: $NNRT_DEVMGR_CONFIG, "
                             "else /etc/nnrt/devmgr.toml, else one cpu driver)")
    parser.add_argument("--runtime-dir", type=Path,
                        help="socket directory (default: $NNRT_RUNTIME_DIR, see README)")
    parser.add_argument("--log-level", default="INFO", choices=LOG_LEVELS)
    parser.add_argument("--metrics-address", metavar="HOST:PORT", type=metrics_address,
                        help="serve Prometheus metrics over HTTP there (off by default; "
                             "HOST alone: port 9720, :PORT: 127.0.0.1)")


def metrics_address(text: str) -> str:
    try:
        parse_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def parse_address(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `HOST`, `:PORT` or `[V6]:PORT` -> (host, port); ValueError otherwise."""
    text = text.strip()
    if not text:
        raise ValueError("empty address")
    if text.startswith("["):  # [v6] or [v6]:port
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"bad address {text!r}: expected [IPV6]:PORT")
        ipaddress.IPv6Address(host)
        port_text = rest[1:] if rest else ""
    elif text.count(":") > 1:
        raise ValueError(f"bad address {text!r}: write an IPv6 host in brackets, [::1]:PORT")
    else:
        host, _, port_text = text.partition(":")
        host = host or DEFAULT_HOST
    if not port_text:
        port = DEFAULT_PORT
    elif port_text.isdigit() and 0 <= int(port_text) <= 65535:
        port = int(port_text)
    else:
        raise ValueError(f"bad port {port_text!r} in {text!r}: 0-65535")
    return host, port


def module_argv(module: str) -> list[str]:
    """The command that runs nnrt's `module` (`python -m`) in a child process: with `-P`, so
    that neither the caller's working directory nor a script's directory comes first on
    `sys.path` (`-m` puts the cwd there: an `argparse.py` planted where the application runs
    would run inside the driver). PYTHONPATH and the site packages (an editable install
    included) still apply: they are the installation's, not the working directory's. Run it
    with `cwd=CHILD_CWD` too, so that nothing relative resolves in the caller's directory."""
    return [sys.executable, "-P", "-m", module]


def devmgr_argv(args: argparse.Namespace, log_level: str) -> list[str]:
    """The command that runs the device manager `args` (parsed by add_arguments) describe."""
    argv = [*module_argv("nnrt.devmgr"), "--log-level", log_level]
    if args.config is not None:
        argv += ["--config", str(args.config)]
    if args.runtime_dir is not None:
        argv += ["--runtime-dir", str(args.runtime_dir)]
    if getattr(args, "metrics_address", None):
        argv += ["--metrics-address", args.metrics_address]
    return argv
