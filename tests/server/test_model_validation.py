"""PrepareModel / GetSupportedOperation validation through a real driver process.

Every bad Model or ModelConfig goes over gRPC to a CPU driver process and must come back
with the exact code of hdi.md 3.10 / section 11 (as hdi/model_validation.py implements
it); after each refusal the same session still prepares and runs a good model. (What a
session token grants: test_session_tokens.py.)
"""

from __future__ import annotations

import math

import grpc
import numpy as np
import pytest

from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.protos import hdi_pb2 as pb
from nnrt.protos import hdi_pb2_grpc as rpc
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import (
    NNRT_INVALID_DATATYPE,
    NNRT_INVALID_FORMAT,
    NNRT_INVALID_INPUT,
    NNRT_INVALID_MODEL,
    NNRT_INVALID_NODE,
    NNRT_INVALID_OUTPUT,
    NNRT_INVALID_PERFORMANCE_MODE,
    NNRT_INVALID_PRIORITY,
    NNRT_INVALID_SHAPE,
    NNRT_INVALID_TENSOR,
    NNRT_MEMORY_ERROR,
    NNRT_NOT_SUPPORT,
    NNRT_SUCCESS,
    NNRT_UNSUPPORTED_OP,
)

SHAPE = (2, 3)
W = np.array([[1.5, -2.0, 0.25], [4.0, 0.0, -8.0]], dtype=np.float32)
X, WT, Y = 0, 1, 2  # tensor indices of add_builder()
TIMEOUT = 10.0


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def client(shared_driver):
    """One session for the whole module, overriding conftest's session per test: ending a
    session costs ~0.2 s (gRPC channel shutdown), and a refused request leaves nothing in
    the session (each test releases what it creates)."""
    with shared_driver.client() as session:
        yield session


@pytest.fixture(scope="module")
def raw_stubs(shared_driver):
    """gRPC stubs on the driver's socket that send no session metadata of their own."""
    channel = grpc.insecure_channel(f"unix:{shared_driver.grpc_path}")
    grpc.channel_ready_future(channel).result(timeout=TIMEOUT)
    yield rpc.INnrtDeviceStub(channel), rpc.IPreparedModelStub(channel)
    channel.close()


# ---------------------------------------------------------------- helpers


def add_builder() -> HdiModelBuilder:
    """y = x + W: input x [2, 3] float32, constant W, output y (tensors 0, 1, 2; node 0)."""
    b = HdiModelBuilder("add")
    x = b.input("x", np.float32, SHAPE)
    w = b.constant("w", W)
    y = b.tensor("y", np.float32, SHAPE)
    b.node(na.NODE_TYPE_ADD_FUSION, [x, w], [y])
    b.mark_outputs(y)
    return b


def cycle_builder() -> HdiModelBuilder:
    """t1 = x + t2, t2 = relu(t1): each node waits for the other."""
    b = HdiModelBuilder("cycle")
    x = b.input("x", np.float32, SHAPE)
    t1 = b.tensor("t1", np.float32, SHAPE)
    t2 = b.tensor("t2", np.float32, SHAPE)
    b.node(na.NODE_TYPE_ADD_FUSION, [x, t2], [t1])
    b.node(na.NODE_TYPE_ACTIVATION, [t1], [t2],
           na.Activation(activationType=ht.ACTIVATION_TYPE_RELU))
    b.mark_outputs(t1)
    return b


def reply_of(client, mutate=None, builder=None, config=None, method="prepare"):
    """PrepareModel (or GetSupportedOperation) of a (mutated) model, constants in a buffer."""
    builder = builder or add_builder()
    with builder.packed(client) as model:
        if mutate is not None:
            mutate(model)
        if method == "prepare":
            return client.prepare_model(model, config)
        return client.get_supported_operation(model)


def prepare_code(client, mutate=None, builder=None, config=None) -> int:
    """The PrepareModel code; a model prepared after all is released again."""
    reply = reply_of(client, mutate, builder, config)
    if reply.returnCode == NNRT_SUCCESS:
        assert client.release_prepared_model(reply.preparedModelId).returnCode == NNRT_SUCCESS
    return reply.returnCode


def supported_reply(client, mutate=None, builder=None):
    return reply_of(client, mutate, builder, method="supported")


