"""The `nnrt` command line as a process, and what its help texts must not name."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


CLI_TIMEOUT = 60  # s, a bound on every command (each takes well under 2 s)


def nnrt(*args: str | Path, runtime_dir: Path, cwd: Path | None = None,
         **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "NNRT_RUNTIME_DIR": str(runtime_dir), **env}
    if "NNRT_NO_EMBEDDED" not in env:
        environment["NNRT_NO_EMBEDDED"] = "1"  # a test that wants the embedded driver says so
    return subprocess.run([sys.executable, "-m", "nnrt.client.cli", *map(str, args)],
                          env=environment, cwd=cwd, capture_output=True, text=True,
                          timeout=CLI_TIMEOUT)


# What a pip-installed user does not have: the checkout's source files and folders.
SOURCE_NAMES = re.compile(r"\.py\b|\.\./|\bshared/|\bbenchmarks\b|\b(?:client|server|drivers|"
                          r"deploy|tests|protos)/|\bREADME\b|\./dev\b")
