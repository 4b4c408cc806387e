"""Section `recovery`: a driver SIGKILLed in the middle of a run, and its caches.

* the client waiting for that run is told (DriverGone: OH_NN_CONNECTION_EXCEPTION at the
  API), promptly, and the conformance process keeps no fd of the dead session;
* the driver restarted under the same name and runtime directory prepares from the cache
  its dead predecessor exported, with the same answers;
* a corrupted cache (one byte flipped, or cut short) and a foreign one (exported by another
  instance, under another key) are refused with NNRT_INVALID_MODEL_CACHE (hdi.md 3.12, 8.1).

The run is held in flight by the host's own fault option (--fault-run-delay-ms), which every
driver served by `nnrt-driver` has.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import numpy as np

from nnrt.client.core.errors import DriverGone
from nnrt.common import errors as e
from nnrt.protos import hdi_types_pb2 as ht

from .capabilities import exported, prepare_from_blobs
from .context import CheckFailed, CheckSkipped, Context, add_model, expect, expect_code, prepare, release
from .driver_process import PrivateRuntime
from .models import run_prepared

SECTION = "recovery"
CRASH_NAME = "conformance-crash"
RUN_DELAY_MS = 5000  # the run in flight when the driver is killed
TOLD_WITHIN = 5.0  # s: from SIGKILL to the waiting client's DriverGone
FD_SETTLE = 5.0  # s: for gRPC's own threads to close what the dead channel held
X = np.float32([1.5, -2.0, 3.25, 0.0])


def open_fds() -> set[int]:
    return {int(fd) for fd in os.listdir("/proc/self/fd")}


def _settled_fds(before: set[int]) -> set[int]:
    """The fds opened since `before` still open after FD_SETTLE seconds at most."""
    deadline = time.monotonic() + FD_SETTLE
    while True:
        extra = open_fds() - before
        if not extra or time.monotonic() > deadline:
            return {fd for fd in extra if _target(fd)}
        time.sleep(0.1)


def _target(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


def _expected() -> np.ndarray:
    return X + np.arange(4, dtype=np.float32)


def _run_add(client, model_id: int) -> np.ndarray:
    result = run_prepared(client, model_id, [X], [np.zeros(4, np.float32)], ht.FORMAT_NONE)
    expect_code(result.code, e.NNRT_SUCCESS, "Run", result.reason)
    return result.outputs[0]


def _crash(ctx: Context, caching: bool) -> list[bytes] | None:
    """The kill in the middle of a run; the blobs the dead driver exported (caching)."""
    blobs: list[bytes] | None = None
    with ctx.check(SECTION, "SIGKILL mid-run: the waiting client is told, promptly") as out:
        before = open_fds()
        crash = ctx.start_driver(CRASH_NAME, ["--fault-run-delay-ms", str(RUN_DELAY_MS)])
        client = crash.client()
        memories = []
        try:
            code, model_id, reason = prepare(client, add_model(), ctx.config())
            expect_code(code, e.NNRT_SUCCESS, "PrepareModel", reason)
            if caching:
                saved = ctx.client
                ctx.client = client
                try:
                    blobs = exported(ctx, model_id)
                finally:
                    ctx.client = saved
            for _ in range(2):
                code, memory = client.allocate_buffer(16)
                expect_code(code, e.NNRT_SUCCESS, "AllocateBuffer(16)")
                memories.append(memory)
            memories[0].array(np.float32, [4])[:] = X
            io = [ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=[4],
                              format=ht.FORMAT_NONE, data=m.descriptor()) for m in memories]
            told: list[BaseException | object] = []

            def wait_for_run() -> None:
                try:
                    told.append(client.run(model_id, io[:1], io[1:], timeout=60))
                except BaseException as exc:  # what the client is told is the verdict
                    told.append(exc)

            waiter = threading.Thread(target=wait_for_run, name="conformance-crash-run",
                                      daemon=True)
            waiter.start()
            time.sleep(0.5)  # the run has reached the driver and sits in its delay
            killed = time.monotonic()
            # the client core's warning of the death is this check's expected outcome
            core_log = logging.getLogger("nnrt.client.core.driver")
            level = core_log.level
            core_log.setLevel(logging.ERROR)
            try:
                crash.kill()
                waiter.join(TOLD_WITHIN + 1)
            finally:
                core_log.setLevel(level)
            expect(not waiter.is_alive(), f"the client waiting for the run was not told "
                   f"within {TOLD_WITHIN:g} s of the SIGKILL")
            seconds = time.monotonic() - killed
            expect(told and isinstance(told[0], DriverGone),
                   f"the run in flight ended with {told[0]!r}, not DriverGone "
                   f"(OH_NN_CONNECTION_EXCEPTION)" if told else "no answer")
            expect(not client.alive, "the session still says alive after the driver died")
            out.detail = f"told in {seconds * 1000:.0f} ms: {told[0]}"
        finally:
            for memory in memories:
                memory.close()
            client.close()
    with ctx.check(SECTION, "SIGKILL mid-run: no fd of the dead session left in the client"):
        leaked = _settled_fds(before)
        expect(not leaked, f"{len(leaked)} fds left open: "
               + ", ".join(f"{fd} -> {_target(fd)}" for fd in sorted(leaked)[:8]))
    return blobs


def _restart(ctx: Context, blobs: list[bytes]) -> None:
    with ctx.check(SECTION, "a restarted driver prepares from the cache the dead one wrote"):
        restarted = ctx.start_driver(CRASH_NAME)
        client = restarted.client()
        try:
            reply = prepare_from_blobs(client, blobs, ctx.config())
            expect_code(reply.returnCode, e.NNRT_SUCCESS,
                        "PrepareModelFromModelCache of the killed driver's cache", reply.reason)
            y = _run_add(client, reply.preparedModelId)
            expect(np.array_equal(y, _expected()), f"y = {y.tolist()}, expected "
                   f"{_expected().tolist()}")
            release(client, reply.preparedModelId)
        finally:
            client.close()


def _refused(ctx: Context, name: str, blobs: list[bytes]) -> None:
    with ctx.check(SECTION, f"a {name} cache is refused with NNRT_INVALID_MODEL_CACHE"):
        reply = prepare_from_blobs(ctx.client, blobs, ctx.config())
        release(ctx.client, reply.preparedModelId)
        expect_code(reply.returnCode, e.NNRT_INVALID_MODEL_CACHE,
                    f"PrepareModelFromModelCache of a {name} cache", reply.reason)


def _bad_caches(ctx: Context) -> None:
    try:
        code, model_id, reason = prepare(ctx.client, add_model(), ctx.config())
        if code != e.NNRT_SUCCESS:
            raise CheckSkipped(f"the add model does not prepare: {reason}")
        blobs = exported(ctx, model_id)
        release(ctx.client, model_id)
    except (CheckFailed, CheckSkipped) as exc:
        ctx.skip(SECTION, "corrupted and foreign caches", f"no cache to damage: {exc}")
        return
    flipped = bytearray(blobs[0])
    flipped[len(flipped) // 2] ^= 0x10
    _refused(ctx, "corrupted (one byte flipped)", [bytes(flipped), *blobs[1:]])
    _refused(ctx, "truncated", [blobs[0][: len(blobs[0]) // 2], *blobs[1:]])
    # another instance of the driver in a runtime (and state) directory of its own: another key
    elsewhere = PrivateRuntime()
    try:
        with ctx.check(SECTION, "a foreign cache (another instance, another key) is refused "
                                "with NNRT_INVALID_MODEL_CACHE"):
            other = ctx.start_driver("conformance-foreign", runtime=elsewhere.path)
            client = other.client()
            try:
                code, model_id, reason = prepare(client, add_model(), ctx.config())
                expect_code(code, e.NNRT_SUCCESS, "PrepareModel on the other instance", reason)
                saved, ctx.client = ctx.client, client
                try:
                    foreign = exported(ctx, model_id)
                finally:
                    ctx.client = saved
            finally:
                client.close()
                other.kill()
            reply = prepare_from_blobs(ctx.client, foreign, ctx.config())
            release(ctx.client, reply.preparedModelId)
            expect_code(reply.returnCode, e.NNRT_INVALID_MODEL_CACHE,
                        "PrepareModelFromModelCache of another instance's cache", reply.reason)
    finally:
        elsewhere.close()


def run(ctx: Context) -> None:
    caching = bool(ctx.capabilities.get("IsModelCacheSupported"))
    blobs = _crash(ctx, caching)
    if not caching:
        for name in ("a restarted driver prepares from the cache the dead one wrote",
                     "corrupted and foreign caches"):
            ctx.skip(SECTION, name, "the driver has no model cache (IsModelCacheSupported)")
        return
    if blobs is None:
        ctx.skip(SECTION, "a restarted driver prepares from the cache the dead one wrote",
                 "the crashed driver exported no cache (see the check above)")
    else:
        _restart(ctx, blobs)
    _bad_caches(ctx)