def run_add(client, model_id: int, seed: int = 0) -> None:
    """Run y = x + W once on fresh buffers and check the numbers."""
    x = np.random.default_rng(seed).standard_normal(SHAPE).astype(np.float32)
    code, inp = client.allocate_buffer(x.nbytes)
    assert code == NNRT_SUCCESS
    code, out = client.allocate_buffer(x.nbytes)
    assert code == NNRT_SUCCESS
    try:
        inp.array(np.float32, SHAPE)[:] = x
        tensor = dict(dataType=ht.DATA_TYPE_FLOAT32, dimensions=SHAPE, format=ht.FORMAT_NONE)
        reply = client.run(model_id, [ht.IOTensor(name="x", data=inp.descriptor(), **tensor)],
                           [ht.IOTensor(name="y", data=out.descriptor(), **tensor)],
                           timeout=TIMEOUT)
        assert reply.returnCode == NNRT_SUCCESS
        assert [list(d.values) for d in reply.outputDims] == [list(SHAPE)]
        np.testing.assert_array_equal(out.array(np.float32, SHAPE), x + W)
    finally:
        for memory in (inp, out):
            memory.close()
            client.release_buffer(memory.descriptor())


def assert_serves(client, shared_driver=None) -> None:
    """The driver is alive and this session still prepares and runs a good model."""
    if shared_driver is not None:
        assert shared_driver.proc.poll() is None
    model_id = add_builder().prepare(client)
    run_add(client, model_id, seed=model_id)
    assert client.release_prepared_model(model_id).returnCode == NNRT_SUCCESS


def add_unsupported_node(b: HdiModelBuilder, x: int, y: int) -> int:
    """A well-formed float32 node the CPU driver does not compute: Softmax over two axes at
    once (its kernel reports that unsupported)."""
    return b.node(na.NODE_TYPE_SOFTMAX, [x], [y], na.Softmax(axis=[0, 1]))


# ---------------------------------------------------------------- mutations


def _set(path_fn, **fields):
    """A mutation that sets fields on the message path_fn(model) returns."""
    def mutate(model):
        target = path_fn(model)
        for name, value in fields.items():
            if isinstance(value, list):
                del getattr(target, name)[:]
                getattr(target, name).extend(value)
            else:
                setattr(target, name, value)
    return mutate


def _clear(field):
    return lambda model: model.ClearField(field)


def _tensor(i):
    return lambda model: model.allTensors[i]


def _node0(model):
    return model.nodes[0]


def _extra_tensor(model) -> int:
    """Append a plain float32 [2, 3] tensor (no data); returns its index."""
    model.allTensors.add(name="extra", dataType=ht.DATA_TYPE_FLOAT32, dims=SHAPE,
                         format=ht.FORMAT_NONE)
    return len(model.allTensors) - 1


def _duplicate_node(model):
    model.nodes.add().CopyFrom(model.nodes[0])
    model.subGraph[0].nodeIndices.append(1)


def _read_unproduced(model):
    model.nodes[0].inputIndex[1] = _extra_tensor(model)


def _output_never_computed(model):
    model.outputIndex.append(_extra_tensor(model))


def _quant(**fields):
    def mutate(model):
        q = dict(numBits=8, zeroPoint=0, scale=0.1)
        q.update(fields)
        model.allTensors[X].quantParams.add(**q)
    return mutate


def _switch_attribute(model):
    model.nodes[0].activation.SetInParent()  # the oneof now holds another operator's struct


