"""Section `capabilities`: each Is*Supported answer held against what the driver does.

* float16: said yes → a float32 model prepared with enableFloat16 computes in float16 (an
  input value float16 cannot hold comes back rounded to float16, a sum past 65504 is inf);
  said no → enableFloat16 refused (NNRT_NOT_SUPPORT), never computed in float32 silently.
* performance mode and priority: said yes → every value prepares and computes the same
  answers; said no → only the NONE values are ever sent (hdi.md 2), which must work.
* dynamic input: said yes → a model (y = x + x) with a -1 dimension runs at several sizes with the right
  outputDims and GetInputDimRanges covering them; said no → such a model is refused.
* model cache: said yes → ExportModelCache, then PrepareModelFromModelCache of those bytes
  gives the same answers; said no → both refused with NNRT_NOT_SUPPORT.
"""

from __future__ import annotations

import numpy as np

from nnrt.common import errors as e
from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na

from .context import CheckSkipped, Context, add_model, expect, expect_code, release
from .models import run_prepared

SECTION = "capabilities"


def _prepare(ctx: Context, builder: HdiModelBuilder,
             config: ht.ModelConfig | None = None) -> tuple[int, int, str]:
    """PrepareModel with `config`, by default the run's base config."""
    with builder.packed(ctx.client) as model:
        reply = ctx.client.prepare_model(model, config if config is not None else ctx.config())
    return reply.returnCode, reply.preparedModelId, reply.reason


def _add_zero(dims: list[int]) -> HdiModelBuilder:
    """y = x + 0, float32: in float16 mode y is x rounded to float16."""
    b = HdiModelBuilder("conformance-add-zero")
    x = b.input("x", np.float32, dims)
    zero = b.constant("zero", np.zeros([dims[-1] if dims[-1] > 0 else 4], np.float32))
    y = b.tensor("y", np.float32, dims)
    b.node(na.NODE_TYPE_ADD_FUSION, [x, zero], [y])
    b.mark_outputs(y)
    return b


def _double(dims: list[int] | None = None) -> HdiModelBuilder:
    """y = x + x, float32 (default [4]): no broadcasting, nothing constant."""
    dims = dims or [4]
    b = HdiModelBuilder("conformance-double")
    x = b.input("x", np.float32, dims)
    y = b.tensor("y", np.float32, dims)
    b.node(na.NODE_TYPE_ADD_FUSION, [x, x], [y])
    b.mark_outputs(y)
    return b


def _run(ctx: Context, builder: HdiModelBuilder, x: np.ndarray, out_shape, config=None):
    code, model_id, reason = _prepare(ctx, builder, config)
    expect_code(code, e.NNRT_SUCCESS, "PrepareModel" + (
        f" ({_config_text(config)})" if config is not None else ""), reason)
    try:
        result = run_prepared(ctx.client, model_id, [x], [np.zeros(out_shape, np.float32)],
                              ht.FORMAT_NONE)
        expect_code(result.code, e.NNRT_SUCCESS, "Run", result.reason)
        return result.outputs[0]
    finally:
        release(ctx.client, model_id)


def _config_text(config: ht.ModelConfig) -> str:
    from google.protobuf import text_format

    return text_format.MessageToString(config, as_one_line=True) or "default config"


