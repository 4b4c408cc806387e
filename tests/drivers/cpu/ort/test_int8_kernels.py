"""onnxruntime's int8 kernels: the form chosen per CPU (drivers/cpu/ort/int8_kernels.py) and
the whole-model differential suite (tests/drivers/cpu/ort/int8_models.py) on every path —
each form forced here, the default on an emulated CPU without VNNI (qemu-user), and through a driver
process started with each `--int8-kernels`."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from nnrt.drivers.cpu.ort import int8_kernels
from nnrt.drivers.cpu.ort.int8_kernels import Int8Form, Int8Kernels
from tests.drivers.accel.int8_models import int8_cnn, int8_mlp
from tests.conftest import admin_details, start_driver
from tests.helpers.hdi_models import run_int8
from tests.drivers.cpu.ort import int8_models

ROOT = Path(__file__).resolve().parents[4]
X86_64 = platform.machine().lower() in ("x86_64", "amd64")
QEMU = shutil.which("qemu-x86_64")


@pytest.fixture(params=["u8s8", "s8s8", "numpy"])
def form(request, monkeypatch) -> Int8Form:
    """The process's int8 form forced to each in turn (sessions made meanwhile use it)."""
    forced = Int8Form(request.param)
    monkeypatch.setattr(int8_kernels, "_in_force", Int8Kernels(forced, "test", forced=True))
    return forced


def exact_here(form: Int8Form) -> bool:
    """Whether `form` is exact on this CPU (s8s8 everywhere, u8s8 where it is detected)."""
    return form is not Int8Form.U8S8 or int8_kernels.detect().form is Int8Form.U8S8


# -- the choice ------------------------------------------------------------------------------


@pytest.mark.skipif(not X86_64, reason="CPUID is x86-64's")
def test_vnni_is_read_from_cpuid_as_numpy_reads_it():
    """numpy reads CPUID (and the OS's XCR0) independently: its AVX512VNNI agrees."""
    features = np._core._multiarray_umath.__cpu_features__ if hasattr(np, "_core") else \
        np.core._multiarray_umath.__cpu_features__
    found = int8_kernels.vnni()
    assert (found == "AVX512-VNNI") == bool(features.get("AVX512VNNI"))
    if found is None:
        assert int8_kernels.detect().form is Int8Form.S8S8
    else:
        assert int8_kernels.detect().form is Int8Form.U8S8
        assert found in int8_kernels.detect().reason