# (id, mutation of the add model or None, builder factory or None, code). Every one of them
# is refused by the shared validation, so GetSupportedOperation must give the same code.
STRUCTURAL = [
    ("no-tensors", _clear("allTensors"), None, NNRT_INVALID_TENSOR),
    ("no-tensors-nothing-else", lambda m: m.Clear(), None, NNRT_INVALID_TENSOR),
    ("no-subgraph", _clear("subGraph"), None, NNRT_INVALID_MODEL),
    ("no-nodes", _clear("nodes"), None, NNRT_INVALID_NODE),
    ("inputIndex-empty", _clear("inputIndex"), None, NNRT_INVALID_INPUT),
    ("inputIndex-eq-count", _set(lambda m: m, inputIndex=[3]), None, NNRT_INVALID_INPUT),
    ("inputIndex-far", _set(lambda m: m, inputIndex=[1000]), None, NNRT_INVALID_INPUT),
    ("inputIndex-duplicated", _set(lambda m: m, inputIndex=[X, X]), None, NNRT_INVALID_INPUT),
    ("outputIndex-empty", _clear("outputIndex"), None, NNRT_INVALID_OUTPUT),
    ("outputIndex-eq-count", _set(lambda m: m, outputIndex=[3]), None, NNRT_INVALID_OUTPUT),
    ("outputIndex-far", _set(lambda m: m, outputIndex=[1000]), None, NNRT_INVALID_OUTPUT),
    ("outputIndex-duplicated", _set(lambda m: m, outputIndex=[Y, Y]), None, NNRT_INVALID_OUTPUT),
    ("dataType-unknown-0", _set(_tensor(X), dataType=0), None, NNRT_INVALID_DATATYPE),
    ("dataType-36", _set(_tensor(X), dataType=36), None, NNRT_INVALID_DATATYPE),
    ("dataType-41", _set(_tensor(X), dataType=41), None, NNRT_INVALID_DATATYPE),
    ("dataType-99", _set(_tensor(X), dataType=99), None, NNRT_INVALID_DATATYPE),
    ("dataType-99-on-output", _set(_tensor(Y), dataType=99), None, NNRT_INVALID_DATATYPE),
    ("format-5", _set(_tensor(X), format=5), None, NNRT_INVALID_FORMAT),
    ("format--2", _set(_tensor(Y), format=-2), None, NNRT_INVALID_FORMAT),
    ("dims--2", _set(_tensor(X), dims=[2, -2]), None, NNRT_INVALID_SHAPE),
    ("quant-numBits-0", _quant(numBits=0), None, NNRT_INVALID_TENSOR),
    ("quant-numBits-33", _quant(numBits=33), None, NNRT_INVALID_TENSOR),
    ("quant-scale-nan", _quant(scale=math.nan), None, NNRT_INVALID_TENSOR),
    ("quant-scale-inf", _quant(scale=math.inf), None, NNRT_INVALID_TENSOR),
    ("quant-scale-negative", _quant(scale=-0.5), None, NNRT_INVALID_TENSOR),
    ("constant-dataSize-short", _set(lambda m: m.allTensors[WT].data, dataSize=20), None,
     NNRT_INVALID_TENSOR),
    ("constant-dataSize-long", _set(lambda m: m.allTensors[WT].data, dataSize=28), None,
     NNRT_INVALID_TENSOR),
    ("constant-dynamic-dim", _set(_tensor(WT), dims=[-1, 3]), None, NNRT_INVALID_TENSOR),
    ("constant-window-past-end", _set(lambda m: m.allTensors[WT].data, offset=4), None,
     NNRT_MEMORY_ERROR),
    ("constant-bufferSize-too-big", _set(lambda m: m.allTensors[WT].data, bufferSize=32), None,
     NNRT_MEMORY_ERROR),
    ("constant-bufferSize-too-small", _set(lambda m: m.allTensors[WT].data, bufferSize=16), None,
     NNRT_MEMORY_ERROR),
    ("constant-unknown-bufferId", _set(lambda m: m.allTensors[WT].data, bufferId=9999), None,
     NNRT_MEMORY_ERROR),
    ("NODE_TYPE_NONE", _set(_node0, nodeType=na.NODE_TYPE_NONE), None, NNRT_INVALID_NODE),
    ("nodeType-4", _set(_node0, nodeType=4), None, NNRT_UNSUPPORTED_OP),
    ("nodeType-998", _set(_node0, nodeType=998), None, NNRT_UNSUPPORTED_OP),
    ("attribute-of-another-op", _switch_attribute, None, NNRT_INVALID_NODE),
    ("attribute-missing", lambda m: m.nodes[0].ClearField("nodeAttr"), None, NNRT_INVALID_NODE),
    ("quantType-7", _set(_node0, quantType=7), None, NNRT_INVALID_NODE),
    ("node-input-eq-count", _set(_node0, inputIndex=[X, 3]), None, NNRT_INVALID_NODE),
    ("node-output-eq-count", _set(_node0, outputIndex=[3]), None, NNRT_INVALID_NODE),
    ("node-without-outputs", _set(_node0, outputIndex=[]), None, NNRT_INVALID_NODE),
    ("tensor-produced-twice", _duplicate_node, None, NNRT_INVALID_MODEL),
    ("node-writes-model-input", _set(_node0, outputIndex=[X]), None, NNRT_INVALID_MODEL),
    ("node-writes-constant", _set(_node0, outputIndex=[WT]), None, NNRT_INVALID_MODEL),
    ("node-reads-unproduced", _read_unproduced, None, NNRT_INVALID_MODEL),
    ("node-reads-its-own-output", _set(_node0, inputIndex=[X, Y]), None, NNRT_INVALID_MODEL),
    ("cycle", None, cycle_builder, NNRT_INVALID_MODEL),
    ("output-never-computed", _output_never_computed, None, NNRT_INVALID_OUTPUT),
    ("input-with-constant-data", _set(lambda m: m, inputIndex=[X, WT]), None, NNRT_INVALID_INPUT),
    ("subgraph-nodeIndices-eq-count", _set(lambda m: m.subGraph[0], nodeIndices=[1]), None,
     NNRT_INVALID_MODEL),
    ("subgraph-inputIndices-eq-count", _set(lambda m: m.subGraph[0], inputIndices=[3]), None,
     NNRT_INVALID_MODEL),
    ("subgraph-outputIndices-far", _set(lambda m: m.subGraph[0], outputIndices=[77]), None,
     NNRT_INVALID_MODEL),
]
STRUCTURAL_PARAMS = [pytest.param(m, b, c, id=i) for i, m, b, c in STRUCTURAL]

