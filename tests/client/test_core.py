"""The typed client core (client/core/) used directly: devices found by one set of rules,
a model compiled by the core's compiler and run by its execution with Bindings, output
shapes from the driver, and each failure as the exception of its code."""

from __future__ import annotations

import pickle
import signal
from pathlib import Path

import numpy as np
import pytest

from nnrt.client.capi import OH_NN_DeviceType
from nnrt.client.core import errors, execution
from nnrt.client.core.compiler import compile_model
from nnrt.client.core.device import Device, DeviceRegistry, find_device
from nnrt.client.core.execution import Binding, OutputsTooSmall, describe_binding
from nnrt.client.core.prepared_model import DimRanges, PreparedModel
from nnrt.common.hdi_model import HdiModelBuilder, IODesc, LoweredModel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na

# -- devices: one set of rules ---------------------------------------------------------------


def _devices() -> list[Device]:
    where = Path("/nonexistent")
    return [Device("cpu", where, "nnrt-cpu", "nnrt", (2, 1), ht.CPU),
            Device("flaky", where, "nnrt-cpu", "nnrt", (2, 1), ht.CPU),
            Device("gpu", where, "nnrt-gpu", "nnrt", (2, 1), ht.GPU),
            Device("npu", where, "nnrt-npu-sim", "nnrt", (2, 1), ht.ACCELERATOR)]


@pytest.mark.parametrize("wanted, driver", [
    (None, "cpu"),                       # the first
    ("nnrt-gpu_nnrt_v2_1", "gpu"),      # full name, any case below
    ("NNRT-GPU_nnrt_v2_1", "gpu"),
    ("nnrt-npu-sim", "npu"),            # device-name part
    ("npu-sim", "npu"),                 # ... without its nnrt- prefix
    ("flaky", "flaky"),                 # driver (socket) name
    ("accelerator", "npu"),             # type name
    ("OH_NN_GPU", "gpu"),
    (OH_NN_DeviceType.OH_NN_ACCELERATOR, "npu"),  # a device type enum (HDI values)
])
def test_devices_are_found_by_one_set_of_rules(wanted, driver):
    assert find_device(_devices(), wanted).driver == driver


def test_a_device_by_id_as_int_string_or_object():
    devices = _devices()
    flaky = devices[1]
    assert flaky.id != devices[0].id  # two drivers of one kind: two IDs
    assert find_device(devices, flaky.id) is flaky
    assert find_device(devices, str(flaky.id)) is flaky
    assert find_device(devices, flaky) is flaky

    class Info:  # anything with an id (the Pythonic API's DeviceInfo)
        id = flaky.id

    assert find_device(devices, Info()) is flaky


def test_no_such_device_names_the_devices_there_are():
    with pytest.raises(errors.DeviceNotFound) as err:
        find_device(_devices(), "tpu")
    assert isinstance(err.value, errors.Failed) and isinstance(err.value, LookupError)
    assert err.value.code == errors.OH_NN_FAILED
    assert "no device 'tpu'" in str(err.value) and "nnrt-gpu_nnrt_v2_1 (ID" in str(err.value)
    with pytest.raises(errors.DeviceNotFound, match="no driver answers"):
        find_device([], None)
    with pytest.raises(TypeError):
        find_device(_devices(), 1.5)


# -- errors ----------------------------------------------------------------------------------


def test_every_code_has_its_exception_class():
    for code in errors.OH_NN_ReturnCode:
        if code == errors.OH_NN_SUCCESS:
            continue
        error = errors.NNRtError(code, "what")
        assert type(error) is errors.error_class(code) and error.code == code
        assert str(error) == f"what ({code.name})"
    assert errors.error_class(7) is errors.DeviceUnavailable  # the deprecated spelling
    assert type(errors.NNRtError(99, "x")) is errors.NNRtError and errors.NNRtError(99).code == 99
    timeout = errors.RunTimeout("late")  # a subclass takes its message alone
    assert timeout.code == errors.OH_NN_TIMEOUT and isinstance(timeout, TimeoutError)


