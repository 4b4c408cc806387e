"""`nnrt conformance`: our CPU driver passes (--quick on onnxruntime, once in full on the numpy
engine), the report parses as JSON and JUnit, a deliberately broken driver
(tests/helpers/broken_driver.py, registered through $NNRT_DRIVER_PLUGINS) fails with its
three faults named, bad usage is 2, and nothing the run started outlives it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from nnrt.client.conformance import cases, models
from nnrt.client.conformance.limits import device_memory
from nnrt.client.conformance.operators import node_types
from nnrt.client.conformance.report import FAIL, PASS, SKIP, Check, Report
from nnrt.protos import node_attrs_pb2 as na
from tests.helpers.broken_driver import PLUGIN

ROOT = Path(__file__).resolve().parents[3]
QUICK_TIMEOUT = 120  # s: a quick run takes ~7 s on a 2-core VM
FULL_TIMEOUT = 180  # s: the full numpy-engine run ~20 s


@pytest.fixture
def tmp_path() -> Path:
    """A short temporary directory: the command's $TMPDIR, where its private runtime
    directory goes (a deep pytest tmp_path would send it to /tmp, out of the test's sight,
    for socket paths must stay under 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="nct-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def conformance(*args: str | Path, tmp_path: Path, timeout: float = QUICK_TIMEOUT,
                **env: str) -> subprocess.CompletedProcess:
    """The command as a process; its private runtime directory goes under tmp_path (TMPDIR)."""
    environment = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-m", "nnrt.client.cli", "conformance",
                           *map(str, args)], env=environment, cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def _processes_naming(path: Path) -> list[int]:
    """Processes whose command line names `path` (a driver started with --runtime-dir there)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if str(path).encode() in cmdline:
            found.append(int(entry.name))
    return found


def _assert_nothing_left(tmp_path: Path) -> None:
    assert not list(tmp_path.glob("nnrt-conformance-*")), "a private runtime dir outlived the run"
    assert _processes_naming(tmp_path) == [], "a driver process outlived the run"


# -- the command ---------------------------------------------------------------------------


@pytest.mark.multiprocess
def test_cpu_quick_passes_and_json_and_junit_parse(tmp_path):
    junit = tmp_path / "conformance.xml"
    proc = conformance("--driver", "cpu", "--quick", "--json", "--junit", junit,
                       tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["passed"] is True and report["quick"] is True
    assert report["device"]["name"] == "nnrt-cpu"
    sections = report["sections"]
    assert sections["interface"][PASS] >= 40 and FAIL not in sections["interface"]
    # every node type of the reference engine has cases, and the CPU driver runs them all
    assert sections["operators"][PASS] >= 2 * len(node_types())
    assert FAIL not in sections["capabilities"]
    assert sections["recovery"] == {SKIP: 1} and sections["limits"] == {SKIP: 1}  # --quick
    assert "\r" not in proc.stderr  # progress only on a terminal
    tree = ET.parse(junit).getroot()
    testcases = tree.findall(".//testcase")
    assert len(testcases) == len(report["checks"])
    assert not tree.findall(".//failure")
    assert {s.get("name") for s in tree.findall("testsuite")} == {
        f"conformance.{s}" for s in sections}
    _assert_nothing_left(tmp_path)


@pytest.mark.multiprocess
@pytest.mark.parametrize("driver", ["gpu --cl-device any", "accel"])
def test_our_gpu_and_accelerator_drivers_pass_quick(tmp_path, driver):
    """Our other two drivers certify too (the GPU on PoCL's CPU device)."""
    proc = conformance("--driver", driver, "--quick", "--json", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["passed"] is True
    sections = report["sections"]
    assert all(FAIL not in counts for counts in sections.values()), sections
    assert sections["interface"][PASS] >= 40 and sections["operators"][PASS] > 0
    _assert_nothing_left(tmp_path)


@pytest.mark.multiprocess
def test_a_broken_driver_fails_with_its_faults_named(tmp_path):
    junit = tmp_path / "broken.xml"
    proc = conformance("--driver", "broken", "--quick", "--junit", junit, tmp_path=tmp_path,
                       NNRT_DRIVER_PLUGINS=PLUGIN)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = proc.stdout
    assert "FAILED" in summary
    # the wrong Add, with a reproducer naming the node, its case and its operands
    assert "FAIL ADD_FUSION broadcast f32[2,3,4]+const[4]: float32" in summary
    assert "differs from the reference engine" in summary
    assert '"node": "NODE_TYPE_ADD_FUSION"' in summary and '"operands": [' in summary
    # float16 claimed, float32 computed
    assert "FAIL float16: said supported, values are rounded to float16" in summary
    # a cache it cannot read back
    assert "FAIL model cache: said supported, the exported cache prepares" in summary
    assert "NNRT_INVALID_MODEL_CACHE" in summary
    failed = {case.get("name") for case in ET.parse(junit).getroot().iter("testcase")
              if case.find("failure") is not None}
    assert "ADD_FUSION broadcast f32[2,3,4]+const[4]: float32" in failed
    assert "float16: said supported, values are rounded to float16" in failed
    assert "model cache: said supported, the exported cache prepares and gives the same " \
           "answers" in failed
    # nothing else: Add is right where nothing broadcasts, every other operator passes
    assert failed == {"ADD_FUSION broadcast f32[2,3,4]+const[4]: float32",
                      "ADD_FUSION broadcast f32[2,3,4]+const[4]: float16 mode",
                      "float16: said supported, values are rounded to float16",
                      "float16: said supported, a sum past 65504 overflows",
                      "model cache: said supported, the exported cache prepares and gives "
                      "the same answers"}, failed
    _assert_nothing_left(tmp_path)


@pytest.mark.multiprocess
@pytest.mark.timeout(FULL_TIMEOUT + 30)
def test_cpu_numpy_engine_passes_in_full(tmp_path):
    proc = conformance("--driver", "cpu --engine numpy", "--json", tmp_path=tmp_path,
                       timeout=FULL_TIMEOUT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    for name in ("SIGKILL mid-run: the waiting client is told, promptly",
                 "SIGKILL mid-run: no fd of the dead session left in the client",
                 "a restarted driver prepares from the cache the dead one wrote",
                 "a corrupted (one byte flipped) cache is refused with NNRT_INVALID_MODEL_CACHE",
                 "a foreign cache (another instance, another key) is refused with "
                 "NNRT_INVALID_MODEL_CACHE",
                 "a 16 MiB session budget is enforced (NNRT_OUT_OF_MEMORY), what is held "
                 "keeps working",
                 "4 sessions prepare and run at once"):
        assert checks[name]["status"] == PASS, (name, checks.get(name))
    told = checks["SIGKILL mid-run: the waiting client is told, promptly"]["detail"]
    assert told.startswith("told in ") and "is gone" in told, told
    # the full run has more cases per operator than --quick
    assert report["sections"]["operators"][PASS] > 2 * len(node_types())
    _assert_nothing_left(tmp_path)


@pytest.mark.multiprocess
@pytest.mark.parametrize("driver", ["", "--engine numpy", "'unclosed"])
def test_a_bad_driver_argument_is_usage(tmp_path, driver):
    proc = conformance("--driver", driver, tmp_path=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "conformance" in proc.stderr


@pytest.mark.multiprocess
def test_no_driver_argument_is_usage(tmp_path):
    proc = conformance(tmp_path=tmp_path)
    assert proc.returncode == 2
    assert "--driver" in proc.stderr


@pytest.mark.multiprocess
def test_a_driver_that_never_serves_fails_with_its_log(tmp_path):
    proc = conformance("--driver", "cpu --engine no-such-engine", "--json", tmp_path=tmp_path)
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["passed"] is False and "exited with 2 before serving" in report["aborted"]
    assert "no-such-engine" in report["aborted"]  # its own complaint, from its log
    _assert_nothing_left(tmp_path)


# -- the parts -----------------------------------------------------------------------------


def test_every_node_type_has_cases_the_reference_engine_accepts():
    for node_type in node_types():
        generated = cases.cases_for(node_type)
        assert generated, na.NodeType.Name(node_type)
        for case in generated:
            expected = models.reference_outputs(case)
            builder = models.builder_of(case, expected)
            models.reference_graph(builder)  # what the host validates
            if case.float16:
                models.reference_float16(builder, models.run_inputs(case))


def test_cases_are_the_same_every_time():
    first = cases.cases_for(na.NODE_TYPE_CONV2D_FUSION)
    again = cases.cases_for(na.NODE_TYPE_CONV2D_FUSION)
    for a, b in zip(first, again):
        for x, y in zip(a.operands, b.operands):
            np.testing.assert_array_equal(x.array, y.array)


def test_tolerances_of_semantics_md():
    y = np.float32([1.0, 2.0, -3.0])
    assert models.mismatch([y * (1 + 5e-5)], [y], float16=False, quantised=False) is None
    assert "values off" in models.mismatch([y + 1e-2], [y], float16=False, quantised=False)
    # float16 mode: two float16 ulps
    half_ulp2 = np.float32(2 * 2.0 ** -10)
    assert models.mismatch([y * (1 + half_ulp2 * 0.9)], [y], float16=True, quantised=False) is None
    assert models.mismatch([y * (1 + half_ulp2 * 3)], [y], float16=True, quantised=False)
    # quantised: one step
    q = np.int8([10, -5, 100])
    assert models.mismatch([q + np.int8(1)], [q], float16=False, quantised=True) is None
    assert "2 quantisation steps" in models.mismatch([q + np.int8(2)], [q], float16=False,
                                                     quantised=True)
    # integers and booleans exactly, shapes exactly, NaN where NaN is expected
    assert "exact" in models.mismatch([np.int32([1, 2])], [np.int32([1, 3])], float16=False,
                                      quantised=False)
    assert "shape" in models.mismatch([y[:2]], [y], float16=False, quantised=False)
    nan = np.float32([np.nan, 1.0])
    assert models.mismatch([nan], [nan.copy()], float16=False, quantised=False) is None


def test_device_memory_from_the_admin_details():
    assert device_memory({"device_memory": "1 GiB (1073741824 bytes)",
                          "memory_used_bytes": "0"}) == 1 << 30
    assert device_memory({"device_memory": "512 MiB"}) == 512 << 20  # the template driver's
    assert device_memory({"memory_limit_mib": "32", "global_memory_mib": "6362"}) == 32 << 20
    assert device_memory({"engine": "ort"}) is None


def test_report_outputs():
    report = Report(driver="x", quick=True)
    report.add(Check("interface", "a", PASS))
    report.add(Check("operators", "ADD_FUSION b: float32", FAIL, "off by 0.5",
                     {"node": "NODE_TYPE_ADD_FUSION"}))
    report.add(Check("limits", "c", SKIP, "skipped by --quick"))
    report.add(Check("limits", "d", FAIL, "advisory", required=False))
    report.finish()
    assert not report.passed and len(report.failures) == 1
    text = report.summary()
    assert "FAIL ADD_FUSION b: float32" in text and "reproducer:" in text
    assert "FAIL d (advisory)" in text
    data = report.as_json()
    assert data["sections"]["operators"] == {FAIL: 1}
    json.dumps(data)
    root = ET.fromstring(report.junit())
    assert len(root.findall(".//testcase")) == 4
    assert len(root.findall(".//failure")) == 2 and len(root.findall(".//skipped")) == 1


@pytest.mark.multiprocess
def test_drivers_stop_when_the_conformance_process_is_killed(tmp_path):
    """Its drivers hold a lifeline pipe (--lifeline-fd) to it: a SIGKILLed conformance run,
    whose cleanup never runs, leaves no driver behind."""
    environment = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "nnrt.client.cli", "conformance", "--driver",
                             "cpu --engine numpy"], env=environment, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not _processes_naming(tmp_path) and time.monotonic() < deadline:
            assert proc.poll() is None, "the run ended before its driver was seen"
            time.sleep(0.05)
        assert _processes_naming(tmp_path), "no driver started within 60 s"
    finally:
        proc.kill()
        proc.wait(10)
    deadline = time.monotonic() + 30
    while _processes_naming(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_naming(tmp_path) == []
