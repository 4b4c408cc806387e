"""The model cache of a driver: export a prepared model's blobs, prepare from blobs, run the
cached MLP, damage a blob."""

from __future__ import annotations

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.common.errors import NNRT_SUCCESS


BATCH, SIZES = 3, (12, 24, 6)


def exported_blob(client, model_id) -> bytes:
    """The one blob of a device that exports one (GPU, accelerator, the numpy engine)."""
    blobs = exported_blobs(client, model_id)
    assert len(blobs) == 1
    return blobs[0]


def exported_blobs(client, model_id) -> list[bytes]:
    """The graph blob, and with the ort engine the optimised onnxruntime models."""
    reply = client.export_model_cache(model_id)
    assert reply.returnCode == NNRT_SUCCESS and len(reply.modelCache) in (1, 2)
    blobs = []
    for buffer in reply.modelCache:
        code, memory = client.map_buffer(buffer)
        assert code == NNRT_SUCCESS
        blobs.append(bytes(memory.view()))
        memory.close()
    again = client.export_model_cache(model_id)  # serialised once: the same buffers again
    assert [b.bufferId for b in again.modelCache] == [b.bufferId for b in reply.modelCache]
    return blobs


def prepare_from(client, blobs, config=None):
    buffers = []
    for blob in blobs:
        code, memory = client.allocate_buffer(max(len(blob), 1))
        assert code == NNRT_SUCCESS
        memory.view(0, len(blob))[:] = blob
        buffers.append(memory)
    reply = client.prepare_model_from_model_cache(
        [m.descriptor(0, len(b)) for m, b in zip(buffers, blobs)], config)
    for memory in buffers:
        memory.close()
        client.release_buffer(memory.descriptor())
    return reply


def run_prepared(client, model_id, x):
    _, xin = client.allocate_buffer(x.nbytes)
    _, yout = client.allocate_buffer(BATCH * SIZES[2] * 4)
    xin.array(np.float32, x.shape)[:] = x
    io = lambda m, s: ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=s,  # noqa: E731
                                  format=ht.FORMAT_NONE, data=m.descriptor())
    reply = client.run(model_id, [io(xin, x.shape)], [io(yout, [BATCH, SIZES[2]])])
    assert reply.returnCode == NNRT_SUCCESS
    result = yout.array(np.float32, [BATCH, SIZES[2]]).copy()
    xin.close(), yout.close()
    return result


def flip(blob: bytes, position: int) -> bytes:
    data = bytearray(blob)
    data[position] ^= 0x10
    return bytes(data)
