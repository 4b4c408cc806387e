"""The driver's reason next to its return code (`reason` / `reasons`, nnrt's addition to the
HDI replies), over both transports, and how the client shows it."""

from __future__ import annotations

import numpy as np

from nnrt.client import Model, NNRtError
from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.common.errors import NNRT_SUCCESS
from tests.client.capi.util_executor import use_runtime
from tests.helpers.hdi_models import add_model, io


def _unbroadcastable() -> HdiModelBuilder:
    b = HdiModelBuilder("bad-add")
    x = b.input("x", np.float32, [2, 3])
    y = b.tensor("y", np.float32, [2, 3])
    b.node(na.NODE_TYPE_ADD_FUSION, [x, b.constant("w", np.ones(4, np.float32))], [y])
    b.mark_outputs(y)
    return b


def test_unsupported_nodes_come_with_their_reason(client):
    with _unbroadcastable().packed(client) as model:
        reply = client.get_supported_operation(model)
    assert reply.returnCode == NNRT_SUCCESS and list(reply.ops) == [False]
    assert "do not broadcast" in reply.reasons[0]
    with add_model().packed(client) as model:
        fine = client.get_supported_operation(model)
    assert list(fine.ops) == [True] and list(fine.reasons) == [""]


def test_a_refused_prepare_says_why(client):
    with _unbroadcastable().packed(client) as model:
        reply = client.prepare_model(model)
    assert reply.returnCode != NNRT_SUCCESS
    assert "do not broadcast" in reply.reason
    with add_model().packed(client) as model:
        good = client.prepare_model(model)
    assert good.returnCode == NNRT_SUCCESS and good.reason == ""


def test_a_refused_run_says_why_over_both_transports(client):
    model_id = add_model().prepare(client)
    _, x = client.allocate_buffer(16)
    _, y = client.allocate_buffer(16)
    wrong = ht.IOTensor(dataType=ht.DATA_TYPE_INT32, dimensions=[4], format=ht.FORMAT_NONE,
                        data=x.descriptor())
    for run in (client.run, client.run_grpc):
        reply = run(model_id, [wrong], [io(y, 4)])
        assert reply.returnCode != NNRT_SUCCESS and "dataType" in reply.reason, reply
        ok = run(model_id, [io(x, 4)], [io(y, 4)])
        assert ok.returnCode == NNRT_SUCCESS and ok.reason == ""
    x.close(), y.close()


def test_the_pythonic_api_raises_the_drivers_reason(shared_driver, monkeypatch):
    with use_runtime(monkeypatch, shared_driver.runtime_dir):
        m = Model()
        m.outputs(m.add(m.input([2, 3]), m.input([4])))
        try:
            m.compile("cpu")
        except NNRtError as exc:
            assert "shapes [[2, 3], [4]] do not broadcast" in str(exc)
        else:
            raise AssertionError("a model whose Add cannot broadcast compiled")