# The checks of a node's type and attributes: PrepareModel refuses them with the code above,
# but GetSupportedOperation answers such a node `false` instead (hdi.md 3.5).
NODE_IDENTITY = {"NODE_TYPE_NONE", "nodeType-4", "nodeType-998", "attribute-of-another-op",
                 "attribute-missing", "quantType-7"}


# ---------------------------------------------------------------- PrepareModel


def test_the_unmodified_model_prepares_and_runs(client, shared_driver):
    assert prepare_code(client, lambda m: None) == NNRT_SUCCESS
    assert_serves(client, shared_driver)


@pytest.mark.parametrize("mutate, builder, code", STRUCTURAL_PARAMS)
def test_prepare_model_refuses(client, shared_driver, mutate, builder, code):
    reply = reply_of(client, mutate, builder() if builder else None)
    assert reply.returnCode == code
    assert reply.preparedModelId == 0
    assert_serves(client, shared_driver)


def test_constant_of_another_session_is_not_readable(client, shared_driver):
    """A constant naming a buffer id that only another session has → NNRT_MEMORY_ERROR."""
    with shared_driver.client() as other:
        foreign = []
        for _ in range(2):
            code, memory = other.allocate_buffer(W.nbytes)
            assert code == NNRT_SUCCESS
            memory.array(np.float32, SHAPE)[:] = W
            foreign.append(memory)

        def point_at_foreign(model):
            own = model.allTensors[WT].data.bufferId  # this session's constant buffer
            target = next(m for m in foreign if m.buffer_id != own)
            model.allTensors[WT].data.CopyFrom(target.descriptor())

        assert prepare_code(client, point_at_foreign) == NNRT_MEMORY_ERROR
        for memory in foreign:
            memory.close()
    assert_serves(client, shared_driver)


def test_constants_are_copied_before_prepare_model_returns(client, shared_driver):
    """The driver must not keep reading the constant buffer after PrepareModel returns:
    here it is overwritten and released right after the call."""
    builder = add_builder()
    code, memory = client.allocate_buffer(W.nbytes)
    assert code == NNRT_SUCCESS
    memory.array(np.float32, SHAPE)[:] = W
    reply = client.prepare_model(builder.model(memory.descriptor()))
    memory.array(np.float32, SHAPE)[:] = 1e6
    memory.close()
    assert client.release_buffer(memory.descriptor()).returnCode == NNRT_SUCCESS
    assert reply.returnCode == NNRT_SUCCESS
    run_add(client, reply.preparedModelId, seed=7)  # checks x + W, not x + 1e6
    assert client.release_prepared_model(reply.preparedModelId).returnCode == NNRT_SUCCESS


def test_declared_output_dims_inconsistent_with_the_computed_shape(client, shared_driver):
    assert prepare_code(client, _set(_tensor(Y), dims=[3, 2])) == NNRT_INVALID_SHAPE
    assert prepare_code(client, _set(_tensor(Y), dims=[6])) == NNRT_INVALID_SHAPE
    assert prepare_code(client, _set(_tensor(Y), dims=[2, 3, 1])) == NNRT_INVALID_SHAPE
    assert_serves(client, shared_driver)


