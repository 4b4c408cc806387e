"""Per-call overhead of the C API's OH_NNExecutor_RunSync over the raw HDI client Run.

The same small model (a one-element ADD built through OH_NNModel_*, compiled with
OH_NNCompilation_*), the same prepared model, the same shared-memory tensors, measured side
by side in one run in interleaved rounds:

  raw   DriverClient.run(model_id, inputs, outputs) with IOTensor messages built once;
  capi  OH_NNExecutor_RunSync(executor, [in], 1, [out], 1) — argument checks, IOTensors
        from the NN_Tensors, the driver call, output shapes written back;
  async OH_NNExecutor_RunAsync → NN_OnRunDone, one run at a time (for reference);
  api   the Pythonic `Executor.run(x)` (client/api.py) of the same model built with `Model`
        (x + 1 on one float32 element): numpy in, the one copy, numpy out.

Prints the median of each and the ratio to raw.

    python benchmarks/capi_overhead.py [--rounds 7] [--calls 400]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import threading

import numpy as np

from nnrt.client import Model, capi
from nnrt.client.capi.tensor import io_tensor
from nnrt.client.core.device import registry
from nnrt.client.core.embedded import EmbeddedDrivers
from nnrt.client.core.driver import DriverClient

from _common import add_one_executor, float32_desc, timed  # benchmarks/_common.py


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=400, help="calls per round and path")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with EmbeddedDrivers(["cpu"]) as directory:
        os.environ["NNRT_RUNTIME_DIR"] = str(directory)
        executor = add_one_executor()
        d = float32_desc([1])
        tin, tout = capi.OH_NNTensor_Create(0, d), capi.OH_NNTensor_Create(0, d)
        capi.OH_NNTensorDesc_Destroy(d)
        np.frombuffer(capi.OH_NNTensor_GetDataBuffer(tin), np.float32)[:] = 41.0

        # The raw path: the executor's own session and prepared model, the same buffers.
        client: DriverClient
        client, model_id = executor.session()
        raw_in, raw_out = [io_tensor(tin)], [io_tensor(tout)]

        def run_raw() -> None:
            assert client.run(model_id, raw_in, raw_out).returnCode == 0

        def run_capi() -> None:
            assert capi.OH_NNExecutor_RunSync(executor, [tin], 1, [tout], 1) == 0

        done = threading.Event()
        capi.OH_NNExecutor_SetOnRunDone(executor, lambda *a: done.set())

        def run_async() -> None:
            done.clear()
            assert capi.OH_NNExecutor_RunAsync(executor, [tin], 1, [tout], 1, 5000, 1) == 0
            assert done.wait(5)

        model = Model()
        y = model.input([1]) + 1.0
        model.outputs(y)
        compiled = model.compile()
        api_executor = compiled.executor()
        x = np.full(1, 41.0, np.float32)

        def run_api() -> None:
            api_executor.run(x)

        paths = {"raw": run_raw, "capi": run_capi, "async": run_async, "api": run_api}
        for fn in paths.values():
            for _ in range(50):
                fn()  # warm up
        assert np.frombuffer(capi.OH_NNTensor_GetDataBuffer(tout), np.float32)[0] == 42.0
        assert api_executor.run(x)[0] == 42.0

        rows: dict[str, list[float]] = {k: [] for k in paths}
        for _ in range(args.rounds):  # interleaved: the machine's noise hits all alike
            for name, fn in paths.items():
                rows[name].append(timed(fn, args.calls))
        med = {k: statistics.median(v) for k, v in rows.items()}

        api_executor.close()
        compiled.close()
        model.close()
        capi.OH_NNTensor_Destroy(tin)
        capi.OH_NNTensor_Destroy(tout)
        capi.OH_NNExecutor_Destroy(executor)
        registry().close()  # end the sessions before the embedded driver stops

    print(f"{'measurement (1-element ADD, same driver)':48s} {'median':>10s}  ratio")
    print(f"{'raw HDI client DriverClient.run':48s} {med['raw'] * 1e6:7.1f} us  1.00")
    print(f"{'capi OH_NNExecutor_RunSync':48s} {med['capi'] * 1e6:7.1f} us  "
          f"{med['capi'] / med['raw']:.2f}  (+{(med['capi'] - med['raw']) * 1e6:.1f} us per call)")
    print(f"{'capi OH_NNExecutor_RunAsync -> NN_OnRunDone':48s} {med['async'] * 1e6:7.1f} us  "
          f"{med['async'] / med['raw']:.2f}")
    print(f"{'api Executor.run (numpy in, numpy out)':48s} {med['api'] * 1e6:7.1f} us  "
          f"{med['api'] / med['raw']:.2f}  (+{(med['api'] - med['capi']) * 1e6:.1f} us over capi)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
