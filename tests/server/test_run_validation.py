"""Run validation and the buffers it names, through a real driver process.

One test per check of server/execution.py (hdi.md 4.3, 7.3, 7.4) with its exact code, plus
AllocateBuffer / ReleaseBuffer and fds registered over the session channel. Every window in
a request is valid except the one defect under test, and after every refusal a valid Run
on the same driver still computes x + W.
"""

from __future__ import annotations

import fcntl
import math
import os
import tempfile

import numpy as np
import pytest

from nnrt.client.core.driver import DriverGone
from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import (
    NNRT_INSUFFICIENT_BUFFER,
    NNRT_INVALID_BUFFER,
    NNRT_INVALID_BUFFER_SIZE,
    NNRT_INVALID_DATATYPE,
    NNRT_INVALID_FORMAT,
    NNRT_INVALID_INPUT,
    NNRT_INVALID_MODEL,
    NNRT_INVALID_OUTPUT,
    NNRT_INVALID_PARAMETER,
    NNRT_INVALID_SHAPE,
    NNRT_OUT_OF_DIMENTION_RANGES,
    NNRT_OUT_OF_MEMORY,
    NNRT_SUCCESS,
)

SHAPE = (2, 3)
NBYTES = 24  # float32 [2, 3]
W = np.array([[0.5, -1.0, 2.0], [-3.5, 0.0, 8.0]], dtype=np.float32)
W_ROW = np.array([1.0, -2.0, 0.25], dtype=np.float32)  # the constant of the dynamic models
F32 = ht.DATA_TYPE_FLOAT32
SENTINEL = np.float32(-777.0)
TIMEOUT = 10.0


# ---------------------------------------------------------------- models


def add_builder(fmt=ht.FORMAT_NONE) -> HdiModelBuilder:
    """y = x + W, x and y float32 [2, 3]."""
    b = HdiModelBuilder("add")
    x = b.input("x", np.float32, SHAPE, fmt)
    w = b.constant("w", W, fmt)
    y = b.tensor("y", np.float32, SHAPE, fmt=fmt)
    b.node(na.NODE_TYPE_ADD_FUSION, [x, w], [y])
    b.mark_outputs(y)
    return b


def two_output_builder(dynamic: bool) -> HdiModelBuilder:
    """y = x + W_ROW and z = relu(y), outputs (y, z); x is [2, 3] or [-1, 3]."""
    dims = (-1, 3) if dynamic else SHAPE
    b = HdiModelBuilder("add-relu")
    x = b.input("x", np.float32, dims)
    w = b.constant("w", W_ROW)
    y = b.tensor("y", np.float32, dims)
    z = b.tensor("z", np.float32, dims)
    b.node(na.NODE_TYPE_ADD_FUSION, [x, w], [y])
    b.node(na.NODE_TYPE_ACTIVATION, [y], [z], na.Activation(activationType=ht.ACTIVATION_TYPE_RELU))
    b.mark_outputs(y, z)
    return b


def dynamic_add_builder() -> HdiModelBuilder:
    """y = x + W_ROW with x [-1, 3]."""
    b = HdiModelBuilder("dynamic-add")
    x = b.input("x", np.float32, (-1, 3))
    w = b.constant("w", W_ROW)
    y = b.tensor("y", np.float32, (-1, 3))
    b.node(na.NODE_TYPE_ADD_FUSION, [x, w], [y])
    b.mark_outputs(y)
    return b


# ---------------------------------------------------------------- helpers


def alloc(client, nbytes: int):
    code, memory = client.allocate_buffer(nbytes)
    assert code == NNRT_SUCCESS
    return memory


def free(client, *memories) -> None:
    for memory in memories:
        memory.close()
        assert client.release_buffer(memory.descriptor()).returnCode == NNRT_SUCCESS


