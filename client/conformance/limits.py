"""Section `limits`: memory reported and enforced, several sessions at once.

* the driver reports its memory budgets (the admin status every `nnrt-driver` serves) and,
  where the device has memory of its own, how much (its `details`, "... (N bytes)");
* an instance started with small budgets (--max-session-memory-mb and friends) refuses the
  AllocateBuffer that would pass one with NNRT_OUT_OF_MEMORY, keeps serving what is held, and
  allocates again once a buffer is released; the device's own memory, where reported, is
  refused past its size the same way;
* several sessions (client connections) prepare and run at once, each getting its own answers.
"""

from __future__ import annotations

import re
import threading

import numpy as np

from nnrt.common import errors as e
from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na

from .context import Context, CheckSkipped, add_model, expect, expect_code, prepare, release
from .models import run_prepared

SECTION = "limits"
MIB = 1 << 20
SESSION_MB, DRIVER_MB = 16, 24
CHUNK_MB = 4
SESSIONS = 4
RUNS_PER_SESSION = 25
DEVICE_CHUNK = 256 * MIB
_BYTES = re.compile(r"\((\d+) bytes\)")
_SIZE = re.compile(r"(\d+(?:\.\d+)?) ?(KiB|MiB|GiB|TiB)")
_UNITS = {"KiB": 1 << 10, "MiB": MIB, "GiB": 1 << 30, "TiB": 1 << 40}
WEIGHTS_CHECK_MAX = 64 * MIB  # device memory a check may fill with one model's weights


def device_memory(details: dict[str, str]) -> int | None:
    """The device's own memory as its admin details report it, None when they do not: a
    `device_memory` entry ("1 GiB (1073741824 bytes)", "512 MiB") or a `*_mib` / `*_bytes`
    entry named memory_limit or device_memory (the GPU driver's memory_limit_mib)."""
    for key in ("device_memory_bytes", "memory_limit_bytes"):
        if details.get(key, "").isdigit():
            return int(details[key])
    for key in ("device_memory_mib", "memory_limit_mib"):
        if details.get(key, "").isdigit():
            return int(details[key]) * MIB
    value = details.get("device_memory", "")
    found = _BYTES.search(value)
    if found:
        return int(found.group(1))
    found = _SIZE.fullmatch(value.strip())
    if found:
        return int(float(found.group(1)) * _UNITS[found.group(2)])
    return None


def _reported(ctx: Context) -> int | None:
    with ctx.check(SECTION, "memory budgets are reported") as out:
        status = ctx.driver.admin_status()
        expect(status.sharedMemoryBudgetBytes > 0 and status.sessionMemoryBudgetBytes > 0,
               f"budgets: driver {status.sharedMemoryBudgetBytes}, session "
               f"{status.sessionMemoryBudgetBytes} bytes")
        device = device_memory(dict(status.details))
        out.detail = (f"driver {status.sharedMemoryBudgetBytes // MIB} MiB, session "
                      f"{status.sessionMemoryBudgetBytes // MIB} MiB, device "
                      f"{'not reported' if device is None else f'{device // MIB} MiB'}")
        return device
    return None


def _allocate_until_refused(client, chunk: int, limit: int) -> tuple[list, int]:
    """Allocate `chunk`-byte buffers until one is refused or more than `limit` bytes are
    held: (the buffers, the refusal's code or NNRT_SUCCESS)."""
    held = []
    while len(held) * chunk <= limit:
        code, memory = client.allocate_buffer(chunk)
        if code != e.NNRT_SUCCESS:
            return held, code
        held.append(memory)
    return held, e.NNRT_SUCCESS


def _free(client, memories: list) -> None:
    for memory in memories:
        memory.close()
        if client.alive:
            client.release_buffer(memory.descriptor())
    memories.clear()


