"""The partitioner (client/core/partition.py), pure: preference order, all on one device,
the cycle a naive split makes, nothing supported, constants and boundaries, sub-models, the
float16 query."""

from __future__ import annotations

import numpy as np
import pytest

from nnrt.client.core.partition import (PartitionError, Support, partition, relaxed_query,
                                        sub_model)
from nnrt.common.hdi_model import IODesc, HdiModelBuilder, LoweredModel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na


def chain(n: int) -> tuple[HdiModelBuilder, list[int]]:
    """x → add(c0) → add(c1) → … n nodes, each with its own constant; the tensor indices."""
    b = HdiModelBuilder("chain")
    t = b.input("x", np.float32, [-1, 4])
    tensors = [t]
    for k in range(n):
        c = b.constant(f"c{k}", np.full(4, k, np.float32))
        out = b.tensor(f"y{k}", np.float32, [-1, 4])
        b.node(na.NODE_TYPE_ADD_FUSION, [t, c], [out])
        t = out
        tensors.append(out)
    b.mark_outputs(t)
    return b, tensors


def lowered(b: HdiModelBuilder) -> LoweredModel:
    return LoweredModel(b, [IODesc(b.tensors[t].name, 11, list(b.tensors[t].dims), 0)
                            for t in b.inputs],
                        [IODesc(b.tensors[t].name, 11, list(b.tensors[t].dims), 0)
                         for t in b.outputs])


def support(name: str, ops: list[bool], reason: str = "no kernel") -> Support:
    return Support(name, ops, ["" if ok else reason for ok in ops])


def test_each_node_goes_to_the_first_device_that_supports_it():
    b, _ = chain(4)
    plan = partition(b, [support("gpu", [True, False, True, True]),
                         support("cpu", [True, True, True, True])])
    assert plan.device_of == [0, 1, 0, 0]
    assert [(s.device, s.nodes) for s in plan.steps] == [(0, [0]), (1, [1]), (0, [2, 3])]


def test_a_model_one_device_runs_whole_is_one_step():
    b, tensors = chain(5)
    plan = partition(b, [support("gpu", [True] * 5), support("cpu", [True] * 5)])
    assert len(plan.steps) == 1 and plan.steps[0].device == 0
    assert plan.steps[0].nodes == list(range(5)) and plan.boundaries == []
    assert plan.steps[0].inputs == [tensors[0]] and plan.steps[0].outputs == [tensors[5]]
    # the first device refuses everything: all on the second
    plan = partition(b, [support("gpu", [False] * 5), support("cpu", [True] * 5)])
    assert [s.device for s in plan.steps] == [1] and plan.devices == [1]


def diamond() -> HdiModelBuilder:
    """x → A (gpu) → a; a → B (cpu) → b; a, b → C (gpu) → out; x → D (gpu) → d, an output.
    Grouping all GPU nodes into one partition makes a cycle GPU → CPU → GPU."""
    b = HdiModelBuilder("diamond")
    x = b.input("x", np.float32, [4])
    a, bb, out, d = (b.tensor(n, np.float32, [4]) for n in ("a", "b", "out", "d"))
    b.node(na.NODE_TYPE_ABS, [x], [a])  # 0: A
    b.node(na.NODE_TYPE_SQRT, [a], [bb])  # 1: B
    b.node(na.NODE_TYPE_ADD_FUSION, [a, bb], [out])  # 2: C
    b.node(na.NODE_TYPE_NEG, [x], [d])  # 3: D
    b.mark_outputs(out, d)
    return b


def test_the_plan_stays_acyclic():
    b = diamond()
    plan = partition(b, [support("gpu", [True, False, True, True]),
                         support("cpu", [True, True, True, True])])
    assert [(s.device, s.nodes) for s in plan.steps] == [(0, [0, 3]), (1, [1]), (0, [2])]
    # each step reads only model inputs and what earlier steps wrote
    written = set(b.inputs)
    for step in plan.steps:
        assert set(step.inputs) <= written
        written |= set(step.outputs)
    a, bb, out, d = 1, 2, 3, 4
    assert plan.steps[0].outputs == [a, d]  # a (read later) and d (a model output)
    assert plan.steps[1].inputs == [a] and plan.steps[1].outputs == [bb]
    assert plan.steps[2].inputs == [a, bb] and plan.steps[2].outputs == [out]
    assert sorted(plan.boundaries) == [a, bb]


