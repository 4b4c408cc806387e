"""operation_table.py is generated from capi_ops.json and consistent with the HDI protos."""

from __future__ import annotations

import json

import pytest

from nnrt.client.capi import gen_operations
from nnrt.client.capi.enums import OH_NN_DataType, OH_NN_OperationType, OH_NN_TensorType
from nnrt.client.capi.operation_table import OPERATIONS
from nnrt.client.capi.operations import ATTR_MEMBERS, HOOKS
from nnrt.protos import node_attrs_pb2 as na
from nnrt.protos.generate import oneof_member

SPEC = gen_operations.DEFAULT_SPEC


def spec_ops() -> list[dict]:
    assert SPEC.is_file(), f"spec not found at {SPEC}"
    return json.loads(SPEC.read_text())


def test_committed_table_is_in_sync_with_the_spec():
    assert gen_operations.generate(SPEC) == gen_operations.TABLE.read_text()
    assert gen_operations.main(["--check", "--spec", str(SPEC)]) == 0


def test_check_detects_a_stale_table(tmp_path, monkeypatch):
    stale = tmp_path / "operation_table.py"
    stale.write_text(gen_operations.TABLE.read_text().replace("'Add'", "'Plus'"))
    monkeypatch.setattr(gen_operations, "TABLE", stale)
    assert gen_operations.main(["--check", "--spec", str(SPEC)]) == 1
    assert gen_operations.main(["--spec", str(SPEC)]) == 0  # rewrites it
    assert gen_operations.main(["--check", "--spec", str(SPEC)]) == 0


def test_missing_spec_is_a_usage_error(tmp_path):
    assert gen_operations.main(["--check", "--spec", str(tmp_path / "nope.json")]) == 2


def test_unknown_spec_rules_are_refused():
    ops = spec_ops()
    ops[0] = dict(ops[0], params=[dict(ops[0]["params"][0], shape="[3] (new rule)")])
    with pytest.raises(ValueError, match="unknown shape rule"):
        gen_operations.render(ops)
    with pytest.raises(ValueError, match="operand count"):
        gen_operations.render([dict(spec_ops()[0], input_count="two")])


def test_every_operation_type_is_there():
    assert sorted(OPERATIONS) == list(range(1, 109))
    assert {v: s.name for v, s in OPERATIONS.items()} == {m.value: m.name for m in OH_NN_OperationType}


def test_enums_agree_with_the_spec():
    for op in spec_ops():
        assert OH_NN_OperationType[op["name"]] == op["value"]
        for p in op["params"]:
            assert OH_NN_TensorType[p["tensor_type"]] == p["value"]
            assert p["dtype"] in OH_NN_DataType.__members__
    assert len(OH_NN_TensorType) == 163 and OH_NN_TensorType.OH_NN_REDUCE_L2_COEFF == 162


@pytest.mark.parametrize("value", sorted(OPERATIONS), ids=lambda v: OPERATIONS[v].name)
def test_operation_matches_the_hdi_protos(value):
    spec = OPERATIONS[value]
    node_type = na.NodeType.Name(spec.node_type)
    message = getattr(na, spec.attr_struct)
    member = ATTR_MEMBERS[spec.attr_struct]
    if spec.attr_struct == "QuantDTypeCastV2":  # hdi.md 5.3.1: V2 layout under node type 113
        assert node_type == "NODE_TYPE_QUANT_DTYPE_CAST" and member == "quant_dtype_cast_v2"
    else:
        assert member == oneof_member(node_type)
    fields = message.DESCRIPTOR.fields_by_name
    for p in spec.params.values():
        assert p.field in fields, p
        assert p.tensor_type == OH_NN_TensorType[p.name]
    for name in (*spec.fixed, *spec.derived):
        assert name in fields, name
    if spec.derived:
        assert value in HOOKS, f"{spec.name}: no lowering for {spec.derived}"
    assert len(spec.params) == spec.max_params
    assert spec.prefix