def test_dynamic_declared_output_dims_are_accepted(client, shared_driver):
    """-1 in a declared output is compatible with any computed size."""
    reply = reply_of(client, _set(_tensor(Y), dims=[-1, 3]))
    assert reply.returnCode == NNRT_SUCCESS
    run_add(client, reply.preparedModelId)
    assert client.release_prepared_model(reply.preparedModelId).returnCode == NNRT_SUCCESS


@pytest.mark.parametrize("config, code", [
    pytest.param(ht.ModelConfig(mode=5), NNRT_INVALID_PERFORMANCE_MODE, id="mode-5"),
    pytest.param(ht.ModelConfig(mode=-1), NNRT_INVALID_PERFORMANCE_MODE, id="mode--1"),
    pytest.param(ht.ModelConfig(priority=4), NNRT_INVALID_PRIORITY, id="priority-4"),
    pytest.param(ht.ModelConfig(priority=-1), NNRT_INVALID_PRIORITY, id="priority--1"),
    pytest.param(ht.ModelConfig(mode=4, priority=3), NNRT_SUCCESS, id="both-at-their-maximum"),
])
def test_model_config_ranges(client, shared_driver, config, code):
    assert prepare_code(client, config=config) == code
    assert_serves(client, shared_driver)


def test_enable_float16_on_a_device_without_float16():
    # The host refuses what the device says it cannot do. The CPU driver has float16, so a
    # device class without it is served in-process here, through the real servicer.
    from dataclasses import replace as dc_replace

    from nnrt.drivers.cpu.device import CpuDevice
    from nnrt.server.faults import FaultInjection
    from nnrt.server.servicers import DeviceServicer
    from nnrt.server.sessions import SessionRegistry

    class NoFloat16(CpuDevice):
        capabilities = dc_replace(CpuDevice.capabilities, float16=False)

    sessions = SessionRegistry()
    session = sessions.open(None)

    class Context:
        def invocation_metadata(self):
            return (("nnrt-session", session.token),)

    servicer = DeviceServicer(NoFloat16(), sessions, FaultInjection())
    b = HdiModelBuilder("add-inputs")  # no constants: nothing to pack in shared memory
    x, w = b.input("x", np.float32, SHAPE), b.input("w", np.float32, SHAPE)
    y = b.tensor("y", np.float32, SHAPE)
    b.node(na.NODE_TYPE_ADD_FUSION, [x, w], [y])
    b.mark_outputs(y)
    model = b.model()
    for enable, code in ((True, NNRT_NOT_SUPPORT), (False, NNRT_SUCCESS)):
        reply = servicer.PrepareModel(pb.PrepareModelRequest(
            model=model, config=ht.ModelConfig(enableFloat16=enable)), Context())
        assert reply.returnCode == code
    sessions.close(session)


def test_a_node_the_cpu_driver_cannot_compute_is_refused_with_unsupported_op(client, shared_driver):
    b = HdiModelBuilder("unsupported")
    x = b.input("x", np.float32, SHAPE)
    y = b.tensor("y", np.float32, SHAPE)
    add_unsupported_node(b, x, y)
    b.mark_outputs(y)
    assert prepare_code(client, builder=b) == NNRT_UNSUPPORTED_OP
    assert_serves(client, shared_driver)


# ---------------------------------------------------------------- GetSupportedOperation


def test_get_supported_operation_answers_per_node(client, shared_driver):
    b = HdiModelBuilder("mixed")
    x = b.input("x", np.float32, SHAPE)
    w = b.constant("w", W)
    t1, t2, t3 = (b.tensor(f"t{i}", np.float32, SHAPE) for i in (1, 2, 3))
    b.node(na.NODE_TYPE_ADD_FUSION, [x, w], [t1])
    add_unsupported_node(b, t1, t2)
    b.node(na.NODE_TYPE_ADD_FUSION, [t2, w], [t3], quant_type=ht.QUANT_TYPE_ALL)
    b.mark_outputs(t3)
    reply = supported_reply(client, builder=b)
    assert reply.returnCode == NNRT_SUCCESS
    assert list(reply.ops) == [True, False, False]
    # PrepareModel of the same model is refused: two of its nodes cannot run here.
    assert prepare_code(client, builder=b) == NNRT_UNSUPPORTED_OP
    assert_serves(client, shared_driver)


