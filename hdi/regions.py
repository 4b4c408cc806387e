"""What the host tells a driver about the shared-memory regions it maps for clients.

A device that wraps client windows in objects of its own (the GPU driver's zero-copy
buffers) must drop them before the host unmaps the region under them (server/buffers.py
calls `notify_unmap` just before every munmap).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

# Called with (address, size) of a region just before it is unmapped: a device that wraps
# client windows in objects of its own (the GPU driver's zero-copy buffers) drops them there.
_unmap_listeners: list[Callable[[int, int], None]] = []


def on_unmap(listener: Callable[[int, int], None]) -> Callable[[], None]:
    """Call `listener(address, size)` before every region is unmapped; returns its remover."""
    _unmap_listeners.append(listener)
    return lambda: _unmap_listeners.remove(listener) if listener in _unmap_listeners else None


def notify_unmap(address: int, size: int) -> None:
    """Tell every listener that the region at `address` is about to be unmapped."""
    for listener in list(_unmap_listeners):
        try:
            listener(address, size)
        except Exception:  # a device's bookkeeping must not keep a region mapped
            log.exception("unmap listener failed for a region of %d bytes", size)