def test_the_drivers_reason_is_part_of_the_message_and_survives_pickling():
    error = errors.NNRtError(errors.OH_NN_UNAVAILABLE_DEVICE, "the driver's Run failed",
                             reason="input 0: no buffer 7")
    assert str(error) == "the driver's Run failed: input 0: no buffer 7 (OH_NN_UNAVAILABLE_DEVICE)"
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is errors.DeviceUnavailable and copy.reason == error.reason
    assert str(copy) == str(error)


def test_dim_ranges_say_what_is_outside_them():
    ranges = DimRanges(DimRanges.OK, [[1, 4]], [[64, 4]])
    assert ranges.violation(0, [8, 4]) is None
    assert ranges.violation(0, [65, 4]) == "dimension 0 is 65, outside the device's range [1, 64]"
    assert ranges.violation(0, [8]) == "rank 1, the device takes rank 2"
    assert ranges.violation(0, [-1, 4]).startswith("dimension 0 is -1")
    assert ranges.first_violation([(8, 4)]) is None
    assert ranges.first_violation([(65, 4)]) == (0, ranges.violation(0, [65, 4]))
    assert ranges.first_violation([(65, 4), (1,)]) is None  # not the device's inputs
    assert DimRanges(DimRanges.UNSUPPORTED).first_violation([(65, 4)]) is None


# -- compiling and running -------------------------------------------------------------------


def _dynamic_add() -> LoweredModel:
    """y = x + 1 over a dynamic number of elements."""
    b = HdiModelBuilder("dynamic_add")
    x = b.input("x", np.float32, [-1])
    y = b.tensor("y", np.float32, [-1])
    b.node(na.NODE_TYPE_ADD_FUSION, [x, b.constant("one", np.ones(1, np.float32))], [y])
    b.mark_outputs(y)
    return LoweredModel(b, [IODesc("x", 11, [-1], 0)], [IODesc("y", 11, [-1], 0)])


def _compiled(runtime_dir: Path, lowered: LoweredModel) -> tuple[DeviceRegistry, PreparedModel]:
    registry = DeviceRegistry(runtime_dir)
    device = find_device(registry.devices(), "cpu")
    client = device.client()
    built = compile_model(device, client, ht.ModelConfig(), lowered)
    return registry, PreparedModel(built, client)


def _binding(client, values: np.ndarray | None, nbytes: int, dims: list[int]) -> Binding:
    _, memory = client.allocate_buffer(nbytes)
    if values is not None:
        memory.array(np.float32, values.shape)[:] = values
    return Binding(memory, "", ht.DATA_TYPE_FLOAT32, dims, ht.FORMAT_NONE,
                   None if values is None else values.nbytes)


def test_outputs_too_small_carry_the_drivers_shapes_and_a_resized_run_succeeds(shared_driver):
    registry, model = _compiled(shared_driver.runtime_dir, _dynamic_add())
    try:
        client = model.session()[0]
        x = np.arange(6, dtype=np.float32)
        inputs = [_binding(client, x, x.nbytes, [6])]
        small = [_binding(client, None, 4, [-1])]  # room for one element
        with pytest.raises(OutputsTooSmall) as err:
            execution.run(model, inputs, small, 5.0, describe_binding)
        assert err.value.shapes == [[6]] and err.value.code == errors.OH_NN_UNAVAILABLE_DEVICE
        assert "NNRT_INSUFFICIENT_BUFFER" in str(err.value)
        assert not small[0].memory.array(np.float32, [1]).any()  # nothing written
        outputs = [_binding(client, None, 6 * 4, [-1])]
        assert execution.run(model, inputs, outputs, 5.0, describe_binding) == [[6]]
        np.testing.assert_array_equal(outputs[0].memory.array(np.float32, [6]), x + 1)
        assert outputs[0].shape == [6] and model.output_shapes == [[6]]
    finally:
        model.close()
        registry.close()