def _float16(ctx: Context) -> None:
    claimed = ctx.capabilities.get("IsFloat16PrecisionSupported")
    if claimed is None:
        ctx.skip(SECTION, "float16", "IsFloat16PrecisionSupported did not answer")
        return
    config = ht.ModelConfig(enableFloat16=True)
    if not claimed:
        with ctx.check(SECTION, "float16: said unsupported, enableFloat16 is refused"):
            code, model_id, reason = _prepare(ctx, add_model(), config)
            release(ctx.client, model_id)
            expect_code(code, e.NNRT_NOT_SUPPORT, "PrepareModel with enableFloat16", reason)
        return
    with ctx.check(SECTION, "float16: said supported, values are rounded to float16"):
        x = np.float32([0.1, 1 / 3, 2049.0, -7.3])
        y = _run(ctx, _add_zero([4]), x, [4], config)
        want = x.astype(np.float16).astype(np.float32)
        expect(np.array_equal(y, want), f"enableFloat16: y = x + 0 gave {y.tolist()} for x = "
               f"{x.tolist()}; float16 holds {want.tolist()} (computed in float32?)",
               {"model": "y = x + 0 (ADD_FUSION), float32 [4], enableFloat16",
                "x": x.tolist()})
    with ctx.check(SECTION, "float16: said supported, a sum past 65504 overflows"):
        x = np.float32([60000.0, 1.0, -60000.0, 2.0])
        y = _run(ctx, _double(), x, [4], config)
        expect(np.isinf(y[0]) and np.isinf(y[2]) and y[1] == 2 and y[3] == 4,
               f"enableFloat16: x + x gave {y.tolist()} for x = {x.tolist()}; float16 gives "
               f"[inf, 2, -inf, 4] (computed in float32?)",
               {"model": "y = x + x (ADD_FUSION), float32 [4], enableFloat16", "x": x.tolist()})


def _modes(ctx: Context) -> None:
    x = np.float32([1.5, -2.0, 3.25, 0.0])
    want = x + np.arange(4, dtype=np.float32)
    for what, capability, field, values in (
            ("performance mode", "IsPerformanceModeSupported", "mode",
             ht.PerformanceMode.values()),
            ("priority", "IsPrioritySupported", "priority", ht.Priority.values())):
        claimed = ctx.capabilities.get(capability)
        if claimed is None:
            ctx.skip(SECTION, what, f"{capability} did not answer")
            continue
        sent = sorted(values) if claimed else [0]
        with ctx.check(SECTION, f"{what}: said {'supported' if claimed else 'unsupported'}, "
                                f"{'every value' if claimed else 'NONE'} prepares and "
                                f"computes") as out:
            for value in sent:
                y = _run(ctx, add_model(), x, [4], ctx.config(**{field: value}))
                expect(np.array_equal(y, want), f"{field}={value}: y = {y.tolist()}, expected "
                       f"{want.tolist()}")
            out.detail = f"{field} in {sent}"


def _dynamic(ctx: Context) -> None:
    claimed = ctx.capabilities.get("IsDynamicInputSupported")
    if claimed is None:
        ctx.skip(SECTION, "dynamic input", "IsDynamicInputSupported did not answer")
        return
    builder = _double([-1, 4])
    if not claimed:
        with ctx.check(SECTION, "dynamic input: said unsupported, a -1 dimension is refused"):
            code, model_id, reason = _prepare(ctx, builder)
            release(ctx.client, model_id)
            expect(code != e.NNRT_SUCCESS, "IsDynamicInputSupported says no, yet a model with "
                   "input dims [-1, 4] was prepared")
        return
    with ctx.check(SECTION, "dynamic input: said supported, -1 runs at sizes 1, 3 and 5"):
        code, model_id, reason = _prepare(ctx, builder)
        expect_code(code, e.NNRT_SUCCESS, "PrepareModel of input dims [-1, 4]", reason)
        try:
            ranges = ctx.client.get_input_dim_ranges(model_id)
            expect_code(ranges.returnCode, e.NNRT_SUCCESS, "GetInputDimRanges", ranges.reason)
            low, high = list(ranges.minInputDims[0].values), list(ranges.maxInputDims[0].values)
            for rows in (1, 3, 5):
                expect(low[0] <= rows <= high[0], f"GetInputDimRanges {low}..{high} excludes "
                       f"{rows} rows")
                x = np.random.default_rng(rows).standard_normal((rows, 4)).astype(np.float16) \
                    .astype(np.float32)  # exact in float16 too: x + x is exact either way
                result = run_prepared(ctx.client, model_id, [x], [np.zeros((rows, 4), np.float32)],
                                      ht.FORMAT_NONE)
                expect_code(result.code, e.NNRT_SUCCESS, f"Run of [{rows}, 4]", result.reason)
                got = result.outputs[0]
                expect(got.shape == (rows, 4), f"input [{rows}, 4]: outputDims "
                       f"{list(got.shape)}, expected [{rows}, 4]")
                expect(np.array_equal(got, x + x), f"input [{rows}, 4]: y = x + x is off by "
                       f"up to {np.abs(got - (x + x)).max():.3g}")
        finally:
            release(ctx.client, model_id)


