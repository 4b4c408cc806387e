"""A run answered with the same kept reply as the last one (a model of static shapes: the
driver's bytes, decoded once by DriverClient.run) takes its output shapes from the model
(`PreparedModel.reply_shapes`) instead of reading and checking the reply again; a reply
that differs is read and checked as before, and every caller gets lists of its own."""

from __future__ import annotations

import numpy as np

from nnrt.client.core import execution
from nnrt.client.core.execution import describe_binding
from tests.client.test_core import _binding, _compiled, _dynamic_add


def test_the_same_reply_again_is_not_read_again_and_a_new_one_is(shared_driver, monkeypatch):
    registry, model = _compiled(shared_driver.runtime_dir, _dynamic_add())
    read: list[int] = []
    real = execution.output_shapes

    def counted(reply, count):
        read.append(count)
        return real(reply, count)

    monkeypatch.setattr(execution, "output_shapes", counted)
    try:
        client = model.session()[0]
        x = np.arange(6, dtype=np.float32)
        inputs = [_binding(client, x, x.nbytes, [6])]
        outputs = [_binding(client, None, x.nbytes, [-1])]
        first = execution.run(model, inputs, outputs, 5.0, describe_binding)
        assert first == [[6]] and read == [1]
        first[0].append(99)  # the caller's own list: nothing kept changes with it
        second = execution.run(model, inputs, outputs, 5.0, describe_binding)
        assert second == [[6]] and read == [1]  # the same reply: not read again
        assert model.output_shapes == [[6]] and outputs[0].shape == [6]
        np.testing.assert_array_equal(outputs[0].memory.array(np.float32, [6]), x + 1)
        shorter = [_binding(client, x[:3], 12, [3])]  # another answer: read and checked
        assert execution.run(model, shorter, outputs, 5.0, describe_binding) == [[3]]
        assert read == [1, 1] and model.output_shapes == [[3]] and outputs[0].shape == [3]
    finally:
        model.close()
        registry.close()