def test_a_refused_model_names_the_node_and_the_drivers_reason(shared_driver):
    b = HdiModelBuilder("mixed")
    x = b.input("x", np.float32, [4])
    y = b.tensor("y", np.float32, [4])
    b.node(na.NODE_TYPE_ADD_FUSION, [x, b.constant("w", np.ones(4, np.int32))], [y])
    b.mark_outputs(y)
    lowered = LoweredModel(b, [IODesc("x", 11, [4], 0)], [IODesc("y", 11, [4], 0)])
    registry = DeviceRegistry(shared_driver.runtime_dir)
    try:
        device = find_device(registry.devices(), None)
        with pytest.raises(errors.Failed) as err:
            compile_model(device, device.client(), ht.ModelConfig(), lowered)
        assert "node 0 (add_fusion:0): inputs of mixed dtypes ['float32', 'int32']" in \
            str(err.value)
    finally:
        registry.close()


def test_a_closed_model_refuses_runs(shared_driver):
    registry, model = _compiled(shared_driver.runtime_dir, _dynamic_add())
    try:
        model.close()
        with pytest.raises(errors.InvalidParameter, match="the model is closed"):
            execution.run(model, [], [], 1.0, describe_binding)
    finally:
        registry.close()


def test_a_run_on_a_killed_driver_is_connection_lost(driver):
    registry, model = _compiled(driver.runtime_dir, _dynamic_add())
    try:
        client = model.session()[0]
        x = np.ones(2, np.float32)
        inputs, outputs = [_binding(client, x, 8, [2])], [_binding(client, None, 8, [-1])]
        assert execution.run(model, inputs, outputs, 5.0, describe_binding) == [[2]]
        driver.stop(signal.SIGKILL)
        assert client.wait_dead(5.0)
        with pytest.raises(errors.ConnectionLost) as err:  # no driver of the device serves
            execution.run(model, inputs, outputs, 5.0, describe_binding)
        assert isinstance(err.value, ConnectionError)
        assert err.value.code == errors.OH_NN_CONNECTION_EXCEPTION
        assert "nnrt-cpu_nnrt_v2_1" in str(err.value)
    finally:
        model.close()
        registry.close()


def test_an_execution_sizes_its_outputs_by_the_drivers_shapes(shared_driver):
    registry, model = _compiled(shared_driver.runtime_dir, _dynamic_add())
    try:
        x = np.arange(10, dtype=np.float32)
        run = execution.Execution(model, [x])
        assert run.output_sizes == [4]  # a dynamic output starts at one element
        shapes = run.run(5.0)
        assert shapes == [[10]] and run.output_sizes == [40]  # resized, run again
        np.testing.assert_array_equal(run.results(shapes)[0], x + 1)
        assert run.run(5.0) == [[10]]  # big enough now: one run
        run.close()
        assert run.memories == []
    finally:
        model.close()
        registry.close()


@pytest.mark.parametrize("value, expected_us", [("", 200), ("0", 0), ("40", 40),
                                                 ("10000", 10000), ("-1", 200),
                                                 ("10001", 200), ("fast", 200)])
def test_the_clients_polling_window_comes_from_the_environment(monkeypatch, caplog, value,
                                                               expected_us):
    from nnrt.client.core import waiting

    monkeypatch.setattr(waiting, "usable_cores", lambda: 2)
    monkeypatch.setenv(waiting.SPIN_ENV, value)
    assert waiting.spin_seconds() == pytest.approx(expected_us / 1e6)
    assert ("is not a number of µs" in caplog.text) == (value in ("-1", "10001", "fast"))
    monkeypatch.setattr(waiting, "usable_cores", lambda: 1)
    assert waiting.spin_seconds() == 0.0  # one CPU: polling would starve the driver