def test_no_device_supports_a_node():
    b, _ = chain(3)
    with pytest.raises(PartitionError) as info:
        partition(b, [support("gpu", [True, False, True], "no Add kernel for int64"),
                      Support("npu", [True] * 3, refused="no float16 mode"),
                      support("cpu", [True, False, True], "refused by the engine")])
    message = str(info.value)
    assert "node 1 (add_fusion:1, ADD_FUSION)" in message
    assert "gpu: no Add kernel for int64" in message
    assert "npu: no float16 mode" in message and "cpu: refused by the engine" in message


def test_constants_go_only_to_the_partition_using_them():
    b, tensors = chain(4)
    plan = partition(b, [support("gpu", [True, True, False, False]), support("cpu", [True] * 4)])
    constant_of = {k: t for k, t in enumerate(sorted(b.constants))}
    assert plan.steps[0].constants == [constant_of[0], constant_of[1]]
    assert plan.steps[1].constants == [constant_of[2], constant_of[3]]
    assert plan.boundaries == [tensors[2]]


def test_a_sub_model_is_the_partition_with_its_boundary_tensors():
    b, tensors = chain(4)
    model = lowered(b)
    plan = partition(b, [support("gpu", [True, True, False, False]), support("cpu", [True] * 4)])
    first, second = sub_model(model, plan, 0), sub_model(model, plan, 1)
    assert len(first.hdi.nodes) == 2 and len(second.hdi.nodes) == 2
    assert len(first.hdi.constants) == 2 and len(second.hdi.constants) == 2
    np.testing.assert_array_equal(sorted(second.hdi.constants.values(),
                                         key=lambda a: a[0])[0], np.full(4, 2, np.float32))
    # the boundary keeps the model's type and its dynamic dimension on both sides
    assert first.outputs[0].name == "y1" and first.outputs[0].shape == [-1, 4]
    assert second.inputs[0].name == "y1" and second.inputs[0].data_type == 11
    assert first.inputs[0].name == "x" and second.outputs[0].name == "y3"
    # indices renumbered consistently: every node reads tensors the sub-model has
    for sub in (first, second):
        count = len(sub.hdi.tensors)
        for node in sub.hdi.nodes:
            assert all(t < count for t in [*node.inputIndex, *node.outputIndex])
        assert all(not sub.hdi.tensors[t].HasField("data") for t in range(count))
    model_message = second.hdi.model()
    assert list(model_message.inputIndex) == second.hdi.inputs


def test_the_float16_query_halves_float32_tensors_and_the_types_naming_them():
    b = HdiModelBuilder("qdq")
    x = b.input("x", np.float32, [4])
    q = b.tensor("q", np.int8, [4], quant=[(8, 0, 0.1)])
    y = b.tensor("y", np.float32, [4])
    w = b.constant("w", np.ones(4, np.float32))
    z = b.tensor("z", np.float32, [4])
    b.node(na.NODE_TYPE_QUANT_DTYPE_CAST, [x], [q],
           na.QuantDTypeCast(srcT=ht.DATA_TYPE_FLOAT32, dstT=ht.DATA_TYPE_INT8))
    b.node(na.NODE_TYPE_QUANT_DTYPE_CAST, [q], [y],
           na.QuantDTypeCast(srcT=ht.DATA_TYPE_INT8, dstT=ht.DATA_TYPE_FLOAT32))
    b.node(na.NODE_TYPE_ADD_FUSION, [y, w], [z])
    b.mark_outputs(z)
    half = relaxed_query(b)
    assert [t.dataType for t in half.tensors] == [ht.DATA_TYPE_FLOAT16, ht.DATA_TYPE_INT8,
                                                  ht.DATA_TYPE_FLOAT16, ht.DATA_TYPE_FLOAT16,
                                                  ht.DATA_TYPE_FLOAT16]
    assert half.constants[w].dtype == np.float16
    assert half.nodes[0].quant_dtype_cast.srcT == ht.DATA_TYPE_FLOAT16
    assert half.nodes[0].quant_dtype_cast.dstT == ht.DATA_TYPE_INT8
    assert half.nodes[1].quant_dtype_cast.dstT == ht.DATA_TYPE_FLOAT16
    # the original is untouched
    assert b.tensors[x].dataType == ht.DATA_TYPE_FLOAT32 and b.constants[w].dtype == np.float32
    assert b.nodes[0].quant_dtype_cast.srcT == ht.DATA_TYPE_FLOAT32