def _budgets_enforced(ctx: Context) -> None:
    with ctx.check(SECTION, f"a {SESSION_MB} MiB session budget is enforced "
                            "(NNRT_OUT_OF_MEMORY), what is held keeps working") as out:
        small = ctx.start_driver("conformance-limits", [
            "--max-session-memory-mb", str(SESSION_MB), "--max-driver-memory-mb",
            str(DRIVER_MB), "--max-uid-memory-mb", str(DRIVER_MB)])
        status = small.admin_status()
        expect(status.sessionMemoryBudgetBytes == SESSION_MB * MIB,
               f"session budget reported {status.sessionMemoryBudgetBytes} bytes, started with "
               f"{SESSION_MB} MiB")
        first, second = small.client(), small.client()
        held_first: list = []
        held_second: list = []
        model_id = 0
        try:
            # a model and its buffers held before the budget is spent keep working after
            code, model_id, reason = prepare(first, add_model(), ctx.config())
            expect_code(code, e.NNRT_SUCCESS, "PrepareModel", reason)
            io = []
            for _ in range(2):  # the model's input and output
                code, memory = first.allocate_buffer(16)
                expect_code(code, e.NNRT_SUCCESS, "AllocateBuffer(16)")
                io.append(memory)
                held_first.append(memory)
            spent, code = _allocate_until_refused(first, CHUNK_MB * MIB, SESSION_MB * MIB)
            held_first.extend(spent)
            expect_code(code, e.NNRT_OUT_OF_MEMORY,
                        f"AllocateBuffer past the session budget ({len(spent)} x "
                        f"{CHUNK_MB} MiB held)")
            expect(len(spent) * CHUNK_MB <= SESSION_MB < (len(spent) + 1) * CHUNK_MB + 1,
                   f"{len(spent)} buffers of {CHUNK_MB} MiB fit a {SESSION_MB} MiB budget")
            io[0].array(np.float32, [4])[:] = 1.0
            tensors = [ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=[4],
                                   format=ht.FORMAT_NONE, data=m.descriptor()) for m in io]
            reply = first.run(model_id, tensors[:1], tensors[1:], timeout=30)
            expect_code(reply.returnCode, e.NNRT_SUCCESS, "Run while the session's budget is "
                        "spent", reply.reason)
            want = 1.0 + np.arange(4, dtype=np.float32)
            got = io[1].array(np.float32, [4]).copy()
            expect(np.array_equal(got, want), f"Run while the budget is spent: {got.tolist()}")
            held_second, code = _allocate_until_refused(second, CHUNK_MB * MIB, DRIVER_MB * MIB)
            expect_code(code, e.NNRT_OUT_OF_MEMORY, "AllocateBuffer past the driver budget "
                        f"from another session ({len(held_second)} x {CHUNK_MB} MiB held)")
            _free(first, spent[:1])
            held_first.remove(spent[0])
            code, memory = second.allocate_buffer(CHUNK_MB * MIB)
            expect_code(code, e.NNRT_SUCCESS, "AllocateBuffer after another session released one")
            held_second.append(memory)
            out.detail = (f"{SESSION_MB} MiB per session, {DRIVER_MB} MiB in all, enforced in "
                          f"{CHUNK_MB} MiB buffers")
        finally:
            release(first, model_id)
            _free(first, held_first)
            _free(second, held_second)
            first.close()
            second.close()
            small.kill()


