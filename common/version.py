"""The installed distribution's version, for every `--version` (importlib.metadata)."""

from __future__ import annotations


def installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nnrt")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"