def io(memory, dims, *, offset=0, length=None, data_type=F32, fmt=ht.FORMAT_NONE,
       **buffer_fields) -> ht.IOTensor:
    """An IOTensor on a window of `memory`: [offset, offset + length), length defaulting to
    exactly dims × 4 bytes; buffer_fields override the SharedBuffer (bufferId=...)."""
    if length is None:
        length = math.prod(dims) * 4
    data = memory.descriptor(offset, length)
    for name, value in buffer_fields.items():
        setattr(data, name, value)
    return ht.IOTensor(name="t", dataType=data_type, dimensions=list(dims), format=fmt, data=data)


def dims_of(reply) -> list[list[int]]:
    return [list(d.values) for d in reply.outputDims]


class Rig:
    """A prepared y = x + W with an input and an output buffer (128 bytes each, so that a
    window may move or grow and still be inside its buffer)."""

    SIZE = 128

    def __init__(self, client, fmt=ht.FORMAT_NONE) -> None:
        self.client = client
        self.fmt = fmt
        self.model_id = add_builder(fmt).prepare(client)
        self.inp = alloc(client, self.SIZE)
        self.out = alloc(client, self.SIZE)
        self.rng = np.random.default_rng(self.model_id)
        self.x = self.write_x()

    def write_x(self) -> np.ndarray:
        x = self.rng.standard_normal(SHAPE).astype(np.float32)
        self.inp.array(np.float32, SHAPE)[:] = x
        return x

    def inputs(self, **kw) -> list[ht.IOTensor]:
        return [io(self.inp, kw.pop("dims", SHAPE), fmt=kw.pop("fmt", self.fmt), **kw)]

    def outputs(self, **kw) -> list[ht.IOTensor]:
        return [io(self.out, kw.pop("dims", SHAPE), fmt=kw.pop("fmt", self.fmt), **kw)]

    def run(self, inputs=None, outputs=None, model_id=None):
        return self.client.run(self.model_id if model_id is None else model_id,
                               self.inputs() if inputs is None else inputs,
                               self.outputs() if outputs is None else outputs, timeout=TIMEOUT)

    def fill_output(self) -> None:
        self.out.array(np.float32, [self.SIZE // 4])[:] = SENTINEL

    def output_untouched(self) -> bool:
        return bool(np.all(self.out.array(np.float32, [self.SIZE // 4]) == SENTINEL))

    def assert_serves(self, shared_driver=None) -> None:
        """A valid Run on fresh data returns 0, [2, 3] and x + W."""
        if shared_driver is not None:
            assert shared_driver.proc.poll() is None
        x = self.write_x()
        self.fill_output()
        reply = self.run()
        assert reply.returnCode == NNRT_SUCCESS
        assert dims_of(reply) == [list(SHAPE)]
        np.testing.assert_array_equal(self.out.array(np.float32, SHAPE), x + W)

    def close(self) -> None:
        self.client.release_prepared_model(self.model_id)
        free(self.client, self.inp, self.out)


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def client(shared_driver):
    """One session for the whole module, overriding conftest's session per test: ending a
    session costs ~0.2 s (gRPC channel shutdown); each test releases what it creates."""
    with shared_driver.client() as session:
        yield session


@pytest.fixture
def rig(client):
    r = Rig(client)
    yield r
    r.close()


# ---------------------------------------------------------------- prepared model


@pytest.mark.parametrize("model_id", [0, 999, 2**63 + 5])
def test_unknown_prepared_model_id(rig, shared_driver, model_id):
    assert rig.run(model_id=model_id).returnCode == NNRT_INVALID_MODEL
    assert rig.client.get_input_dim_ranges(model_id).returnCode == NNRT_INVALID_MODEL
    rig.assert_serves(shared_driver)


def test_prepared_model_of_another_session(rig, shared_driver):
    with shared_driver.client() as other:
        inp, out = alloc(other, NBYTES), alloc(other, NBYTES)
        reply = other.run(rig.model_id, [io(inp, SHAPE)], [io(out, SHAPE)], timeout=TIMEOUT)
        assert reply.returnCode == NNRT_INVALID_MODEL
        assert other.release_prepared_model(rig.model_id).returnCode == NNRT_INVALID_MODEL
        inp.close()
        out.close()
    rig.assert_serves(shared_driver)  # the model is still there for its own session


def test_run_after_release_and_release_twice(rig, shared_driver):
    model_id = add_builder().prepare(rig.client)
    assert rig.run(model_id=model_id).returnCode == NNRT_SUCCESS
    assert rig.client.release_prepared_model(model_id).returnCode == NNRT_SUCCESS
    assert rig.run(model_id=model_id).returnCode == NNRT_INVALID_MODEL
    assert rig.client.get_input_dim_ranges(model_id).returnCode == NNRT_INVALID_MODEL
    assert rig.client.release_prepared_model(model_id).returnCode == NNRT_INVALID_MODEL
    rig.assert_serves(shared_driver)


# ---------------------------------------------------------------- counts, types, shapes


@pytest.mark.parametrize("count", [0, 2])
def test_input_count(rig, shared_driver, count):
    assert rig.run(inputs=rig.inputs() * count).returnCode == NNRT_INVALID_INPUT
    rig.assert_serves(shared_driver)


@pytest.mark.parametrize("count", [0, 2])
def test_output_count(rig, shared_driver, count):
    assert rig.run(outputs=rig.outputs() * count).returnCode == NNRT_INVALID_OUTPUT
    rig.assert_serves(shared_driver)


@pytest.mark.parametrize("data_type", [ht.DATA_TYPE_INT32, ht.DATA_TYPE_UINT32,
                                       ht.DATA_TYPE_FLOAT16, ht.DATA_TYPE_FLOAT64, 0, 99])
@pytest.mark.parametrize("side", ["input", "output"])
def test_data_type_mismatch(rig, shared_driver, side, data_type):
    bad = getattr(rig, side + "s")(data_type=data_type)
    reply = rig.run(inputs=bad) if side == "input" else rig.run(outputs=bad)
    assert reply.returnCode == NNRT_INVALID_DATATYPE
    rig.assert_serves(shared_driver)


@pytest.mark.parametrize("fmt", [ht.FORMAT_NCHW, ht.FORMAT_NHWC, 5])
@pytest.mark.parametrize("side", ["input", "output"])
def test_format_mismatch(rig, shared_driver, side, fmt):
    bad = getattr(rig, side + "s")(fmt=fmt)
    reply = rig.run(inputs=bad) if side == "input" else rig.run(outputs=bad)
    assert reply.returnCode == NNRT_INVALID_FORMAT
    rig.assert_serves(shared_driver)


def test_format_of_an_nhwc_model(client, shared_driver):
    nhwc = Rig(client, fmt=ht.FORMAT_NHWC)
    try:
        assert nhwc.run(inputs=nhwc.inputs(fmt=ht.FORMAT_NONE)).returnCode == NNRT_INVALID_FORMAT
        assert nhwc.run(outputs=nhwc.outputs(fmt=ht.FORMAT_NCHW)).returnCode == NNRT_INVALID_FORMAT
        nhwc.assert_serves(shared_driver)
    finally:
        nhwc.close()


@pytest.mark.parametrize("dims", [[6], [2, 3, 1], [1, 2, 3], []])
def test_input_rank(rig, shared_driver, dims):
    assert rig.run(inputs=rig.inputs(dims=dims)).returnCode == NNRT_INVALID_SHAPE
    rig.assert_serves(shared_driver)


@pytest.mark.parametrize("dims", [[1, 3], [2, 4], [3, 2], [0, 3]])
def test_input_fixed_dimension(rig, shared_driver, dims):
    assert rig.run(inputs=rig.inputs(dims=dims)).returnCode == NNRT_INVALID_SHAPE
    rig.assert_serves(shared_driver)


def test_static_model_dim_ranges_are_its_dims(rig):
    reply = rig.client.get_input_dim_ranges(rig.model_id)
    assert reply.returnCode == NNRT_SUCCESS
    assert [list(d.values) for d in reply.minInputDims] == [list(SHAPE)]
    assert [list(d.values) for d in reply.maxInputDims] == [list(SHAPE)]


def test_dynamic_dimension_ranges(client, rig, shared_driver):
    model_id = dynamic_add_builder().prepare(client)
    ranges = client.get_input_dim_ranges(model_id)
    assert ranges.returnCode == NNRT_SUCCESS
    assert [list(d.values) for d in ranges.minInputDims] == [[1, 3]]
    (maxs,) = [list(d.values) for d in ranges.maxInputDims]
    assert maxs[1] == 3 and maxs[0] >= 1
    top = maxs[0]
    assert top + 1 <= 1 << 20, "buffers below are sized for the range; revisit if it grows"
    inp, out = alloc(client, (top + 1) * 12), alloc(client, (top + 1) * 12)
    try:
        def run(rows, cols=3):
            return client.run(model_id, [io(inp, [rows, cols])], [io(out, [rows, cols])],
                              timeout=TIMEOUT)

        assert run(0).returnCode == NNRT_OUT_OF_DIMENTION_RANGES
        assert run(top + 1).returnCode == NNRT_OUT_OF_DIMENTION_RANGES
        assert run(4, cols=2).returnCode == NNRT_INVALID_SHAPE  # the fixed dimension
        rng = np.random.default_rng(3)
        for rows in sorted({1, 5, top}):  # both ends of the range are inclusive
            x = rng.standard_normal((rows, 3)).astype(np.float32)
            inp.array(np.float32, (rows, 3))[:] = x
            out.array(np.float32, ((top + 1) * 3,))[:] = SENTINEL
            reply = run(rows)
            assert reply.returnCode == NNRT_SUCCESS
            assert dims_of(reply) == [[rows, 3]]
            np.testing.assert_array_equal(out.array(np.float32, (rows, 3)), x + W_ROW)
            assert np.all(out.array(np.float32, ((top + 1) * 3,))[rows * 3:] == SENTINEL)
    finally:
        free(client, inp, out)
        assert client.release_prepared_model(model_id).returnCode == NNRT_SUCCESS
    rig.assert_serves(shared_driver)


# ---------------------------------------------------------------- windows


@pytest.mark.parametrize("side", ["input", "output"])
@pytest.mark.parametrize("buffer_id", [0, 9999])
def test_unknown_buffer_id(rig, shared_driver, side, buffer_id):
    bad = getattr(rig, side + "s")(bufferId=buffer_id)
    reply = rig.run(inputs=bad) if side == "input" else rig.run(outputs=bad)
    assert reply.returnCode == NNRT_INVALID_BUFFER
    rig.assert_serves(shared_driver)


@pytest.mark.parametrize("side", ["input", "output"])
@pytest.mark.parametrize("offset, length", [(Rig.SIZE - NBYTES + 4, NBYTES), (0, Rig.SIZE + 4),
                                            (Rig.SIZE, NBYTES)])
def test_window_past_the_buffer_end(rig, shared_driver, side, offset, length):
    bad = getattr(rig, side + "s")(offset=offset, length=length)
    reply = rig.run(inputs=bad) if side == "input" else rig.run(outputs=bad)
    assert reply.returnCode == NNRT_INVALID_BUFFER
    rig.assert_serves(shared_driver)


@pytest.mark.parametrize("side", ["input", "output"])
@pytest.mark.parametrize("declared", [Rig.SIZE + 4, Rig.SIZE - 8, NBYTES])
def test_buffer_size_other_than_the_real_one(rig, shared_driver, side, declared):
    """The window fits the declared size, but the declared size is not the buffer's."""
    bad = getattr(rig, side + "s")(bufferSize=declared)
    reply = rig.run(inputs=bad) if side == "input" else rig.run(outputs=bad)
    assert reply.returnCode == NNRT_INVALID_BUFFER_SIZE
    rig.assert_serves(shared_driver)


@pytest.mark.parametrize("length", [0, 4, NBYTES - 1])
def test_input_window_too_small(rig, shared_driver, length):
    assert rig.run(inputs=rig.inputs(length=length)).returnCode == NNRT_INVALID_PARAMETER
    rig.assert_serves(shared_driver)


def _check_output_too_small(client, model_id, rows, small, in_place=False):
    """Run the two-output model with output `small` one row short; nothing may be written."""
    x = np.random.default_rng(rows).standard_normal((rows, 3)).astype(np.float32)
    inp = alloc(client, x.nbytes)
    outs = [alloc(client, 64 + x.nbytes) for _ in range(2)]
    try:
        inp.array(np.float32, x.shape)[:] = x
        for out in outs:
            out.array(np.float32, [out.size // 4])[:] = SENTINEL
        lengths = [x.nbytes, x.nbytes]
        lengths[small] -= 12
        reply = client.run(model_id, [io(inp, x.shape)],
                           [io(out, x.shape, offset=16, length=n) for out, n in zip(outs, lengths)],
                           timeout=TIMEOUT)
        assert reply.returnCode == NNRT_INSUFFICIENT_BUFFER
        assert dims_of(reply) == [[rows, 3], [rows, 3]]  # the true shapes, of every output
        for out in outs:
            assert np.all(out.array(np.float32, [out.size // 4]) == SENTINEL)
        # With room for both, the same request succeeds (and writes at offset 16).
        reply = client.run(model_id, [io(inp, x.shape)],
                           [io(out, x.shape, offset=16) for out in outs], timeout=TIMEOUT)
        assert reply.returnCode == NNRT_SUCCESS
        assert dims_of(reply) == [[rows, 3], [rows, 3]]
        y = x + W_ROW
        np.testing.assert_array_equal(outs[0].array(np.float32, x.shape, offset=16), y)
        np.testing.assert_array_equal(outs[1].array(np.float32, x.shape, offset=16),
                                      np.maximum(y, 0))
        for out in outs:
            assert np.all(out.array(np.float32, [4]) == SENTINEL)  # before the window
    finally:
        free(client, inp, *outs)


@pytest.mark.parametrize("small", [0, 1], ids=["first-output-small", "second-output-small"])
def test_output_window_too_small_static(client, rig, shared_driver, small):
    model_id = two_output_builder(dynamic=False).prepare(client)
    try:
        _check_output_too_small(client, model_id, rows=2, small=small)
    finally:
        assert client.release_prepared_model(model_id).returnCode == NNRT_SUCCESS
    rig.assert_serves(shared_driver)


@pytest.mark.parametrize("small", [0, 1], ids=["first-output-small", "second-output-small"])
def test_output_window_too_small_dynamic(client, rig, shared_driver, small):
    model_id = two_output_builder(dynamic=True).prepare(client)
    try:
        for rows in (1, 4, 9):
            _check_output_too_small(client, model_id, rows=rows, small=small)
    finally:
        assert client.release_prepared_model(model_id).returnCode == NNRT_SUCCESS
    rig.assert_serves(shared_driver)


@pytest.mark.parametrize("shape", ["disjoint", "same-window", "unaligned"])
def test_input_and_output_windows_of_one_buffer(client, rig, shared_driver, shape):
    in_offset, out_offset = {"disjoint": (0, 32), "same-window": (8, 8),
                             "unaligned": (3, 37)}[shape]
    model_id = add_builder().prepare(client)
    memory = alloc(client, 64)
    try:
        memory.view()[:] = b"\xee" * 64
        x = np.random.default_rng(11).standard_normal(SHAPE).astype(np.float32)
        memory.view(in_offset, NBYTES)[:] = x.tobytes()
        reply = client.run(model_id, [io(memory, SHAPE, offset=in_offset)],
                           [io(memory, SHAPE, offset=out_offset)], timeout=TIMEOUT)
        assert reply.returnCode == NNRT_SUCCESS
        assert dims_of(reply) == [list(SHAPE)]
        result = np.frombuffer(bytes(memory.view(out_offset, NBYTES)), np.float32).reshape(SHAPE)
        np.testing.assert_array_equal(result, x + W)
        if shape != "same-window":  # the input is still there, untouched
            assert bytes(memory.view(in_offset, NBYTES)) == x.tobytes()
    finally:
        free(client, memory)
        assert client.release_prepared_model(model_id).returnCode == NNRT_SUCCESS
    rig.assert_serves(shared_driver)


# ---------------------------------------------------------------- sessions own their buffers


def test_buffer_ids_are_session_scoped(shared_driver):
    with shared_driver.client() as a, shared_driver.client() as b:
        rig_a = Rig(a)  # a's only live buffers: rig_a.inp and rig_a.out
        # (a) Ids that only the other session has.
        theirs = [alloc(b, Rig.SIZE) for _ in range(4)]
        foreign = [m.buffer_id for m in theirs
                   if m.buffer_id not in (rig_a.inp.buffer_id, rig_a.out.buffer_id)]
        assert foreign
        for buffer_id in foreign:
            assert rig_a.run(inputs=rig_a.inputs(bufferId=buffer_id)).returnCode \
                == NNRT_INVALID_BUFFER
            assert rig_a.run(outputs=rig_a.outputs(bufferId=buffer_id)).returnCode \
                == NNRT_INVALID_BUFFER
        free(b, *theirs)
        # (b) b, now without any buffer, names a's buffers by their numbers.
        model_id = add_builder().prepare(b)
        rig_a.fill_output()
        reply = b.run(model_id, [io(rig_a.inp, SHAPE)], [io(rig_a.out, SHAPE)], timeout=TIMEOUT)
        assert reply.returnCode == NNRT_INVALID_BUFFER
        assert rig_a.output_untouched()
        assert b.release_buffer(rig_a.inp.descriptor()).returnCode == NNRT_INVALID_BUFFER
        # a's buffers were neither written nor freed.
        rig_a.assert_serves(shared_driver)
        rig_a.close()


# ---------------------------------------------------------------- AllocateBuffer / ReleaseBuffer


@pytest.mark.parametrize("length, code", [(0, NNRT_INVALID_PARAMETER),
                                          (2**30 + 1, NNRT_OUT_OF_MEMORY),
                                          (2**32 - 1, NNRT_OUT_OF_MEMORY)])
def test_allocate_buffer_refuses(rig, shared_driver, length, code):
    got, memory = rig.client.allocate_buffer(length)
    assert (got, memory) == (code, None)
    memory = alloc(rig.client, 1)  # the smallest one works
    assert memory.size >= 1
    free(rig.client, memory)
    rig.assert_serves(shared_driver)


def test_release_buffer_unknown_and_twice(rig, shared_driver):
    unknown = ht.SharedBuffer(bufferId=987654, bufferSize=16, offset=0, dataSize=16)
    assert rig.client.release_buffer(unknown).returnCode == NNRT_INVALID_BUFFER
    memory = alloc(rig.client, 16)
    memory.close()
    assert rig.client.release_buffer(memory.descriptor()).returnCode == NNRT_SUCCESS
    assert rig.client.release_buffer(memory.descriptor()).returnCode == NNRT_INVALID_BUFFER
    rig.assert_serves(shared_driver)


def test_release_buffer_frees_exactly_the_one_named(rig, shared_driver):
    a, b = alloc(rig.client, NBYTES), alloc(rig.client, NBYTES)
    x = np.random.default_rng(5).standard_normal(SHAPE).astype(np.float32)
    for memory in (a, b):
        memory.array(np.float32, SHAPE)[:] = x
    a.close()
    assert rig.client.release_buffer(a.descriptor()).returnCode == NNRT_SUCCESS
    assert rig.run(inputs=[io(a, SHAPE)]).returnCode == NNRT_INVALID_BUFFER
    reply = rig.run(inputs=[io(b, SHAPE)])
    assert reply.returnCode == NNRT_SUCCESS
    np.testing.assert_array_equal(rig.out.array(np.float32, SHAPE), x + W)
    free(rig.client, b)
    rig.assert_serves(shared_driver)  # rig's own buffers are still there too


# ---------------------------------------------------------------- registered fds


def _memfd(size: int, flags=os.MFD_ALLOW_SEALING) -> int:
    fd = os.memfd_create("nnrt-test", flags | os.MFD_CLOEXEC)
    os.ftruncate(fd, size)
    return fd


@pytest.mark.parametrize("kind, code", [
    ("regular-file", NNRT_INVALID_BUFFER),
    ("pipe", NNRT_INVALID_BUFFER),
    ("memfd-without-sealing", NNRT_INVALID_BUFFER),
    ("empty-memfd", NNRT_INVALID_BUFFER_SIZE),
])
def test_register_fd_refuses(rig, shared_driver, kind, code):
    with tempfile.TemporaryFile() as regular:
        if kind == "regular-file":
            regular.write(b"\0" * 4096)
            regular.flush()
            fds, mine = [regular.fileno()], []
        elif kind == "pipe":
            fds = mine = list(os.pipe())
        elif kind == "memfd-without-sealing":
            fds = mine = [_memfd(4096, flags=0)]
        else:
            fds = mine = [_memfd(0)]
        try:
            got, memory = rig.client.register_fd(fds[0])
            assert (got, memory) == (code, None)
            os.fstat(fds[0])  # the caller's own fd is left open
        finally:
            for fd in mine:
                os.close(fd)
    rig.assert_serves(shared_driver)


def test_registered_memfd_is_sealed_and_used_at_its_offsets(rig, shared_driver):
    fd = _memfd(4096)
    try:
        x = np.random.default_rng(9).standard_normal(SHAPE).astype(np.float32)
        os.pwrite(fd, b"\xab" * 4096, 0)
        os.pwrite(fd, x.tobytes(), 64)  # written through the fd, not a driver mapping
        code, memory = rig.client.register_fd(fd)
        assert code == NNRT_SUCCESS
        assert memory.size == 4096
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        assert seals & fcntl.F_SEAL_SHRINK
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 1024)
        assert os.fstat(fd).st_size == 4096
        reply = rig.run(inputs=[io(memory, SHAPE, offset=64)],
                        outputs=[io(memory, SHAPE, offset=2048)])
        assert reply.returnCode == NNRT_SUCCESS
        assert dims_of(reply) == [list(SHAPE)]
        result = np.frombuffer(os.pread(fd, NBYTES, 2048), np.float32).reshape(SHAPE)
        np.testing.assert_array_equal(result, x + W)
        assert os.pread(fd, 64, 0) == b"\xab" * 64  # nothing before the input window moved
        assert os.pread(fd, 16, 2048 + NBYTES) == b"\xab" * 16  # nor after the output
        # Released by the driver, the client's fd stays its own.
        memory.close()
        assert rig.client.release_buffer(memory.descriptor()).returnCode == NNRT_SUCCESS
        assert os.pread(fd, NBYTES, 2048) == result.tobytes()
    finally:
        os.close(fd)
    rig.assert_serves(shared_driver)


def test_register_fd_of_a_write_sealed_memfd(driver):
    # mmap(PROT_WRITE, MAP_SHARED) of a write-sealed memfd fails: refused, the channel lives.
    with driver.client() as client:
        fd = _memfd(4096)
        try:
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)
            got, memory = client.register_fd(fd)
            assert (got, memory) == (NNRT_INVALID_BUFFER, None)
        finally:
            os.close(fd)
    with driver.client(timeout=2.0) as later:  # the driver still opens sessions
        assert alloc(later, 16).size == 16
