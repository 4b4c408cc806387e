"""`nnrt compile`: a saved model (.nnrt) to a device's offline model.

    $ nnrt compile mlp.nnrt --device accel -o mlp.npubin --float16
    wrote mlp.npubin: 2114 bytes
    model:     mlp.nnrt ('NNR_Model', 3 nodes, 1408 bytes of weights)
    spec:      npu-sim-default@bdb0e1a443563d95 (built-in)
    ...

An offline model is a device's own compiled binary, loaded by PrepareOfflineModel
(`OH_NNCompilation_ConstructWithOfflineModelFile` / `...Buffer`,
`Compiled.from_offline`). Only the NPU simulator has an offline format (`.npubin`,
drivers/accel/offline.py), so `--device` names a device kind, and `accel` is the one it
takes. The compiler runs as a subprocess (`python -m nnrt.drivers.accel.compile`): the
client does not import driver code, and no driver needs to be running — but the binary
loads only on a driver with the same device specification (`--spec`, default the
built-in one).

Exit codes (those of the compiler): 0 written, 1 the model cannot be compiled for the
device (the reason is printed, e.g. a float32 model without --float16) or the output cannot
be written, 2 bad usage or bad input (another device kind: "no offline format for device
kind X"; an unreadable or invalid model or spec file).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from nnrt.client.commands.common import EXIT_FAILURE, EXIT_USAGE
from nnrt.common.devmgr_cli import module_argv

# device kind -> the module that compiles its offline models (run with `python -m`)
COMPILERS = {"accel": "nnrt.drivers.accel.compile"}
_ALIASES = {"accelerator": "accel", "npu": "accel", "nnrt-npu-sim": "accel"}


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "compile", help="compile a saved model into a device's offline model (.npubin)",
        description="Compile a saved model (.nnrt) into the offline model of a device kind "
                    "(accel: the NPU simulator's .npubin), for PrepareOfflineModel.")
    parser.add_argument("model", type=Path, help="the saved model (.nnrt)")
    parser.add_argument("--device", "-d", required=True, metavar="KIND",
                        help="the device kind to compile for (accel)")
    parser.add_argument("-o", "--output", type=Path,
                        help="the binary to write (default: MODEL with the device's suffix)")
    parser.add_argument("--spec", type=Path,
                        help="accel: the device specification (TOML) of the driver that will "
                             "load it (default: the built-in one)")
    parser.add_argument("--float16", action="store_true",
                        help="compile a float32 model in relaxed precision (float16)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    kind = _ALIASES.get(args.device.lower(), args.device.lower())
    module = COMPILERS.get(kind)
    if module is None:
        print(f"nnrt compile: no offline format for device kind {args.device} "
              f"(kinds with one: {', '.join(sorted(COMPILERS))})", file=sys.stderr)
        return EXIT_USAGE
    command = [*module_argv(module), str(args.model)]
    if args.output is not None:
        command += ["-o", str(args.output)]
    if args.spec is not None:
        command += ["--spec", str(args.spec)]
    if args.float16:
        command.append("--float16")
    code = subprocess.run(command, stdin=subprocess.DEVNULL, check=False).returncode
    return code if code in (0, EXIT_FAILURE, EXIT_USAGE) else EXIT_FAILURE
