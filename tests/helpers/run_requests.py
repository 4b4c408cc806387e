"""A Run request over two fresh 16-byte shared regions of a session (four float32 in, four
out), for tests that drive the host's run path in process."""

from __future__ import annotations

from nnrt.protos import hdi_pb2 as pb
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.server.buffers import SharedRegion
from nnrt.server.sessions import Session


def four_float_request(session: Session, model_id: int
                       ) -> tuple[bytes, list[tuple[int, SharedRegion]]]:
    """The serialized RunRequest of `model_id` (input: the first region, output: the
    second) and the (buffer id, region) of both, registered in `session`'s buffers."""
    regions, ios = [], []
    for _ in range(2):
        region = SharedRegion.allocate(16)
        buffer_id = session.buffers.add(region)
        regions.append((buffer_id, region))
        ios.append(ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=[4],
                               format=ht.FORMAT_NHWC,
                               data=ht.SharedBuffer(bufferId=buffer_id, bufferSize=16,
                                                    dataSize=16)))
    payload = pb.RunRequest(preparedModelId=model_id, inputs=ios[:1],
                            outputs=ios[1:]).SerializeToString()
    return payload, regions
