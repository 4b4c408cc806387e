"""The main job, end to end across processes: a driver, an MLP compiled and run on it.

The MLP (FullConnection + ReLU, FullConnection, Softmax) is built as an HDI Model with
seeded weights, prepared by the driver, and run on a batch whose inputs and outputs live in
shared memory; the result is checked against numpy computed here.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nnrt.client.hdi import DriverClient
from nnrt.client.hdi_model import HdiModelBuilder
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.server.errors import NNRT_SUCCESS, code_name

log = logging.getLogger(__name__)


@dataclass
class DemoResult:
    device: str
    probabilities: np.ndarray
    reference: np.ndarray
    prepare_ms: float
    run_ms: float

    @property
    def max_error(self) -> float:
        return float(np.max(np.abs(self.probabilities - self.reference)))


def mlp(batch: int, sizes: tuple[int, int, int], seed: int = 7):
    rng = np.random.default_rng(seed)
    n_in, n_hidden, n_out = sizes
    w1 = (rng.standard_normal((n_hidden, n_in)) / np.sqrt(n_in)).astype(np.float32)
    b1 = (rng.standard_normal(n_hidden) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((n_out, n_hidden)) / np.sqrt(n_hidden)).astype(np.float32)
    b2 = (rng.standard_normal(n_out) * 0.1).astype(np.float32)
    b = HdiModelBuilder("demo-mlp")
    x = b.input("x", np.float32, [batch, n_in])
    h = b.tensor("hidden", np.float32, [batch, n_hidden])
    logits = b.tensor("logits", np.float32, [batch, n_out])
    probs = b.tensor("probabilities", np.float32, [batch, n_out])
    b.node(na.NODE_TYPE_FULL_CONNECTION, [x, b.constant("w1", w1), b.constant("b1", b1)], [h],
           na.FullConnection(hasBias=True, activationType=ht.ACTIVATION_TYPE_RELU))
    b.node(na.NODE_TYPE_FULL_CONNECTION, [h, b.constant("w2", w2), b.constant("b2", b2)],
           [logits], na.FullConnection(hasBias=True))
    b.node(na.NODE_TYPE_SOFTMAX, [logits], [probs], na.Softmax(axis=[-1]))
    b.mark_outputs(probs)

    def reference(inputs: np.ndarray) -> np.ndarray:
        hidden = np.maximum(inputs.astype(np.float64) @ w1.T + b1, 0)
        z = hidden @ w2.T + b2
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    return b, reference


def run_demo(directory: Path, name: str = "cpu", batch: int = 4,
             sizes: tuple[int, int, int] = (16, 32, 10)) -> DemoResult:
    with DriverClient.connect(name, directory) as client:
        device = f"{client.get_device_name().name} ({client.get_vendor_name().name})"
        builder, reference = mlp(batch, sizes)
        started = time.perf_counter()
        model_id = builder.prepare(client)
        prepare_ms = (time.perf_counter() - started) * 1000
        code, x = client.allocate_buffer(batch * sizes[0] * 4)
        code2, y = client.allocate_buffer(batch * sizes[2] * 4)
        if code != NNRT_SUCCESS or code2 != NNRT_SUCCESS:
            raise RuntimeError(f"AllocateBuffer failed: {code_name(code or code2)}")
        inputs = np.random.default_rng(1).standard_normal((batch, sizes[0]), dtype=np.float32)
        x.array(np.float32, inputs.shape)[:] = inputs
        started = time.perf_counter()
        reply = client.run(
            model_id,
            [ht.IOTensor(name="x", dataType=ht.DATA_TYPE_FLOAT32, dimensions=inputs.shape,
                         format=ht.FORMAT_NONE, data=x.descriptor())],
            [ht.IOTensor(name="probabilities", dataType=ht.DATA_TYPE_FLOAT32,
                         dimensions=[batch, sizes[2]], format=ht.FORMAT_NONE,
                         data=y.descriptor())],
            timeout=30,
        )
        run_ms = (time.perf_counter() - started) * 1000
        if reply.returnCode != NNRT_SUCCESS:
            raise RuntimeError(f"Run failed: {code_name(reply.returnCode)}")
        result = y.array(np.float32, [batch, sizes[2]]).copy()
        x.close(), y.close()
        client.release_prepared_model(model_id)
    return DemoResult(device, result, reference(inputs), prepare_ms, run_ms)
