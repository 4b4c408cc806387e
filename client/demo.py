"""The main job, end to end across processes, through the Pythonic API (`nnrt.client`).

An MLP (FullConnection + ReLU, FullConnection, Softmax) is built from numpy weights,
compiled for the first device (a driver in its own process), and run on a batch whose
inputs and outputs live in shared memory with the driver; the result is checked against
numpy computed here.

Every run has a deadline (`timeout`, default DEFAULT_TIMEOUT s, far above the milliseconds
it takes): a wedged driver ends the demo with an error instead of holding it forever.
`nnrt demo` bounds the whole job as well (its `--timeout`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from nnrt.client.api import DeviceInfo, Model, list_devices

DEFAULT_TIMEOUT = 30.0  # s, per run


class NoDevice(RuntimeError):
    """No device to run on (`nnrt demo` exits 3, as every command does for it)."""


@dataclass
class DemoResult:
    device: str
    probabilities: np.ndarray
    reference: np.ndarray
    compile_ms: float
    run_ms: float

    @property
    def max_error(self) -> float:
        return float(np.max(np.abs(self.probabilities - self.reference)))


def mlp_weights(sizes: tuple[int, int, int], seed: int = 7) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    n_in, n_hidden, n_out = sizes
    w1 = (rng.standard_normal((n_hidden, n_in)) / np.sqrt(n_in)).astype(np.float32)
    b1 = (rng.standard_normal(n_hidden) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((n_out, n_hidden)) / np.sqrt(n_hidden)).astype(np.float32)
    b2 = (rng.standard_normal(n_out) * 0.1).astype(np.float32)
    return w1, b1, w2, b2


def numpy_mlp(x: np.ndarray, w1, b1, w2, b2) -> np.ndarray:
    """The same network in float64 numpy: the independent reference."""
    hidden = np.maximum(x.astype(np.float64) @ w1.T + b1, 0)
    z = hidden @ w2.T + b2
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def run_demo(device: str | None = None, batch: int = 4,
             sizes: tuple[int, int, int] = (16, 32, 10),
             timeout: float = DEFAULT_TIMEOUT) -> DemoResult:
    w1, b1, w2, b2 = mlp_weights(sizes)
    x = np.random.default_rng(1).standard_normal((batch, sizes[0])).astype(np.float32)
    devices = list_devices()
    if not devices:
        raise NoDevice("no device: no driver answers in the runtime directory")
    info = devices[0] if device is None else _named(devices, device)
    with Model() as model:
        inputs = model.input([batch, sizes[0]])
        hidden = model.fully_connected(inputs, w1, b1, activation="relu")
        model.outputs(model.softmax(model.fully_connected(hidden, w2, b2)))
        started = time.perf_counter()
        with model.compile(info) as compiled, compiled.executor() as executor:
            compile_ms = (time.perf_counter() - started) * 1000
            executor.run(x, timeout=timeout)  # the first run maps the shared buffers
            started = time.perf_counter()
            probabilities = np.array(executor.run(x, timeout=timeout))
            run_ms = (time.perf_counter() - started) * 1000
    return DemoResult(info.name, probabilities, numpy_mlp(x, w1, b1, w2, b2), compile_ms, run_ms)


def _named(devices: list[DeviceInfo], name: str) -> DeviceInfo:
    """The device called `name`: its full name, or the device-name part before the vendor."""
    wanted = name.lower()
    for info in devices:
        full = info.name.lower()
        if wanted == full or full.startswith(wanted + "_"):
            return info
    raise NoDevice(f"no device {name!r} (devices: {', '.join(d.name for d in devices)})")