def exported(ctx: Context, model_id: int) -> list[bytes]:
    """ExportModelCache's blobs, copied out of the driver's buffers."""
    reply = ctx.client.export_model_cache(model_id)
    expect_code(reply.returnCode, e.NNRT_SUCCESS, "ExportModelCache", reply.reason)
    expect(len(reply.modelCache) >= 1, "ExportModelCache gave no buffer")
    blobs = []
    for buffer in reply.modelCache:
        blob = ctx.client.fetch_bytes(buffer)
        expect(blob is not None, f"exported buffer {buffer.bufferId} cannot be mapped")
        blobs.append(blob)
    return blobs


def prepare_from_blobs(client, blobs: list[bytes], config: ht.ModelConfig | None = None):
    """PrepareModelFromModelCache of these bytes, each in a buffer of this session."""
    memories = []
    try:
        for blob in blobs:
            code, memory = client.allocate_buffer(max(len(blob), 1))
            expect_code(code, e.NNRT_SUCCESS, f"AllocateBuffer({len(blob)})")
            memories.append(memory)
            memory.view(0, len(blob))[:] = blob
        return client.prepare_model_from_model_cache(
            [m.descriptor(0, len(b)) for m, b in zip(memories, blobs)], config)
    finally:
        for memory in memories:
            memory.close()
            if client.alive:
                client.release_buffer(memory.descriptor())


def _cache(ctx: Context) -> None:
    claimed = ctx.capabilities.get("IsModelCacheSupported")
    if claimed is None:
        ctx.skip(SECTION, "model cache", "IsModelCacheSupported did not answer")
        return
    if not claimed:
        with ctx.check(SECTION, "model cache: said unsupported, ExportModelCache is refused"):
            code, model_id, reason = _prepare(ctx, add_model())
            expect_code(code, e.NNRT_SUCCESS, "PrepareModel", reason)
            try:
                reply = ctx.client.export_model_cache(model_id)
                expect_code(reply.returnCode, e.NNRT_NOT_SUPPORT, "ExportModelCache", reply.reason)
            finally:
                release(ctx.client, model_id)
        return
    with ctx.check(SECTION, "model cache: said supported, the exported cache prepares and "
                            "gives the same answers") as out:
        x = np.float32([1.5, -2.0, 3.25, 0.0])
        code, model_id, reason = _prepare(ctx, add_model())
        expect_code(code, e.NNRT_SUCCESS, "PrepareModel", reason)
        try:
            first = run_prepared(ctx.client, model_id, [x], [np.zeros(4, np.float32)],
                                 ht.FORMAT_NONE)
            expect_code(first.code, e.NNRT_SUCCESS, "Run", first.reason)
            blobs = exported(ctx, model_id)
        finally:
            release(ctx.client, model_id)
        reply = prepare_from_blobs(ctx.client, blobs, ctx.config())
        expect_code(reply.returnCode, e.NNRT_SUCCESS,
                    f"PrepareModelFromModelCache of the {len(blobs)} buffer(s) ExportModelCache "
                    f"gave ({sum(map(len, blobs))} bytes)", reply.reason)
        try:
            again = run_prepared(ctx.client, reply.preparedModelId, [x],
                                 [np.zeros(4, np.float32)], ht.FORMAT_NONE)
            expect_code(again.code, e.NNRT_SUCCESS, "Run of the model prepared from its cache",
                        again.reason)
            expect(np.array_equal(again.outputs[0], first.outputs[0]),
                   f"from the cache: {again.outputs[0].tolist()}, before: "
                   f"{first.outputs[0].tolist()}")
        finally:
            release(ctx.client, reply.preparedModelId)
        out.detail = f"{len(blobs)} buffer(s), {sum(map(len, blobs))} bytes"


def run(ctx: Context) -> None:
    if ctx.client is None:
        raise CheckSkipped("no session")
    _float16(ctx)
    _modes(ctx)
    _dynamic(ctx)
    _cache(ctx)


__all__ = ["run", "exported", "prepare_from_blobs"]