def test_off_x86_u8s8_is_kept_and_cpuid_is_not_read(monkeypatch):
    """ARM's int8 kernels (widening multiplies, SDOT/UDOT) are exact in either form."""
    monkeypatch.setattr(int8_kernels.platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(int8_kernels, "vnni", lambda: pytest.fail("CPUID read off x86"))
    chosen = int8_kernels.detect()
    assert chosen.form is Int8Form.U8S8 and chosen.reason.startswith("aarch64: ")


def test_where_cpuid_cannot_run_the_form_exact_everywhere_is_chosen(monkeypatch):
    """A W^X policy that refuses an executable page: no CPUID, so s8s8."""
    if not X86_64:
        pytest.skip("CPUID is x86-64's")

    def refused():
        raise OSError("CPUID cannot be run here (mmap: Operation not permitted)")

    monkeypatch.setattr(int8_kernels, "vnni", refused)
    chosen = int8_kernels.detect()
    assert chosen.form is Int8Form.S8S8 and "Operation not permitted" in chosen.reason


def test_the_choice_follows_the_option_then_the_environment(monkeypatch):
    detected = int8_kernels.detect()
    monkeypatch.delenv(int8_kernels.ENV, raising=False)
    assert int8_kernels.choose(None) == detected and not detected.forced
    assert int8_kernels.choose("auto") == detected
    monkeypatch.setenv(int8_kernels.ENV, "s8s8")
    chosen = int8_kernels.choose(None)
    assert chosen.form is Int8Form.S8S8 and chosen.forced
    assert int8_kernels.choose("u8s8").form is Int8Form.U8S8  # the option before the env
    monkeypatch.setenv(int8_kernels.ENV, "u16")
    with pytest.raises(ValueError, match="'u16' is not one of auto, u8s8, s8s8, numpy"):
        int8_kernels.choose(None)


def test_the_form_is_fixed_by_the_first_configuration(monkeypatch, caplog):
    monkeypatch.setattr(int8_kernels, "_in_force", None)
    first = int8_kernels.configure("s8s8")
    assert first.form is Int8Form.S8S8 and "int8 kernels: s8s8 (forced" in caplog.text
    assert int8_kernels.configure("u8s8") is first
    assert "already s8s8; u8s8 ignored" in caplog.text
    assert int8_kernels.in_force() is first


# -- the differential suite, in process --------------------------------------------------------


def test_the_numpy_kernels_equal_the_integer_reference_of_the_deep_cnn():
    model, layers = int8_models.deep_cnn()
    want = int8_models.exact_deep_cnn(layers, model.inputs[0])
    got, = int8_models.numpy_outputs(model)
    assert int8_models.steps_apart([got], [want]) == 0
    assert len(np.unique(want)) > 100  # spread over the range, not clipped to a few values


@pytest.mark.parametrize("name", list(int8_models.MODELS))
def test_each_form_on_each_int8_model(form, name):
    """Each form is run on every machine: where it is exact, within one step of the numpy
    kernels per output; u8s8 where it is not (x86-64 without VNNI) shows the saturation
    the detection exists for (the deep models, not necessarily every one)."""
    model = int8_models.MODELS[name]()
    want = int8_models.numpy_outputs(model)
    got, partition = int8_models.ort_outputs(model)
    if form is Int8Form.NUMPY:  # the quantised nodes on the numpy kernels
        assert "no exact int8 kernels of onnxruntime" in partition, partition
    else:
        assert "0 on numpy" in partition, partition  # onnxruntime computed all of it
    steps = int8_models.steps_apart(got, want)
    if exact_here(form):
        assert steps <= 1, f"{name} on {form.value}: {steps} steps off ({partition})"
    elif name == "deep_cnn8":
        assert steps > 1, f"u8s8 without VNNI was expected to saturate on {name}"


def test_both_forms_fuse_the_convolutions_into_int8_kernels(form):
    if form is Int8Form.NUMPY:
        pytest.skip("the numpy form lowers no quantised node")
    """The quantised convolutions run on onnxruntime's int8 kernels (an int8 model that fell
    back to float would be exact but slow): all of them in s8s8; in u8s8 all but one that
    reads an int8 model input (onnxruntime's x86 QDQ rules fuse int8 activations only when
    they are allowed, and our uint8 rewrite covers only the int8 we quantise ourselves)."""
    from nnrt.drivers.cpu.ort import engine
    from nnrt.hdi.reference.plan import ExecutionPlan

    model = int8_models.deep_cnn(depth=2)[0]
    holder = {}
    ExecutionPlan(model.graph, partitioner=lambda g, k: engine.units_with_tensors(
        holder.setdefault("part", engine.partition(g, k)), g))
    segment = holder["part"].single_segment
    ops = [n.op_type for n in onnx.load_from_string(segment.optimized_model).graph.node]
    if form is Int8Form.S8S8:
        assert ops.count("QLinearConv") == 2 and "Conv" not in ops, ops
    else:
        assert ops.count("QLinearConv") == 1 and ops.count("Conv") == 1, ops


def test_the_detected_form_and_s8s8_pass_their_check_here():
    """The start-up check (a full-range MatMulInteger against int64 arithmetic) on this CPU;
    on one where it fails: test_on_a_cpu_without_vnni_the_default_is_exact."""
    assert int8_kernels.inexact(int8_kernels.detect().form) is None
    assert int8_kernels.inexact(Int8Form.S8S8) is None
    assert int8_kernels.inexact(Int8Form.NUMPY) is None


def test_a_form_that_fails_its_check_gives_way(monkeypatch, caplog):
    """auto: the next form down; forced: kept, with a warning."""
    monkeypatch.delenv(int8_kernels.ENV, raising=False)
    monkeypatch.setattr(int8_kernels, "detect",
                        lambda: Int8Kernels(Int8Form.U8S8, "pretended VNNI"))
    monkeypatch.setattr(int8_kernels, "inexact",
                        lambda form: "3 sums wrong" if form is not Int8Form.NUMPY else None)
    chosen = int8_kernels.choose(None)
    assert chosen.form is Int8Form.NUMPY and not chosen.forced
    assert "u8s8 failed its check (3 sums wrong); s8s8 failed its check" in chosen.reason
    assert "s8s8 int8 kernels failed their check on this CPU: 3 sums wrong" in caplog.text
    assert int8_kernels.choose("s8s8").form is Int8Form.S8S8
    assert "s8s8 int8 kernels are inexact on this CPU (3 sums wrong), as forced" in caplog.text


# -- on a CPU without VNNI: emulated --------------------------------------------------------


def emulated_differential(form: str) -> dict:
    """tests/drivers/cpu/ort/int8_models.py run under qemu-user on a Haswell (AVX2, no VNNI)."""
    env = {**os.environ, int8_kernels.ENV: form}
    done = subprocess.run([QEMU, "-cpu", "Haswell", sys.executable, "-m",
                           "tests.drivers.cpu.ort.int8_models"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.multiprocess
@pytest.mark.skipif(not (X86_64 and QEMU), reason="needs qemu-x86_64 (Debian's qemu-user) on "
                                                  "x86-64: .ci/run installs it")
def test_on_a_cpu_without_vnni_the_default_is_exact():
    """The default picks s8s8 there, every model within one step; forcing u8s8 on the same
    emulated CPU shows that the emulation has the saturating kernels (the check is real)."""
    found = emulated_differential("auto")
    for name, result in found.items():
        assert result["int8_kernels"].startswith("s8s8 (x86-64 without VNNI"), result
        assert result["steps"] <= 1, (name, result)
    saturated = emulated_differential("u8s8")
    assert max(r["steps"] for r in saturated.values()) > 1, saturated


@pytest.mark.multiprocess
@pytest.mark.skipif(not (X86_64 and QEMU), reason="needs qemu-x86_64 (Debian's qemu-user) on "
                                                  "x86-64: .ci/run installs it")
def test_a_misread_cpu_is_caught_by_the_check():
    """A CPU reported as having VNNI where it has not (a hypervisor's CPUID, say): the
    check finds U8S8's sums wrong on the real saturating kernels and s8s8 is chosen."""
    script = ("from nnrt.drivers.cpu.ort import int8_kernels as k\n"
              "k.detect = lambda: k.Int8Kernels(k.Int8Form.U8S8, 'pretended VNNI')\n"
              "print(k.choose(None).describe())\n")
    done = subprocess.run([QEMU, "-cpu", "Haswell", sys.executable, "-c", script], cwd=ROOT,
                          env={k: v for k, v in os.environ.items() if k != int8_kernels.ENV},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("s8s8 (detected u8s8 (pretended VNNI), but u8s8 failed its "
                                  "check ("), done.stdout
    assert "u8s8 int8 kernels failed their check on this CPU" in done.stderr


# -- through a driver process ---------------------------------------------------------------


@pytest.fixture(scope="module")
def numpy_driver(tmp_path_factory):
    running = start_driver(tmp_path_factory.mktemp("int8") / "np", "cpu", "--engine", "numpy")
    yield running
    running.stop()


@pytest.mark.multiprocess
@pytest.mark.parametrize("forced", ["u8s8", "s8s8", "numpy"])
def test_a_driver_started_with_each_form(tmp_path, forced, numpy_driver):
    driver = start_driver(tmp_path / "rt", "cpu", "--engine", "ort", "--int8-kernels", forced)
    try:
        details = admin_details(driver)
        assert details["int8_kernels"].startswith(f"{forced} (forced")
        assert f"onnxruntime int8 kernels: {forced} (forced" in driver.log()
        for make in (int8_cnn, int8_mlp):
            builder, x, shape = make()
            with driver.client() as ort_session, numpy_driver.client() as numpy_session:
                got = run_int8(ort_session, builder, x, shape)
                want = run_int8(numpy_session, builder, x, shape)
            steps = int8_models.steps_apart(got, want)
            if exact_here(Int8Form(forced)):
                assert steps <= 1, (forced, builder.name, steps)
    finally:
        driver.stop()


@pytest.mark.multiprocess
def test_the_option_belongs_to_the_cpu_driver(tmp_path):
    done = subprocess.run([sys.executable, "-m", "nnrt.server", "accel", "--int8-kernels", "s8s8",
                           "--runtime-dir", str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "options of the cpu driver" in done.stderr
    done = subprocess.run([sys.executable, "-m", "nnrt.server", "cpu", "--int8-kernels", "u16",
                           "--runtime-dir", str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "invalid choice: 'u16'" in done.stderr


@pytest.mark.multiprocess
def test_a_bad_environment_value_stops_the_driver_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setenv(int8_kernels.ENV, "u16")
    done = subprocess.run([sys.executable, "-m", "nnrt.server", "cpu",
                           "--runtime-dir", str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert "$NNRT_ORT_INT8_KERNELS='u16' is not one of auto, u8s8, s8s8, numpy" in done.stderr