def test_get_supported_operation_of_a_good_model(client):
    reply = supported_reply(client)
    assert reply.returnCode == NNRT_SUCCESS
    assert list(reply.ops) == [True]


def _quant_cast_builder(node_type, attrs):
    b = HdiModelBuilder("quant-cast")
    x = b.input("x", np.int8, SHAPE)
    y = b.tensor("y", np.float32, SHAPE)
    b.node(node_type, [x], [y], attrs)
    b.mark_outputs(y)
    return b


@pytest.mark.parametrize("layout", ["v1-attribute", "v2-attribute"])
def test_quant_dtype_cast_accepts_the_v2_attribute_layout(client, shared_driver, layout):
    """v2.1 framework quirk (hdi.md 5.3.1): QUANT_DTYPE_CAST nodes carry QuantDTypeCastV2."""
    b = _quant_cast_builder(na.NODE_TYPE_QUANT_DTYPE_CAST,
                            na.QuantDTypeCast(srcT=ht.DATA_TYPE_INT8, dstT=ht.DATA_TYPE_FLOAT32))
    if layout == "v2-attribute":
        b.nodes[0].quant_dtype_cast_v2.CopyFrom(
            na.QuantDTypeCastV2(srcT=ht.DATA_TYPE_INT8, dstT=ht.DATA_TYPE_FLOAT32, axis=0))
    assert b.nodes[0].WhichOneof("nodeAttr") == {"v1-attribute": "quant_dtype_cast",
                                                  "v2-attribute": "quant_dtype_cast_v2"}[layout]
    reply = supported_reply(client, builder=b)
    assert reply.returnCode == NNRT_SUCCESS  # validation passed; the kernel may answer false
    assert len(reply.ops) == 1
    assert_serves(client, shared_driver)


def test_quant_dtype_cast_v2_node_type_does_not_accept_the_v1_attribute(client, shared_driver):
    """The exception is one-way: NODE_TYPE_QUANT_DTYPE_CAST_V2 needs its own struct."""
    b = _quant_cast_builder(na.NODE_TYPE_QUANT_DTYPE_CAST_V2,
                            na.QuantDTypeCastV2(srcT=ht.DATA_TYPE_INT8, dstT=ht.DATA_TYPE_FLOAT32))
    b.nodes[0].quant_dtype_cast.SetInParent()
    reply = supported_reply(client, builder=b)
    assert (reply.returnCode, list(reply.ops)) == (NNRT_SUCCESS, [False])
    assert prepare_code(client, builder=b) == NNRT_INVALID_NODE
    assert_serves(client, shared_driver)


@pytest.mark.parametrize("mutate, builder, code", [
    p for p in STRUCTURAL_PARAMS if p.id not in NODE_IDENTITY
])
def test_get_supported_operation_codes_match_prepare_model(client, shared_driver, mutate,
                                                           builder, code):
    reply = supported_reply(client, mutate, builder() if builder else None)
    assert reply.returnCode == code
    assert list(reply.ops) == []
    assert_serves(client, shared_driver)


@pytest.mark.parametrize("mutate, builder, code", [
    p for p in STRUCTURAL_PARAMS if p.id in NODE_IDENTITY
])
def test_get_supported_operation_answers_false_for_an_undecodable_node(client, shared_driver,
                                                                      mutate, builder, code):
    """hdi.md 3.5: a node whose type or attributes cannot be decoded is answered false, and
    the nodes around it are still answered."""
    assert builder is None
    with add_builder().packed(client) as model:
        extra = _extra_tensor(model)
        model.nodes.add().CopyFrom(model.nodes[0])  # node 1: y2 = x + W, a good node
        model.nodes[1].outputIndex[0] = extra
        model.outputIndex.append(extra)
        model.subGraph[0].nodeIndices.append(1)
        good = client.get_supported_operation(model)
        mutate(model)  # the case's defect, on node 0
        reply = client.get_supported_operation(model)
        prepared = client.prepare_model(model)
    assert (good.returnCode, list(good.ops)) == (NNRT_SUCCESS, [True, True])
    assert (reply.returnCode, list(reply.ops)) == (NNRT_SUCCESS, [False, True])
    assert list(reply.reasons) == ["its type or attributes cannot be decoded", ""]
    assert prepared.returnCode == code and prepared.reason  # why, next to the code
    assert_serves(client, shared_driver)