def _device_memory_enforced(ctx: Context, device: int | None) -> None:
    """Client buffers past the device's memory are refused where the device keeps them (an
    NPU, the template driver); where it does not (a GPU copies them at run), a model whose
    weights exceed it is refused instead, when that is small enough to try."""
    if device is None:
        ctx.skip(SECTION, "device memory is enforced", "the device reports no memory of its own")
        return
    with ctx.check(SECTION, "device memory is enforced (NNRT_OUT_OF_MEMORY past its size)") as out:
        status = ctx.driver.admin_status()
        if device > status.sessionMemoryBudgetBytes:
            raise CheckSkipped(f"the device's {device // MIB} MiB exceed the session budget "
                               f"({status.sessionMemoryBudgetBytes // MIB} MiB), which refuses first")
        client = ctx.driver.client()
        held: list = []
        chunk = min(DEVICE_CHUNK, max(device // 4, MIB))
        try:
            held, code = _allocate_until_refused(client, chunk, device)
            if code == e.NNRT_OUT_OF_MEMORY:
                expect(len(held) * chunk <= device,
                       f"{len(held) * chunk // MIB} MiB allocated on a {device // MIB} MiB device")
                out.detail = (f"{device // MIB} MiB: buffers refused after "
                              f"{len(held) * chunk // MIB} MiB")
                return
            expect_code(code, e.NNRT_SUCCESS, f"AllocateBuffer({chunk})")
            _free(client, held)  # buffers live in host memory here: the weights must not fit
            if device > WEIGHTS_CHECK_MAX:
                raise CheckSkipped(f"client buffers are not device memory here, and "
                                   f"{device // MIB} MiB is too much to fill with weights")
            code, model_id, reason = prepare(client, _weights_model(device + MIB), ctx.config())
            release(client, model_id)
            expect_code(code, e.NNRT_OUT_OF_MEMORY, f"PrepareModel of {(device + MIB) // MIB} "
                        f"MiB of weights on a {device // MIB} MiB device", reason)
            out.detail = f"{device // MIB} MiB: a model of {(device + MIB) // MIB} MiB refused"
        finally:
            _free(client, held)
            client.close()


def _weights_model(nbytes: int) -> HdiModelBuilder:
    """y = x + w with a float32 constant w of `nbytes`."""
    n = nbytes // 4
    b = HdiModelBuilder("conformance-weights")
    x = b.input("x", np.float32, [n])
    w = b.constant("w", np.zeros(n, np.float32))
    y = b.tensor("y", np.float32, [n])
    b.node(na.NODE_TYPE_ADD_FUSION, [x, w], [y])
    b.mark_outputs(y)
    return b


def _concurrent_sessions(ctx: Context) -> None:
    with ctx.check(SECTION, f"{SESSIONS} sessions prepare and run at once") as out:
        errors: list[str] = []
        start = threading.Barrier(SESSIONS, timeout=30)

        def session(index: int) -> None:
            try:
                client = ctx.driver.client()
            except Exception as exc:  # noqa: BLE001 (reported as the check's failure)
                errors.append(f"session {index}: {exc}")
                start.abort()
                return
            try:
                code, model_id, reason = prepare(client, add_model(), ctx.config())
                if code != e.NNRT_SUCCESS:
                    errors.append(f"session {index}: PrepareModel {code} {reason}")
                    start.abort()  # the others go on at once instead of at the timeout
                    return
                try:
                    start.wait()
                except threading.BrokenBarrierError:
                    return  # another session failed first: its error is the verdict
                rng = np.random.default_rng(index)
                for _ in range(RUNS_PER_SESSION):
                    x = (rng.integers(-64, 64, 4) * 0.25).astype(np.float32)  # exact in float16 too
                    result = run_prepared(client, model_id, [x], [np.zeros(4, np.float32)],
                                          ht.FORMAT_NONE)
                    want = x + np.arange(4, dtype=np.float32)
                    if result.code != e.NNRT_SUCCESS or not np.array_equal(result.outputs[0], want):
                        errors.append(f"session {index}: run answered {result.code}, "
                                      f"{None if result.outputs is None else result.outputs[0]}")
                        return
                release(client, model_id)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"session {index}: {type(exc).__name__}: {exc}")
            finally:
                client.close()

        threads = [threading.Thread(target=session, args=(i,), daemon=True,
                                    name=f"conformance-session-{i}") for i in range(SESSIONS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        expect(not any(t.is_alive() for t in threads), "sessions still running after 120 s")
        expect(not errors, "; ".join(errors[:4]))
        out.detail = f"{SESSIONS} x {RUNS_PER_SESSION} runs"


def run(ctx: Context) -> None:
    device = _reported(ctx)
    _budgets_enforced(ctx)
    _device_memory_enforced(ctx, device)
    _concurrent_sessions(ctx)
