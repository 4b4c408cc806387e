"""Preparing a model from its cache against preparing it from the graph, side by side.

Both paths measured end to end from the client, on the same CPU driver process and the same
model (a CNN with ~8 MB of weights): (graph) GetSupportedOperation + PrepareModel with the
constants packed into a shared buffer, as the front end builds; (cache) the exported blob
written into a shared buffer + PrepareModelFromModelCache.

    python benchmarks/prepare_cache.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time

import numpy as np

from nnrt.client.core.embedded import EmbeddedDrivers
from nnrt.client.core.driver import DriverClient
from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na


def cnn() -> HdiModelBuilder:
    rng = np.random.default_rng(0)
    nhwc = ht.FORMAT_NHWC
    b = HdiModelBuilder("cnn")
    x = b.input("x", np.float32, [1, 32, 32, 64], fmt=nhwc)
    for layer in range(4):
        w = (rng.standard_normal((256 if layer else 256, 3, 3, 64 if layer == 0 else 256)) * 0.01)
        y = b.tensor(f"c{layer}", np.float32, [1, 32, 32, 256], fmt=nhwc)
        b.node(na.NODE_TYPE_CONV2D_FUSION, [x, b.constant(f"w{layer}", w.astype(np.float32), nhwc)],
               [y], na.Conv2DFusion(kernelSize=[3, 3], stride=[1, 1], dilation=[1, 1],
                                    padMode=ht.PAD_MODE_SAME, group=1,
                                    activationType=ht.ACTIVATION_TYPE_RELU))
        x = y
    b.mark_outputs(x)
    return b


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    builder = cnn()
    with EmbeddedDrivers(["cpu"]) as directory, DriverClient.connect("cpu", directory) as client:
        model_id = builder.prepare(client)
        reply = client.export_model_cache(model_id)
        _, exported = client.map_buffer(reply.modelCache[0])
        blob = bytes(exported.view())
        exported.close()

        def from_graph():
            with builder.packed(client) as model:
                assert all(client.get_supported_operation(model).ops)
                reply = client.prepare_model(model)
            assert reply.returnCode == 0
            client.release_prepared_model(reply.preparedModelId)

        def from_cache():
            _, memory = client.allocate_buffer(len(blob))
            memory.view()[:] = blob
            reply = client.prepare_model_from_model_cache([memory.descriptor()])
            memory.close()
            client.release_buffer(memory.descriptor())
            assert reply.returnCode == 0
            client.release_prepared_model(reply.preparedModelId)

        times = {"graph": [], "cache": []}
        for _ in range(args.rounds):
            for name, fn in (("graph", from_graph), ("cache", from_cache)):
                started = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - started)
    graph, cache = (statistics.median(times[k]) for k in ("graph", "cache"))
    print(f"model: 4 conv layers, {builder.constant_bytes() / 1e6:.1f} MB of weights, "
          f"cache blob {len(blob) / 1e6:.1f} MB")
    print(f"prepare from graph (GetSupportedOperation + PrepareModel): {graph * 1e3:8.1f} ms  1.00")
    print(f"prepare from cache (PrepareModelFromModelCache):           {cache * 1e3:8.1f} ms  "
          f"{cache / graph:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
