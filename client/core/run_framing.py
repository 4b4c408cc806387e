"""A Run's framing on the client side: the RunRequest's bytes made by hand, the handle that
cancels a Run in flight (`RunTicket`), and the check of a reply against the run's deadline.

`DriverClient` (driver.py) sends what `run_request_bytes` makes over the session channel;
these pieces know nothing of its socket.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from nnrt.protos import hdi_pb2 as pb
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common.errors import NNRT_TIME_OUT

from .errors import DriverGone

if TYPE_CHECKING:
    from .driver import DriverClient


# RunRequest (hdi.proto) by hand from serialized IOTensors: `preparedModelId = 1` as protobuf
# writes it, then `inputs = 2` and `outputs = 3` as length-delimited records — byte for byte
# what RunRequest(...).SerializeToString() gives, without building the message.
_INPUT_TAG, _OUTPUT_TAG = b"\x12", b"\x1a"
PROFILE_FIELD = b"\xa0\x06\x01"  # `profile = 100` true (nnrt bench --profile)
_SMALL_VARINTS = [bytes((n,)) for n in range(128)]
_run_prefixes: dict[int, bytes] = {}


def _varint(n: int) -> bytes:
    if n < 128:
        return _SMALL_VARINTS[n]
    out = bytearray()
    while n >= 128:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _run_prefix(model_id: int) -> bytes:
    if type(model_id) is not int:  # anything else: protobuf's own checks and errors
        return pb.RunRequest(preparedModelId=model_id).SerializeToString()
    prefix = _run_prefixes.get(model_id)
    if prefix is None:
        prefix = pb.RunRequest(preparedModelId=model_id).SerializeToString()
        if len(_run_prefixes) >= 1024:
            _run_prefixes.clear()
        _run_prefixes[model_id] = prefix
    return prefix


def run_request_bytes(model_id: int, inputs: Sequence[ht.IOTensor | bytes],
                      outputs: Sequence[ht.IOTensor | bytes]) -> bytes:
    """The serialized RunRequest; each tensor an IOTensor or its serialized bytes."""
    parts = [_run_prefix(model_id)]
    for tag, tensors in ((_INPUT_TAG, inputs), (_OUTPUT_TAG, outputs)):
        for tensor in tensors:
            if type(tensor) is not bytes:
                if not isinstance(tensor, ht.IOTensor):  # protobuf's conversions and errors
                    return pb.RunRequest(preparedModelId=model_id, inputs=io_messages(inputs),
                                         outputs=io_messages(outputs)).SerializeToString()
                tensor = tensor.SerializeToString()
            parts.append(tag)
            parts.append(_varint(len(tensor)))
            parts.append(tensor)
    return b"".join(parts)


def io_messages(tensors: Sequence[ht.IOTensor | bytes]) -> list:
    """IOTensor messages of tensors given as messages or serialized bytes."""
    return [ht.IOTensor.FromString(t) if type(t) is bytes else t for t in tensors]


class RunTicket:
    """A handle on one Run in flight, to cancel it from another thread (`cancel`). A cancel
    that comes before the run has reached the driver takes effect as soon as it has."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.cancelled = False
        self._target: tuple[DriverClient, int] | None = None

    def started(self, client: DriverClient, seq: int) -> None:
        with self._lock:
            self._target = (client, seq)
            cancel = self.cancelled
        if cancel:
            self._send(client, seq)

    def cancel(self) -> None:
        with self._lock:
            if self.cancelled:
                return
            self.cancelled = True
            target = self._target
        if target is not None:
            self._send(*target)

    @staticmethod
    def _send(client: DriverClient, seq: int) -> None:
        try:
            client.cancel_run(seq)
        except DriverGone:
            pass  # the driver is gone, and the run with it


def unless_past_deadline(reply: pb.RunReply, timeout: float | None,
                         ticket: RunTicket | None) -> pb.RunReply:
    """A Run's reply, or TimeoutError when it says the driver abandoned the run at the
    deadline it was given: that answer can reach the caller before the caller's own timer
    fires (a loaded machine), and the caller sees the same timeout either way. A run
    cancelled through its ticket keeps its reply (its caller asked for that answer)."""
    if timeout is not None and reply.returnCode == NNRT_TIME_OUT and \
            not (ticket is not None and ticket.cancelled):
        raise TimeoutError(f"Run exceeded {timeout} s (the driver abandoned it at that deadline)")
    return reply
