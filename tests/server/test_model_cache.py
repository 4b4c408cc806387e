"""The CPU driver's model cache across processes: export, prepare from it, refuse bad blobs."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common.errors import NNRT_INVALID_MODEL_CACHE, NNRT_SUCCESS
from tests.helpers.hdi_models import f32, mlp
from tests.helpers.model_cache import (
    BATCH,
    SIZES,
    exported_blobs,
    flip,
    prepare_from,
    run_prepared,
)


@pytest.fixture
def cached(client):
    builder, reference = mlp(BATCH, SIZES)
    model_id = builder.prepare(client)
    return model_id, exported_blobs(client, model_id), reference


def test_cache_round_trip_computes_identically(client, cached):
    model_id, blobs, reference = cached
    assert client.is_model_cache_supported().isSupported is True
    x = f32(BATCH, SIZES[0])
    reply = prepare_from(client, blobs)
    assert reply.returnCode == NNRT_SUCCESS
    from_cache = run_prepared(client, reply.preparedModelId, x)
    np.testing.assert_array_equal(from_cache, run_prepared(client, model_id, x))
    np.testing.assert_allclose(from_cache, reference(x), rtol=1e-5, atol=1e-6)
    # the config of the import applies: the same blob prepared in float16 mode
    half = prepare_from(client, blobs, ht.ModelConfig(enableFloat16=True))
    assert half.returnCode == NNRT_SUCCESS
    np.testing.assert_allclose(run_prepared(client, half.preparedModelId, x), reference(x),
                               atol=2e-3)


@pytest.mark.parametrize("damage", [
    pytest.param(lambda b: flip(b, len(b) - 5), id="bit-flip-in-constants"),
    pytest.param(lambda b: flip(b, len(b) // 2), id="bit-flip-in-the-middle"),
    pytest.param(lambda b: flip(b, 3), id="bit-flip-in-the-magic"),
    pytest.param(lambda b: flip(b, 9), id="bit-flip-in-the-version"),
    pytest.param(lambda b: b[: len(b) - 1], id="truncated-by-one"),
    pytest.param(lambda b: b[: len(b) // 3], id="truncated-to-a-third"),
    pytest.param(lambda b: b[:10], id="truncated-in-the-header"),
    pytest.param(lambda b: b + b"\0", id="trailing-byte"),
    pytest.param(lambda b: bytes(np.random.default_rng(1).integers(0, 256, len(b), np.uint8)),
                 id="foreign-random"),
    pytest.param(lambda b: b.replace(b"nnrt-cpu nnrt", b"nnrt-gpu nnrt"), id="other-device"),
])
def test_a_damaged_or_foreign_cache_is_refused(client, cached, damage):
    _, blobs, _ = cached
    graph_blob, rest = blobs[0], blobs[1:]
    assert prepare_from(client, [damage(graph_blob), *rest]).returnCode == \
        NNRT_INVALID_MODEL_CACHE
    assert prepare_from(client, blobs).returnCode == NNRT_SUCCESS  # still serving


def test_cache_buffer_count_must_be_one_or_two(client, cached):
    # One graph blob, and from the ort engine its optimised models: never the graph twice,
    # never a third blob, never none.
    _, blobs, _ = cached
    assert prepare_from(client, [blobs[0], blobs[0]]).returnCode == NNRT_INVALID_MODEL_CACHE
    assert prepare_from(client, [blobs[0], blobs[-1], blobs[-1]]).returnCode == \
        NNRT_INVALID_MODEL_CACHE
    assert client.prepare_model_from_model_cache([]).returnCode == NNRT_INVALID_MODEL_CACHE


def test_another_models_cache_prepares_that_other_model(client, cached):
    # A cache is self-contained: it can only ever be the model it was exported from.
    builder, reference = mlp(BATCH, SIZES, seed=99)
    other = exported_blobs(client, builder.prepare(client))
    reply = prepare_from(client, other)
    x = f32(BATCH, SIZES[0])
    np.testing.assert_allclose(run_prepared(client, reply.preparedModelId, x), reference(x),
                               rtol=1e-5, atol=1e-6)
