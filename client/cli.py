"""The `nnrt` command.

    nnrt demo     drivers up (embedded ones if none is running), an MLP compiled and run
                  across processes, the result shown and checked against numpy
    nnrt devmgr   the device manager: runs the configured drivers and keeps them running
                  (server/devmgr.py)
    nnrt devices  one line per device (client/commands/devices.py)
    nnrt status   the device manager and drivers: health, runs, memory (client/commands/status.py)
    nnrt run      compile a model (.nnrt or .onnx) and run it once on .npy inputs (commands/run.py)
    nnrt bench    latency percentiles and throughput of a model (commands/bench.py)
    nnrt convert  an ONNX model (.onnx) to a saved model (.nnrt) (commands/convert.py)
    nnrt compile  a saved model to a device's offline model, e.g. the NPU simulator's
                  .npubin (commands/compile.py; exit codes 0, 1 refused, 2 bad usage / input)

`devices`, `status`, `run` and `bench` take `--json`. Exit codes: 0 success, 1 the job
failed, 2 bad usage (`run`, `bench`: also a bad model file or inputs), 3 nothing running /
not reachable (`devices`, `status`; `run`, `bench`: no device), or another device manager
already runs (`devmgr`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import numpy as np

from nnrt.client.demo import run_demo
from nnrt.client.commands import bench, devices, run, status
from nnrt.client.commands import compile as compile_command
from nnrt.client.commands import convert as convert_command
from nnrt.client.devices import registry
from nnrt.client.embedded import find_or_start
from nnrt.server import devmgr as devmgr_module
from nnrt.server.runtime_dir import ENV as RUNTIME_ENV

log = logging.getLogger("nnrt")


def cmd_demo(args: argparse.Namespace) -> int:
    directory, embedded = find_or_start()
    os.environ[RUNTIME_ENV] = str(directory)  # the front end finds its devices there
    try:
        result = run_demo(args.device)
    finally:
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
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nnrt", description="NNRt drivers and clients.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the main job end to end")
    demo.add_argument("--device", help="device name (default: the first device)")
    demo.set_defaults(func=cmd_demo)
    devmgr = sub.add_parser("devmgr", help="run and supervise the configured drivers",
                            description="Run the drivers of a TOML configuration, restart them "
                                        "when they fail; SIGHUP reloads, SIGTERM stops.")
    devmgr_module.add_arguments(devmgr)
    devmgr.set_defaults(func=devmgr_module.run)
    devices.add_parser(sub)
    status.add_parser(sub)
    run.add_parser(sub)
    bench.add_parser(sub)
    compile_command.add_parser(sub)
    convert_command.add_parser(sub)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        stream=sys.stderr, format="nnrt: %(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except Exception as exc:  # a clear message and a usable exit code, not a traceback
        log.error("%s failed: %s", args.command, exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
