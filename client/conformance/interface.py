"""Section `interface`: every INnrtDevice and IPreparedModel method answers, and malformed
models, runs, buffers and caches get the spec's codes (hdi.md 3, 4, 11; the checks of
tests/server/test_model_validation.py, tests/server/test_run_validation.py, tests/server/security/).
The host validates all of these before the device sees them, so every driver on our host
passes; a driver that bypasses the host would not."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nnrt.common import errors as e
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import model_types_pb2 as mt
from nnrt.protos import node_attrs_pb2 as na

from .context import Context, CheckSkipped, add_model, expect, expect_code, prepare, release
from .models import code_text

SECTION = "interface"
N = 4  # elements of the add model's tensors


def _device_methods(ctx: Context) -> None:
    c = ctx.client
    with ctx.check(SECTION, "GetVersion answers 2.0 or 2.1") as out:
        reply = c.get_version()
        expect_code(reply.returnCode, e.NNRT_SUCCESS, "GetVersion", reply.reason)
        expect((reply.major, reply.minor) in ((2, 0), (2, 1)),
               f"version {reply.major}.{reply.minor}")
        out.detail = f"{reply.major}.{reply.minor}"
    for method, what in ((c.get_device_name, "GetDeviceName"),
                         (c.get_vendor_name, "GetVendorName")):
        with ctx.check(SECTION, f"{what} answers a name") as out:
            reply = method()
            expect_code(reply.returnCode, e.NNRT_SUCCESS, what, reply.reason)
            expect(bool(reply.name), f"{what}: empty name")
            out.detail = reply.name
    with ctx.check(SECTION, "GetDeviceType answers a DeviceType") as out:
        reply = c.get_device_type()
        expect_code(reply.returnCode, e.NNRT_SUCCESS, "GetDeviceType", reply.reason)
        expect(reply.deviceType in ht.DeviceType.values(), f"deviceType {reply.deviceType}")
        out.detail = ht.DeviceType.Name(reply.deviceType)
    with ctx.check(SECTION, "GetDeviceStatus answers AVAILABLE") as out:
        reply = c.get_device_status()
        expect_code(reply.returnCode, e.NNRT_SUCCESS, "GetDeviceStatus", reply.reason)
        expect(reply.status == ht.AVAILABLE, f"status {ht.DeviceStatus.Name(reply.status)} "
               f"on an idle device")
    for method, what in ((c.is_float16_precision_supported, "IsFloat16PrecisionSupported"),
                         (c.is_performance_mode_supported, "IsPerformanceModeSupported"),
                         (c.is_priority_supported, "IsPrioritySupported"),
                         (c.is_dynamic_input_supported, "IsDynamicInputSupported"),
                         (c.is_model_cache_supported, "IsModelCacheSupported")):
        with ctx.check(SECTION, f"{what} answers") as out:
            reply = method()
            expect_code(reply.returnCode, e.NNRT_SUCCESS, what, reply.reason)
            ctx.capabilities[what] = reply.isSupported
            out.detail = str(reply.isSupported)
    with ctx.check(SECTION, "GetSupportedOperation answers one flag per node") as out:
        with add_model(N).packed(c) as model:
            reply = c.get_supported_operation(model)
        expect_code(reply.returnCode, e.NNRT_SUCCESS, "GetSupportedOperation", reply.reason)
        expect(len(reply.ops) == 1, f"{len(reply.ops)} flags for 1 node")
        out.detail = f"ADD_FUSION: {reply.ops[0]}"


# (name, mutation of the add model, code): hdi.md 3.10 and tests/server/test_model_validation.py
def _set(**fields) -> Callable[[mt.Model], None]:
    def mutate(model: mt.Model) -> None:
        for name, value in fields.items():
            del getattr(model, name)[:]
            getattr(model, name).extend(value)
    return mutate


def _tensor(index: int, **fields) -> Callable[[mt.Model], None]:
    def mutate(model: mt.Model) -> None:
        for name, value in fields.items():
            setattr(model.allTensors[index], name, value)
    return mutate


def _node(**fields) -> Callable[[mt.Model], None]:
    def mutate(model: mt.Model) -> None:
        for name, value in fields.items():
            setattr(model.nodes[0], name, value)
    return mutate


MALFORMED_MODELS: list[tuple[str, Callable[[mt.Model], None], int]] = [
    ("no tensors", lambda m: m.ClearField("allTensors"), e.NNRT_INVALID_TENSOR),
    ("no subgraph", lambda m: m.ClearField("subGraph"), e.NNRT_INVALID_MODEL),
    ("no nodes", lambda m: m.ClearField("nodes"), e.NNRT_INVALID_NODE),
    ("inputIndex empty", lambda m: m.ClearField("inputIndex"), e.NNRT_INVALID_INPUT),
    ("inputIndex == tensor count", _set(inputIndex=[3]), e.NNRT_INVALID_INPUT),
    ("outputIndex empty", lambda m: m.ClearField("outputIndex"), e.NNRT_INVALID_OUTPUT),
    ("outputIndex far out of range", _set(outputIndex=[1000]), e.NNRT_INVALID_OUTPUT),
    ("dataType 99", _tensor(0, dataType=99), e.NNRT_INVALID_DATATYPE),
    ("format 5", _tensor(0, format=5), e.NNRT_INVALID_FORMAT),
    ("dims with -2", lambda m: m.allTensors[0].dims.extend([-2]), e.NNRT_INVALID_SHAPE),
    ("constant window past its buffer", lambda m: setattr(m.allTensors[1].data, "offset", 1 << 20),
     e.NNRT_MEMORY_ERROR),
    ("nodeType 998", _node(nodeType=998), e.NNRT_UNSUPPORTED_OP),
    ("NODE_TYPE_NONE", _node(nodeType=na.NODE_TYPE_NONE), e.NNRT_INVALID_NODE),
    ("attribute missing", lambda m: m.nodes[0].ClearField("nodeAttr"), e.NNRT_INVALID_NODE),
    ("quantType 7", _node(quantType=7), e.NNRT_INVALID_NODE),
    ("node writes a model input", lambda m: m.nodes[0].outputIndex.__setitem__(0, 0),
     e.NNRT_INVALID_MODEL),
    ("subGraph nodeIndices out of range",
     lambda m: m.subGraph[0].nodeIndices.__setitem__(0, 1), e.NNRT_INVALID_MODEL),
]


def _malformed_models(ctx: Context) -> None:
    c = ctx.client
    for name, mutate, code in MALFORMED_MODELS:
        with ctx.check(SECTION, f"PrepareModel refuses a model with {name}"):
            with add_model(N).packed(c) as model:
                mutate(model)
                reply = c.prepare_model(model)
            release(c, reply.preparedModelId)
            expect_code(reply.returnCode, code, f"PrepareModel ({name})", reply.reason)
            expect(reply.preparedModelId == 0, "a refused model has an id")
    for name, config, code in (
            ("performance mode 7", ctx.config(mode=7), e.NNRT_INVALID_PERFORMANCE_MODE),
            ("priority 9", ctx.config(priority=9), e.NNRT_INVALID_PRIORITY)):
        with ctx.check(SECTION, f"PrepareModel refuses {name}"):
            code_got, model_id, reason = prepare(c, add_model(N), config)
            release(c, model_id)
            expect_code(code_got, code, f"PrepareModel ({name})", reason)
    with ctx.check(SECTION, "GetSupportedOperation answers false for an undecodable node"):
        with add_model(N).packed(c) as model:
            model.nodes[0].nodeType = 998
            reply = c.get_supported_operation(model)
        expect_code(reply.returnCode, e.NNRT_SUCCESS, "GetSupportedOperation", reply.reason)
        expect(list(reply.ops) == [False], f"flags {list(reply.ops)} for a node of type 998")
    with ctx.check(SECTION, "GetSupportedOperation refuses a model without nodes"):
        with add_model(N).packed(c) as model:
            model.ClearField("nodes")
            reply = c.get_supported_operation(model)
        expect_code(reply.returnCode, e.NNRT_INVALID_NODE, "GetSupportedOperation", reply.reason)


class _Rig:
    """The add model prepared, its input and output buffers, and runs of variations."""

    def __init__(self, ctx: Context) -> None:
        self.client = ctx.client
        code, self.model_id, reason = prepare(self.client, add_model(N), ctx.config())
        if code != e.NNRT_SUCCESS:
            raise CheckSkipped(f"the add model does not prepare: {code_text(code, reason)}")
        _, self.inp = self.client.allocate_buffer(4 * N)
        _, self.out = self.client.allocate_buffer(4 * N)
        self.inp.array(np.float32, [N])[:] = np.arange(N, dtype=np.float32)

    def io(self, memory, *, data_type: int = ht.DATA_TYPE_FLOAT32, dims=(N,),
           buffer: ht.SharedBuffer | None = None) -> ht.IOTensor:
        return ht.IOTensor(dataType=data_type, dimensions=list(dims), format=ht.FORMAT_NONE,
                           data=buffer or memory.descriptor(0, 4 * N))

    def run(self, inputs=None, outputs=None, model_id: int | None = None):
        return self.client.run(self.model_id if model_id is None else model_id,
                               inputs if inputs is not None else [self.io(self.inp)],
                               outputs if outputs is not None else [self.io(self.out)],
                               timeout=30)

    def close(self) -> None:
        for memory in (self.inp, self.out):
            memory.close()
            self.client.release_buffer(memory.descriptor())
        release(self.client, self.model_id)


def _runs(ctx: Context) -> None:
    try:
        rig = _Rig(ctx)
    except CheckSkipped as exc:
        ctx.skip(SECTION, "Run checks", str(exc))
        return
    try:
        with ctx.check(SECTION, "Run of a good request succeeds with the outputs' dims"):
            reply = rig.run()
            expect_code(reply.returnCode, e.NNRT_SUCCESS, "Run", reply.reason)
            dims = [list(d.values) for d in reply.outputDims]
            expect(dims == [[N]], f"outputDims {dims}")
            got = rig.out.array(np.float32, [N]).copy()
            expect(np.array_equal(got, 2 * np.arange(N, dtype=np.float32)), f"y = {got}")
        with ctx.check(SECTION, "Run through gRPC (IPreparedModel.Run) answers as the "
                                "session channel does"):
            rig.out.array(np.float32, [N])[:] = 0
            reply = ctx.client.run_grpc(rig.model_id, [rig.io(rig.inp)], [rig.io(rig.out)],
                                        timeout=30)
            expect_code(reply.returnCode, e.NNRT_SUCCESS, "IPreparedModel.Run", reply.reason)
            got = rig.out.array(np.float32, [N]).copy()
            expect(np.array_equal(got, 2 * np.arange(N, dtype=np.float32)), f"y = {got}")
            reply = ctx.client.run_grpc(rig.model_id, [rig.io(rig.inp)] * 2, [rig.io(rig.out)],
                                        timeout=30)
            expect_code(reply.returnCode, e.NNRT_INVALID_INPUT,
                        "IPreparedModel.Run with two inputs for one", reply.reason)
        bogus = ht.SharedBuffer(bufferId=987654, bufferSize=4 * N, offset=0, dataSize=4 * N)
        inp_desc = rig.inp.descriptor(0, 4 * N)
        variations = [
            ("two inputs for one", dict(inputs=[rig.io(rig.inp)] * 2), e.NNRT_INVALID_INPUT),
            ("two outputs for one", dict(outputs=[rig.io(rig.out)] * 2), e.NNRT_INVALID_OUTPUT),
            ("an int32 input for a float32 one",
             dict(inputs=[rig.io(rig.inp, data_type=ht.DATA_TYPE_INT32)]), e.NNRT_INVALID_DATATYPE),
            ("an input of another rank", dict(inputs=[rig.io(rig.inp, dims=(1, N))]),
             e.NNRT_INVALID_SHAPE),
            ("an input of another fixed dimension", dict(inputs=[rig.io(rig.inp, dims=(N - 1,))]),
             e.NNRT_INVALID_SHAPE),
            ("a bogus buffer id", dict(inputs=[rig.io(rig.inp, buffer=bogus)]),
             e.NNRT_INVALID_BUFFER),
            ("a window past the buffer's end",
             dict(outputs=[rig.io(rig.out, buffer=ht.SharedBuffer(
                 bufferId=rig.out.buffer_id, bufferSize=rig.out.size, offset=rig.out.size,
                 dataSize=4 * N))]), e.NNRT_INVALID_BUFFER),
            ("a bufferSize other than the buffer's",
             dict(inputs=[rig.io(rig.inp, buffer=ht.SharedBuffer(
                 bufferId=inp_desc.bufferId, bufferSize=inp_desc.bufferSize + 4096, offset=0,
                 dataSize=4 * N))]), e.NNRT_INVALID_BUFFER_SIZE),
            ("an input window of the wrong byte size",
             dict(inputs=[rig.io(rig.inp, buffer=rig.inp.descriptor(0, 4 * N - 4))]),
             e.NNRT_INVALID_PARAMETER),
            ("an output window too small",
             dict(outputs=[rig.io(rig.out, buffer=rig.out.descriptor(0, 4))]),
             e.NNRT_INSUFFICIENT_BUFFER),
            ("an unknown prepared model id", dict(model_id=424242), e.NNRT_INVALID_MODEL),
        ]
        for name, kwargs, code in variations:
            with ctx.check(SECTION, f"Run refuses {name}"):
                reply = rig.run(**kwargs)
                expect_code(reply.returnCode, code, f"Run with {name}", reply.reason)
        with ctx.check(SECTION, "GetInputDimRanges of a static model are its dims"):
            reply = ctx.client.get_input_dim_ranges(rig.model_id)
            expect_code(reply.returnCode, e.NNRT_SUCCESS, "GetInputDimRanges", reply.reason)
            ranges = ([list(r.values) for r in reply.minInputDims],
                      [list(r.values) for r in reply.maxInputDims])
            expect(ranges == ([[N]], [[N]]), f"ranges {ranges}")
        with ctx.check(SECTION, "IPreparedModel GetVersion answers"):
            reply = ctx.client.prepared_model_version(rig.model_id)
            expect_code(reply.returnCode, e.NNRT_SUCCESS, "IPreparedModel.GetVersion", reply.reason)
        with ctx.check(SECTION, "unknown prepared model ids are refused everywhere"):
            for what, call in (("GetInputDimRanges", ctx.client.get_input_dim_ranges),
                               ("ExportModelCache", ctx.client.export_model_cache),
                               ("ReleasePreparedModel", ctx.client.release_prepared_model)):
                reply = call(424242)
                expect_code(reply.returnCode, e.NNRT_INVALID_MODEL, f"{what} of id 424242",
                            reply.reason)
        with ctx.check(SECTION, "a prepared model of another session is refused"):
            other = ctx.driver.client()
            try:
                reply = other.release_prepared_model(rig.model_id)
                expect_code(reply.returnCode, e.NNRT_INVALID_MODEL,
                            "ReleasePreparedModel of another session's model", reply.reason)
                reply = other.release_buffer(rig.inp.descriptor())
                expect_code(reply.returnCode, e.NNRT_INVALID_BUFFER,
                            "ReleaseBuffer of another session's buffer", reply.reason)
            finally:
                other.close()
        with ctx.check(SECTION, "a released prepared model runs no more"):
            code, model_id, reason = prepare(ctx.client, add_model(N), ctx.config())
            expect_code(code, e.NNRT_SUCCESS, "PrepareModel", reason)
            expect_code(ctx.client.release_prepared_model(model_id).returnCode, e.NNRT_SUCCESS,
                        "ReleasePreparedModel")
            expect_code(rig.run(model_id=model_id).returnCode, e.NNRT_INVALID_MODEL,
                        "Run after ReleasePreparedModel")
            expect_code(ctx.client.release_prepared_model(model_id).returnCode,
                        e.NNRT_INVALID_MODEL, "ReleasePreparedModel twice")
    finally:
        rig.close()


def _buffers(ctx: Context) -> None:
    c = ctx.client
    for length, code in ((0, e.NNRT_INVALID_PARAMETER), (2 ** 32 - 1, e.NNRT_OUT_OF_MEMORY)):
        with ctx.check(SECTION, f"AllocateBuffer of {length} bytes is refused"):
            got, memory = c.allocate_buffer(length)
            if memory is not None:
                memory.close()
                c.release_buffer(memory.descriptor())
            expect_code(got, code, f"AllocateBuffer({length})")
    with ctx.check(SECTION, "ReleaseBuffer of an unknown id and twice is refused"):
        unknown = ht.SharedBuffer(bufferId=987654, bufferSize=64, offset=0, dataSize=64)
        expect_code(c.release_buffer(unknown).returnCode, e.NNRT_INVALID_BUFFER,
                    "ReleaseBuffer of an unknown id")
        code, memory = c.allocate_buffer(64)
        expect_code(code, e.NNRT_SUCCESS, "AllocateBuffer(64)")
        memory.close()
        expect_code(c.release_buffer(memory.descriptor()).returnCode, e.NNRT_SUCCESS,
                    "ReleaseBuffer")
        expect_code(c.release_buffer(memory.descriptor()).returnCode, e.NNRT_INVALID_BUFFER,
                    "ReleaseBuffer twice")


def _caches(ctx: Context) -> None:
    c = ctx.client
    with ctx.check(SECTION, "PrepareModelFromModelCache refuses garbage"):
        code, memory = c.allocate_buffer(256)
        expect_code(code, e.NNRT_SUCCESS, "AllocateBuffer(256)")
        try:
            memory.view()[:] = bytes(range(256))
            reply = c.prepare_model_from_model_cache([memory.descriptor()])
        finally:
            memory.close()
            c.release_buffer(memory.descriptor())
        release(c, reply.preparedModelId)
        want = e.NNRT_INVALID_MODEL_CACHE if ctx.capabilities.get("IsModelCacheSupported") \
            else e.NNRT_NOT_SUPPORT
        expect_code(reply.returnCode, want, "PrepareModelFromModelCache of 256 bytes of garbage",
                    reply.reason)
    with ctx.check(SECTION, "PrepareModelFromModelCache refuses an unknown buffer"):
        bogus = ht.SharedBuffer(bufferId=987654, bufferSize=64, offset=0, dataSize=64)
        reply = c.prepare_model_from_model_cache([bogus])
        release(c, reply.preparedModelId)
        expect(reply.returnCode != e.NNRT_SUCCESS, "a cache of an unknown buffer prepared")
        if ctx.capabilities.get("IsModelCacheSupported"):
            expect_code(reply.returnCode, e.NNRT_INVALID_BUFFER,
                        "PrepareModelFromModelCache of an unknown buffer", reply.reason)
    with ctx.check(SECTION, "PrepareModelFromModelCache refuses an empty list"):
        reply = c.prepare_model_from_model_cache([])
        release(c, reply.preparedModelId)
        want = e.NNRT_INVALID_MODEL_CACHE if ctx.capabilities.get("IsModelCacheSupported") \
            else e.NNRT_NOT_SUPPORT
        expect_code(reply.returnCode, want, "PrepareModelFromModelCache([])", reply.reason)


def _offline_models(ctx: Context) -> None:
    c = ctx.client
    with ctx.check(SECTION, "PrepareOfflineModel refuses bytes that are no offline model") as out:
        code, memory = c.allocate_buffer(256)
        expect_code(code, e.NNRT_SUCCESS, "AllocateBuffer(256)")
        try:
            memory.view()[:] = bytes(range(256))
            reply = c.prepare_offline_model([memory.descriptor()])
        finally:
            memory.close()
            c.release_buffer(memory.descriptor())
        release(c, reply.preparedModelId)
        # hdi.md 3.13: undecodable → NNRT_INVALID_MODEL; no offline models → NNRT_NOT_SUPPORT
        expect(reply.returnCode in (e.NNRT_INVALID_MODEL, e.NNRT_NOT_SUPPORT),
               f"PrepareOfflineModel of 256 bytes of garbage: answered "
               f"{code_text(reply.returnCode, reply.reason)}, expected NNRT_INVALID_MODEL "
               f"(or NNRT_NOT_SUPPORT without offline models)")
        out.detail = code_text(reply.returnCode)


def run(ctx: Context) -> None:
    _device_methods(ctx)
    _offline_models(ctx)
    _malformed_models(ctx)
    _runs(ctx)
    _buffers(ctx)
    _caches(ctx)
