"""HDI models and runs on a driver process: the add model and its IO tensors, an MLP, the
whole-model float32 run, the int8 run, a loop convolution reference, an abandoned run."""

from __future__ import annotations

import time

import numpy as np
import pytest

from nnrt.client.demo import mlp_weights, numpy_mlp
from nnrt.client.core.driver import DriverClient
from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import NNRT_SUCCESS
from tests.conftest import RunningDriver, wait_until


def add_model(n: int = 4) -> HdiModelBuilder:
    b = HdiModelBuilder("add")
    x = b.input("x", np.float32, [n])
    w = b.constant("w", np.arange(n, dtype=np.float32))
    y = b.tensor("y", np.float32, [n])
    b.node(na.NODE_TYPE_ADD_FUSION, [x, w], [y])
    b.mark_outputs(y)
    return b


def prepared_add(client: DriverClient):
    """`add_model()` prepared in `client`'s session, with buffers x (holding 1, 2, 3, 4) and
    y of 4 float32 each: (model id, x, y)."""
    model_id = add_model().prepare(client)
    _, x = client.allocate_buffer(16)
    _, y = client.allocate_buffer(16)
    x.array(np.float32, [4])[:] = [1, 2, 3, 4]
    return model_id, x, y


def io(memory, n: int) -> ht.IOTensor:
    return ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=[n], format=ht.FORMAT_NONE,
                       data=memory.descriptor())


def expect_run_abandoned(driver: RunningDriver, client: DriverClient) -> None:
    """A run with a 0.2 s deadline on a driver started with `--fault-run-delay-ms 3000`: the
    client gives up at its deadline (TimeoutError) and the driver abandons the run during
    its injected delay (its log says so)."""
    model_id = add_model().prepare(client)
    _, x = client.allocate_buffer(16)
    _, y = client.allocate_buffer(16)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        client.run(model_id, [io(x, 4)], [io(y, 4)], timeout=0.2)
    assert time.monotonic() - started < 0.5
    assert wait_until(lambda: "abandoned during its injected delay" in driver.log(), 2.0)
    x.close(), y.close()


RNG = np.random.default_rng(2024)


def mlp(batch: int, sizes: tuple[int, int, int], seed: int = 7):
    """An HDI MLP (FullConnection+ReLU, FullConnection, Softmax) and its numpy reference."""
    n_in, n_hidden, n_out = sizes
    w1, b1, w2, b2 = mlp_weights(sizes, seed)
    b = HdiModelBuilder("mlp")
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

    return b, lambda inputs: numpy_mlp(inputs, w1, b1, w2, b2)


def f32(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def run(client, builder, inputs, output_shapes, dynamic=False):
    model_id = builder.prepare(client)
    ins, outs, memories = [], [], []
    for array in inputs:
        _, memory = client.allocate_buffer(array.nbytes)
        memory.array(array.dtype, array.shape)[:] = array
        memories.append(memory)
        ins.append(ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=array.shape,
                               format=builder.tensors[builder.inputs[len(ins)]].format,
                               data=memory.descriptor()))
    for shape, index in zip(output_shapes, builder.outputs):
        _, memory = client.allocate_buffer(int(np.prod(shape)) * 4)
        memories.append(memory)
        outs.append(ht.IOTensor(dataType=ht.DATA_TYPE_FLOAT32, dimensions=shape,
                                format=builder.tensors[index].format, data=memory.descriptor()))
    reply = client.run(model_id, ins, outs, timeout=30)
    assert reply.returnCode == NNRT_SUCCESS
    assert [list(d.values) for d in reply.outputDims] == [list(s) for s in output_shapes]
    results = [m.array(np.float32, s).copy() for m, s in zip(memories[len(inputs):], output_shapes)]
    for memory in memories:
        memory.close()
    return results


def conv_nhwc_reference(x, w, bias, stride, pad):
    """Direct convolution by loops: x [N,H,W,C], w [O,kh,kw,C], pad [top,bottom,left,right]."""
    n, h, wd, c = x.shape
    o, kh, kw, _ = w.shape
    xp = np.zeros((n, h + pad[0] + pad[1], wd + pad[2] + pad[3], c))
    xp[:, pad[0]:pad[0] + h, pad[2]:pad[2] + wd, :] = x
    oh = (xp.shape[1] - kh) // stride + 1
    ow = (xp.shape[2] - kw) // stride + 1
    out = np.zeros((n, oh, ow, o))
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                patch = xp[b, i * stride:i * stride + kh, j * stride:j * stride + kw, :]
                for k in range(o):
                    out[b, i, j, k] = float((patch * w[k]).sum()) + bias[k]
    return out


NHWC = ht.FORMAT_NHWC


def run_int8(client, builder, x_q, out_shape):
    model_id = builder.prepare(client)
    _, xin = client.allocate_buffer(x_q.nbytes)
    _, yout = client.allocate_buffer(int(np.prod(out_shape)))
    xin.array(np.int8, x_q.shape)[:] = x_q
    reply = client.run(
        model_id,
        [ht.IOTensor(dataType=ht.DATA_TYPE_INT8, dimensions=x_q.shape, format=NHWC,
                     data=xin.descriptor())],
        [ht.IOTensor(dataType=ht.DATA_TYPE_INT8, dimensions=out_shape, format=ht.FORMAT_NONE,
                     data=yout.descriptor())], timeout=30)
    assert reply.returnCode == 0, reply
    result = yout.array(np.int8, out_shape).copy()
    xin.close(), yout.close()
    return [result]
