"""The Pythonic API's own cost per run, without the process boundary: `Executor.run` of a
4-element x + 1 with the driver call replaced by its (fixed) reply, so that what is timed
is the client's Python alone — argument checks, the one input copy, the core's run
bookkeeping, the output views. Stable where the end-to-end figures of capi_overhead.py
move by ±30 % on a shared machine.

    python benchmarks/api_client_side.py
"""

import os
import statistics
import time

import numpy as np

from nnrt.client import Model
from nnrt.client.core.driver import DriverClient
from nnrt.client.core.embedded import EmbeddedDrivers
from nnrt.protos import hdi_pb2 as pb
from nnrt.protos import hdi_types_pb2 as ht


def main() -> None:
    with EmbeddedDrivers(["cpu"]) as directory:
        os.environ["NNRT_RUNTIME_DIR"] = str(directory)
        with Model() as m:
            x = m.input([4])
            m.outputs(x + 1.0)
            with m.compile() as compiled, compiled.executor() as ex:
                a = np.arange(4, dtype=np.float32)
                for _ in range(200):
                    ex.run(a)
                reply = pb.RunReply(outputDims=[ht.Int32Array(values=[4])])
                real = DriverClient.run
                DriverClient.run = lambda self, *args, **kw: reply
                try:
                    per_run = []
                    for _ in range(7):
                        started = time.perf_counter()
                        for _ in range(5000):
                            ex.run(a)
                        per_run.append((time.perf_counter() - started) / 5000 * 1e6)
                finally:
                    DriverClient.run = real
    print(f"Executor.run, client side only: median {statistics.median(per_run):.1f} us/run "
          f"(rounds: {', '.join(f'{v:.1f}' for v in per_run)})")


if __name__ == "__main__":
    main()
