"""`nnrt conformance --driver "KIND [OPTIONS]"`: certify a driver through the HDI alone.

    nnrt conformance --driver cpu
    nnrt conformance --driver "cpu --engine numpy" --quick
    nnrt conformance --driver "gpu --cl-device any" --json > report.json
    nnrt conformance --driver accel --junit conformance.xml

The driver is started as `nnrt-driver KIND OPTIONS` in a private runtime directory and
killed at the end; the sections (client/conformance/) are interface, operators,
capabilities, recovery and limits; `--quick` runs a few cases per operator and skips the
slow sections (recovery, limits). The summary goes to stdout (or the JSON with `--json`),
progress to stderr when it is a terminal.

Exit codes: 0 every required check passed, 1 a check failed or the driver never served,
2 bad usage (an empty --driver, an unknown --section).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from nnrt.client.commands.common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, say

SECTION_NAMES = ("interface", "operators", "capabilities", "recovery", "limits")


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "conformance", help="certify a driver: interface, operators, capabilities, "
                            "recovery, limits",
        description="Start `nnrt-driver KIND [OPTIONS]` in a private runtime directory and "
                    "certify it through the HDI only: the return codes of every method, "
                    "every supported operator against the reference engine, its "
                    "capabilities, a SIGKILL mid-run and its caches, its memory limits and "
                    "concurrent sessions. Exit 0 only when every required check passes.")
    parser.add_argument("--driver", required=True, metavar='"KIND [OPTIONS]"',
                        help="the driver to certify, as nnrt-driver's arguments: a kind and "
                             "its options, e.g. \"gpu --cl-device any\"")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: a few cases per operator, recovery and limits "
                             "skipped")
    parser.add_argument("--section", action="append", choices=SECTION_NAMES, default=None,
                        help="run only this section (repeatable; default: all)")
    parser.add_argument("--json", action="store_true",
                        help="print the report as JSON instead of the summary")
    parser.add_argument("--junit", type=Path, metavar="FILE",
                        help="also write the report as JUnit XML (one testcase per check)")
    parser.set_defaults(func=run)


class _Progress:
    """One updating line on stderr, only when stderr is a terminal."""

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty()
        self.width = 0

    def __call__(self, line: str) -> None:
        if not self.enabled:
            return
        line = line[:100]
        sys.stderr.write("\r" + line.ljust(self.width))
        sys.stderr.flush()
        self.width = len(line)

    def done(self) -> None:
        if self.enabled and self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()


def run(args: argparse.Namespace) -> int:
    from nnrt.client.conformance.driver_process import split_driver_spec
    from nnrt.client.conformance.runner import certify

    try:
        split_driver_spec(args.driver)
    except ValueError as exc:
        say(f"conformance: {exc}")
        return EXIT_USAGE
    progress = _Progress()
    try:
        report = certify(args.driver, quick=args.quick,
                         sections=set(args.section) if args.section else None,
                         progress=progress)
    finally:
        progress.done()
    if args.junit is not None:
        args.junit.write_text(report.junit(), encoding="utf-8")
    if args.json:
        print(json.dumps(report.as_json(), indent=1))
    else:
        print(report.summary())
    return EXIT_OK if report.passed else EXIT_FAILURE
