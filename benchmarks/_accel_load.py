"""One client process of the accelerator benchmarks and tests: prepares a chain of float16
FullConnection nodes (each one simulated node of known cost) on the accel driver with a
priority, runs it back to back for a while, and prints one JSON line: every run's latency.

    python benchmarks/_accel_load.py RUNTIME_DIR --priority low --seconds 3 [--nodes 4]
        [--width 256] [--batch 8] [--start-at UNIX_TIME]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from nnrt.client.core.driver import DriverClient
from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na

PRIORITIES = {"low": ht.PRIORITY_LOW, "medium": ht.PRIORITY_MEDIUM, "high": ht.PRIORITY_HIGH}


def chain(nodes: int, width: int, batch: int, seed: int = 0) -> HdiModelBuilder:
    """x [batch, width] through `nodes` FullConnection layers of [width, width], float16."""
    rng = np.random.default_rng(seed)
    b = HdiModelBuilder("chain")
    h = b.input("x", np.float16, [batch, width])
    for k in range(nodes):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float16)
        out = b.tensor(f"h{k}", np.float16, [batch, width])
        b.node(na.NODE_TYPE_FULL_CONNECTION, [h, b.constant(f"w{k}", w)], [out],
               na.FullConnection())
        h = out
    b.mark_outputs(h)
    return b


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("runtime_dir", type=Path)
    parser.add_argument("--name", default="accel")
    parser.add_argument("--priority", choices=sorted(PRIORITIES), default="low")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--start-at", type=float, default=0.0, help="time.time() to begin")
    args = parser.parse_args()
    client = DriverClient.connect(args.name, args.runtime_dir, timeout=10)
    model_id = chain(args.nodes, args.width, args.batch).prepare(
        client, ht.ModelConfig(priority=PRIORITIES[args.priority]))
    shape = [args.batch, args.width]
    nbytes = args.batch * args.width * 2
    _, xin = client.allocate_buffer(nbytes)
    _, yout = client.allocate_buffer(nbytes)
    xin.array(np.float16, shape)[:] = 0.5
    io = [ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT16, dimensions=shape, format=ht.FORMAT_NONE,
                      data=m.descriptor()) for m in (xin, yout)]
    time.sleep(max(0.0, args.start_at - time.time()))
    latencies, end = [], time.monotonic() + args.seconds
    while time.monotonic() < end:
        started = time.monotonic()
        reply = client.run(model_id, [io[0]], [io[1]], timeout=30)
        if reply.returnCode != 0:
            print(json.dumps({"error": reply.returnCode}), flush=True)
            return 1
        latencies.append(time.monotonic() - started)
    print(json.dumps({"priority": args.priority, "latencies": latencies}), flush=True)
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
