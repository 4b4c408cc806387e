"""Log lines for the systemd journal: when stderr is the journal stream, each line starts
with its syslog priority (`<N>`, sd-daemon(3)) and carries no timestamp (journald adds its
own). Used by `nnrt devmgr` and `nnrt-driver`; kept apart so a driver need not import the
device manager."""

from __future__ import annotations

import logging
import os
import sys

# syslog priorities of the logging levels
_PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3,
             logging.CRITICAL: 2}


class JournalFormatter(logging.Formatter):
    """`<N>message`: journald reads the syslog priority and adds its own timestamp."""

    def format(self, record: logging.LogRecord) -> str:
        return f"<{_PRIORITY.get(record.levelno, 6)}>{super().format(record)}"


def stderr_is_journal() -> bool:
    """True when stderr is the journal stream systemd names in JOURNAL_STREAM (dev:inode).
    Checked against fd 2 itself: a JOURNAL_STREAM inherited by a process whose stderr was
    redirected elsewhere does not count."""
    value = os.environ.get("JOURNAL_STREAM", "")
    try:
        device, inode = (int(part) for part in value.split(":"))
        st = os.fstat(sys.stderr.fileno())
    except (ValueError, OSError):
        return False
    return (st.st_dev, st.st_ino) == (device, inode)
