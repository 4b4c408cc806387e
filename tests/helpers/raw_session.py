"""A session on a driver's session channel opened by hand, for tests that speak the protocol
badly (garbage, nesting, fds the driver must close)."""

from __future__ import annotations

import socket

from nnrt.common import session_channel as channel


def raw_session(driver, timeout: float = 5.0) -> socket.socket:
    """A connected session socket, its hello read (and any fds it carried closed)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.settimeout(timeout)
    sock.connect(str(driver.session_path))
    hello, fds = channel.receive_message(sock)
    channel.close_fds(fds)
    assert hello and hello["protocol"] == channel.PROTOCOL_VERSION, hello
    return sock
