"""The HDI in protobuf: generated code in sync, enums and structs faithful to hdi.md."""

from __future__ import annotations

import json

import pytest

from nnrt.protos import generate
from nnrt.protos import hdi_pb2, hdi_types_pb2 as ht, model_types_pb2 as mt, node_attrs_pb2 as na

SPEC = generate.DEFAULT_SPEC


def _ops() -> list[dict]:
    return json.loads(SPEC.read_text())


def test_generated_files_are_in_sync_with_protos_and_spec():
    assert SPEC.is_file(), f"spec not found at {SPEC}"
    assert generate.check(SPEC) == []


def test_check_detects_a_stale_generated_file(tmp_path, monkeypatch):
    # Copy the package's proto dir, damage one generated module, and check against the copy.
    import shutil

    copy = tmp_path / "protos"
    shutil.copytree(generate.PROTO_DIR, copy)
    (copy / "node_attrs_pb2.py").write_text("# stale\n")
    monkeypatch.setattr(generate, "PROTO_DIR", copy)
    assert "node_attrs_pb2.py" in generate.check(SPEC)


@pytest.mark.parametrize("enum, values", [
    (ht.Format, {"FORMAT_NONE": -1, "FORMAT_NCHW": 0, "FORMAT_NHWC": 1}),
    (ht.ResizeMethod, {"RESIZE_METHOD_UNKNOWN": -1, "RESIZE_METHOD_LINEAR": 0,
                       "RESIZE_METHOD_NEAREST": 1, "RESIZE_METHOD_CUBIC": 2}),
    (ht.DataType, {"DATA_TYPE_UNKNOWN": 0, "DATA_TYPE_BOOL": 30, "DATA_TYPE_INT8": 32,
                   "DATA_TYPE_INT16": 33, "DATA_TYPE_INT32": 34, "DATA_TYPE_INT64": 35,
                   "DATA_TYPE_UINT8": 37, "DATA_TYPE_UINT16": 38, "DATA_TYPE_UINT32": 39,
                   "DATA_TYPE_UINT64": 40, "DATA_TYPE_FLOAT16": 42, "DATA_TYPE_FLOAT32": 43,
                   "DATA_TYPE_FLOAT64": 44}),
    (ht.DeviceType, {"OTHER": 0, "CPU": 1, "GPU": 2, "ACCELERATOR": 3}),
    (ht.DeviceStatus, {"AVAILABLE": 0, "BUSY": 1, "OFFLINE": 2, "UNKNOWN": 3}),
    (ht.ReduceMode, {"REDUCE_MODE_ALL": 7, "REDUCE_MODE_L2": 8}),
    (ht.ActivationType, {"ACTIVATION_TYPE_GELU": 19, "ACTIVATION_TYPE_UNKNOWN": 20}),
    (ht.QuantType, {"QUANT_TYPE_NONE": 0, "QUANT_TYPE_ALL": 1}),
])
def test_enum_values_are_the_hdi_ones(enum, values):
    assert {name: enum.Value(name) for name in values} == values
    assert len(enum.keys()) >= len(values)


def test_return_codes_are_0_to_33_by_hdi_name():
    names = ht.NNRT_ReturnCode.keys()
    assert len(names) == 34
    assert ht.NNRT_ReturnCode.Value("NNRT_OUT_OF_DIMENTION_RANGES") == 26
    assert ht.NNRT_ReturnCode.Value("NNRT_UNSUPPORTED_OP") == 33
    assert sorted(ht.NNRT_ReturnCode.values()) == list(range(34))


def test_every_operator_of_hdi_ops_json_has_a_nodetype_message_and_oneof_member():
    ops = _ops()
    assert len(ops) == 96
    node_fields = na.Node.DESCRIPTOR.fields_by_name
    for op in ops:
        assert na.NodeType.Value(op["node_type"]) == op["value"]
        message = getattr(na, op["name"])
        assert [f.name for f in message.DESCRIPTOR.fields] == [a["name"] for a in op["attrs"]]
        member = node_fields[generate.oneof_member(op["node_type"])]
        assert member.message_type is message.DESCRIPTOR
        assert member.containing_oneof.name == "nodeAttr"
        assert member.number == generate.ATTR_FIELD_BASE + op["value"]
    assert len(na.NodeType.keys()) == 97  # NODE_TYPE_NONE + 96


def test_attribute_types_follow_the_idl():
    fields = na.Conv2DFusion.DESCRIPTOR.fields_by_name
    assert fields["kernelSize"].is_repeated and not fields["group"].is_repeated
    assert fields["activationType"].enum_type is ht.ActivationType.DESCRIPTOR
    assert fields["group"].cpp_type == fields["group"].CPPTYPE_INT64
    crops = na.BatchToSpaceND.DESCRIPTOR.fields_by_name["crops"]
    assert crops.message_type is ht.Int64Array.DESCRIPTOR
    assert na.LRN.DESCRIPTOR.fields_by_name["normRegion"].type == crops.TYPE_STRING


def test_structs_carry_the_hdi_fields_in_order():
    expect = {
        ht.SharedBuffer: ["bufferId", "bufferSize", "offset", "dataSize"],
        ht.Tensor: ["name", "dataType", "dims", "format", "data", "quantParams"],
        na.Node: ["name", "nodeType", "inputIndex", "outputIndex", "quantType"],
        mt.SubGraph: ["name", "inputIndices", "outputIndices", "nodeIndices"],
        mt.Model: ["name", "inputIndex", "outputIndex", "nodes", "allTensors", "subGraph"],
        ht.ModelConfig: ["enableFloat16", "mode", "priority", "extensions"],
        ht.QuantParam: ["numBits", "zeroPoint", "scale"],
        ht.IOTensor: ["name", "dataType", "dimensions", "format", "data"],
    }
    for message, names in expect.items():
        plain = [f.name for f in message.DESCRIPTOR.fields if f.containing_oneof is None]
        assert plain == names


def test_undefined_enum_values_round_trip_for_validation():
    tensor = ht.Tensor(dataType=41, format=7)
    again = ht.Tensor.FromString(tensor.SerializeToString())
    assert (again.dataType, again.format) == (41, 7)


def test_services_carry_every_hdi_method():
    services = hdi_pb2.DESCRIPTOR.services_by_name
    device = [m.name for m in services["INnrtDevice"].methods]
    assert device == [
        "GetVersion", "GetDeviceName", "GetVendorName", "GetDeviceType", "GetDeviceStatus",
        "GetSupportedOperation", "IsFloat16PrecisionSupported", "IsPerformanceModeSupported",
        "IsPrioritySupported", "IsDynamicInputSupported", "PrepareModel",
        "IsModelCacheSupported", "PrepareModelFromModelCache", "PrepareOfflineModel",
        "AllocateBuffer", "ReleaseBuffer",
    ]
    prepared = [m.name for m in services["IPreparedModel"].methods]
    assert prepared == ["GetVersion", "ExportModelCache", "GetInputDimRanges", "Run",
                        "ReleasePreparedModel"]
    for service in services.values():
        for method in service.methods:
            assert method.output_type.fields_by_name["returnCode"].number == 1
