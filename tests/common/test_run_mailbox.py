"""common/run_mailbox.py: the shared pages of a polled Run — both ends over one memfd, the
order of its words, and the fds a driver refuses to map."""

from __future__ import annotations

import fcntl
import os
import time

import pytest

from nnrt.common import run_mailbox
from nnrt.common.run_mailbox import (CLIENT_MARGIN_NS, MAILBOX_BYTES, SLOT_BYTES,
                                     MailboxRefused, RunMailbox)


@pytest.fixture
def ends():
    """(client end, driver end) of one mailbox, as the session channel pairs them."""
    client, fd = RunMailbox.create()
    try:
        driver = RunMailbox.adopt(fd)
    finally:
        os.close(fd)
    yield client, driver
    client.close()
    driver.close()


def _memfd(size: int, flags: int = os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING) -> int:
    fd = os.memfd_create("t", flags)
    os.ftruncate(fd, size)
    return fd


def test_the_client_makes_a_sealed_memfd_of_the_mailbox_size():
    mailbox, fd = RunMailbox.create()
    try:
        assert os.fstat(fd).st_size == MAILBOX_BYTES
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        assert seals & fcntl.F_SEAL_SHRINK and seals & fcntl.F_SEAL_GROW
        with pytest.raises(OSError):
            os.ftruncate(fd, 4096)  # a client cannot fault the driver by shrinking it
    finally:
        os.close(fd)
        mailbox.close()


def test_a_request_goes_across_and_is_taken_once(ends):
    client, driver = ends
    assert driver.posted() == 0
    packet = b"R" + bytes(range(200))
    client.put_request(7, packet)
    assert driver.posted() == 7
    assert driver.take_request() == (7, packet)
    assert driver.posted() == 0  # taken: not again
    client.put_request(9, b"R" * SLOT_BYTES)  # the largest that fits
    assert driver.take_request() == (9, b"R" * SLOT_BYTES)


def test_a_reply_is_the_clients_only_for_its_own_seq(ends):
    client, driver = ends
    assert not client.replied(3) and client.reply(3) is None
    driver.put_reply(3, b"R" + b"\x03" * 20)
    assert client.replied(3) and client.reply(3) == b"R" + b"\x03" * 20
    assert not client.replied(4) and client.reply(4) is None


def test_the_driver_says_how_long_it_polls(ends):
    client, driver = ends
    assert not client.driver_polls()
    driver.open_window(time.monotonic_ns() + 10_000_000)
    assert client.driver_polls()
    driver.open_window(time.monotonic_ns() + CLIENT_MARGIN_NS // 2)  # too close to its end
    assert not client.driver_polls()
    driver.open_window(time.monotonic_ns() + 10_000_000)
    driver.close_window()
    assert not client.driver_polls()


@pytest.mark.parametrize("length", [0, SLOT_BYTES + 1, 1 << 62])
def test_a_request_length_out_of_bounds_is_refused_and_taken(ends, length):
    client, driver = ends
    client.put_request(5, b"R" * 16)
    client._words[1] = length  # a client that writes the page as it likes
    with pytest.raises(ValueError, match="mailbox request of"):
        driver.take_request()
    assert driver.posted() == 0  # not looked at again


def test_a_reply_length_out_of_bounds_reads_as_none(ends):
    client, driver = ends
    driver.put_reply(5, b"R" * 16)
    driver._words[9] = SLOT_BYTES + 1
    assert client.reply(5) is None


def test_the_driver_copies_the_request_before_anyone_reads_it(ends):
    client, driver = ends
    client.put_request(1, b"R" + b"a" * 63)
    _, taken = driver.take_request()
    client.put_request(1, b"R" + b"b" * 63)  # rewritten behind the driver's back
    assert taken == b"R" + b"a" * 63


def test_a_pipe_is_no_mailbox():
    r, w = os.pipe()
    try:
        with pytest.raises(MailboxRefused, match="not a sealable memfd"):
            RunMailbox.adopt(r)
    finally:
        os.close(r), os.close(w)


def test_a_memfd_of_another_size_is_refused():
    for size in (MAILBOX_BYTES - 4096, MAILBOX_BYTES * 2):
        fd = _memfd(size)
        try:
            with pytest.raises(MailboxRefused, match=f"{size} bytes"):
                RunMailbox.adopt(fd)
        finally:
            os.close(fd)


def test_a_memfd_that_cannot_be_sealed_is_refused():
    fd = _memfd(MAILBOX_BYTES, os.MFD_CLOEXEC)  # no MFD_ALLOW_SEALING: F_SEAL_SEAL set
    try:
        with pytest.raises(MailboxRefused, match="cannot be sealed against shrinking"):
            RunMailbox.adopt(fd)
    finally:
        os.close(fd)


def test_a_write_sealed_memfd_is_refused():
    fd = _memfd(MAILBOX_BYTES)
    try:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)
        with pytest.raises(MailboxRefused, match="cannot be mapped shared for writing"):
            RunMailbox.adopt(fd)
    finally:
        os.close(fd)


@pytest.mark.parametrize("machine, ordered", [("x86_64", True), ("AMD64", True),
                                              ("i686", True), ("aarch64", False),
                                              ("riscv64", False), ("ppc64le", False)])
def test_the_mailbox_is_offered_on_x86_only(machine, ordered):
    assert run_mailbox.ordered_machine(machine) is ordered


def test_closing_unmaps(ends):
    client, driver = ends

    def mapped() -> int:
        with open("/proc/self/maps") as maps:
            return sum("nnrt-run-mailbox" in line for line in maps)

    assert mapped() == 2
    client.close()
    driver.close()
    assert mapped() == 0
