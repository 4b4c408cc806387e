"""Drivers as plugins (nnrt.hdi.plugin): our kinds found through their `nnrt.drivers` entry
points, kinds added by $NNRT_DRIVER_PLUGINS, and a broken plugin reported by name without
breaking the others — in `nnrt-driver`, the device manager's configuration and `nnrt devices
--kinds`."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from nnrt.hdi import plugin
from nnrt.hdi.plugin import DriverKind, PluginError, forget_kinds, installed_kinds, load_kind
from nnrt.common.errors import NNRT_SUCCESS
from nnrt.devmgr.config import ConfigError, parse_config
from tests.conftest import start_driver

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60

# A plugin module of the kinds a vendor could get wrong, and one right.
PLUGINS = textwrap.dedent('''
    import argparse
    from nnrt.hdi.plugin import DriverKind

    def add_options(group):
        group.add_argument("--answer", type=int, default=42)

    def check_options(options):
        if options.answer < 0:
            raise ValueError("--answer must be >= 0")

    def create(options):
        from nnrt.drivers.cpu.device import CpuDevice  # a test kind: our device, numpy engine
        device = CpuDevice(engine="numpy")
        device.answer = options.answer
        return device

    def clash(group):
        group.add_argument("--grace")  # the host's own option

    GOOD = DriverKind("mine", "a test kind on the CPU device", create, add_options,
                      check_options)
    MISNAMED = DriverKind("other", "declares another kind", create)
    CLASH = DriverKind("clash", "declares a host option", create, clash)
    NOT_A_KIND = {"name": "notakind"}
''')


@pytest.fixture
def plugins(tmp_path, monkeypatch) -> Iterator[Path]:
    """tmp/test_kinds.py (above) and tmp/broken_kinds.py (fails at import) importable here
    and in the processes started, and the kinds looked up again before and after."""
    (tmp_path / "test_kinds.py").write_text(PLUGINS)
    (tmp_path / "broken_kinds.py").write_text("raise ImportError('libvendor.so.3: cannot open "
                                              "shared object file')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    forget_kinds()
    yield tmp_path
    monkeypatch.undo()
    forget_kinds()
    for name in ("test_kinds", "broken_kinds"):
        sys.modules.pop(name, None)


BROKEN = ("broken=broken_kinds:KIND,notakind=test_kinds:NOT_A_KIND,"
          "misnamed=test_kinds:MISNAMED,missing=test_kinds:NOPE,clash=test_kinds:CLASH")


def nnrt_driver(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nnrt.server", *args], capture_output=True,
                          text=True, timeout=TIMEOUT)


def nnrt(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; from nnrt.client.cli import main; "
                                                 "sys.exit(main())", *args],
                          capture_output=True, text=True, timeout=TIMEOUT)


# -- our three kinds --------------------------------------------------------------------------


def test_our_kinds_are_found_through_their_entry_points():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())[
        "project"]["entry-points"][plugin.ENTRY_POINT_GROUP]
    assert declared == {kind: f"nnrt.drivers.{kind}.kind:KIND" for kind in ("cpu", "gpu", "accel")}
    kinds = installed_kinds()
    for name, target in declared.items():
        entry = kinds[name]
        assert (entry.target, entry.origin.split()[0]) == (target, "nnrt")
        kind = entry.load()
        assert isinstance(kind, DriverKind) and kind.name == name and kind.summary


def test_a_stale_metadata_directory_first_on_the_path_hides_nothing(tmp_path, monkeypatch):
    # What a source tree holds after a build (`nnrt.egg-info` without the entry points), in
    # the current directory, which comes first on sys.path when tests run from the tree.
    stale = tmp_path / "nnrt.egg-info"
    stale.mkdir()
    (stale / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: nnrt\nVersion: 0.0.1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    forget_kinds()
    try:
        assert {"cpu", "gpu", "accel"} <= set(installed_kinds())
    finally:
        monkeypatch.undo()
        forget_kinds()


def test_a_kind_declared_twice_or_misnamed_is_refused_naming_its_entry_point(tmp_path, monkeypatch):
    rogue = tmp_path / "rogue_driver-1.0.dist-info"
    rogue.mkdir()
    (rogue / "METADATA").write_text("Metadata-Version: 2.1\nName: rogue-driver\nVersion: 1.0\n")
    (rogue / "entry_points.txt").write_text("[nnrt.drivers]\ncpu = rogue:KIND\nNPU = rogue:KIND\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    forget_kinds()
    try:
        with pytest.raises(PluginError, match="also declared by"):
            load_kind("cpu")
        with pytest.raises(PluginError, match="entry point 'NPU' = 'rogue:KIND' \\(rogue-driver "
                                              "1.0\\): a kind's name is a lowercase letter"):
            load_kind("NPU")
        assert load_kind("accel").name == "accel"  # the others are untouched
    finally:
        monkeypatch.undo()
        forget_kinds()


@pytest.mark.multiprocess
def test_each_kind_declares_its_options_in_its_own_help():
    done = nnrt_driver("gpu", "--help")
    assert done.returncode == 0
    assert "gpu driver (nnrt.drivers.gpu.kind:KIND, nnrt " in done.stdout
    assert "--cl-device" in done.stdout and "--gpu-memory-mb" in done.stdout
    assert "--grace" in done.stdout  # the host's options beside
    assert "--engine" not in done.stdout and "--spec" not in done.stdout
    listing = nnrt_driver("--help")
    assert listing.returncode == 0
    assert all(f"  {kind} " in listing.stdout for kind in ("cpu", "gpu", "accel"))


def test_the_kind_comes_before_its_options_and_an_unknown_kind_is_bad_usage(capsys):
    from nnrt.server.main import parse_args

    args = parse_args(["--name", "c1", "cpu", "--engine", "numpy", "--grace", "3"])
    assert (args.kind, args.name, args.grace) == ("cpu", "c1", 3.0)
    assert vars(args.driver_options) == {"engine": "numpy", "threads": None,
                                         "int8_kernels": None, "ort_spin": None}
    assert args.driver_kind is load_kind("cpu")
    kinds = ", ".join(installed_kinds())  # accel, cpu, gpu (and whatever else is installed)
    for argv, message in [(["--engine", "numpy", "cpu"], f"invalid choice: 'numpy' (choose from "
                            f"{kinds}); put the kind 'cpu' before its own options"),
                          (["tpu"], f"invalid choice: 'tpu' (choose from {kinds})"),
                          (["--grace", "3"], "the following arguments are required: kind"),
                          (["accel", "--spec"], "argument --spec: expected one argument")]:
        with pytest.raises(SystemExit) as exit_:
            parse_args(argv)
        assert exit_.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.multiprocess
def test_devices_kinds_lists_ours():
    done = nnrt("devices", "--kinds")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["KIND", "FROM", "MODULE", "SUMMARY"]
    rows = {line.split()[0]: line.split()[1:4] for line in lines[1:]}
    for kind in ("cpu", "gpu", "accel"):
        assert rows[kind][0] == "nnrt" and rows[kind][2] == f"nnrt.drivers.{kind}.kind"


# -- kinds added by $NNRT_DRIVER_PLUGINS -------------------------------------------------------


@pytest.mark.multiprocess
def test_the_environment_adds_a_kind_that_serves(plugins, monkeypatch, tmp_path):
    monkeypatch.setenv(plugin.PLUGINS_ENV, "mine=test_kinds:GOOD")
    forget_kinds()
    entry = installed_kinds()["mine"]
    assert (entry.origin, entry.target) == ("$NNRT_DRIVER_PLUGINS", "test_kinds:GOOD")
    config = parse_config("[drivers.m]\nkind = 'mine'\noptions = { answer = 7 }\n")
    assert config.driver("m").option_args() == ["--answer", "7"]
    with pytest.raises(ConfigError, match="refuses --answer -1: --answer must be >= 0"):
        parse_config("[drivers.m]\nkind = 'mine'\noptions = { answer = -1 }\n")

    listed = json.loads(nnrt("devices", "--kinds", "--json").stdout)["kinds"]
    assert {"kind": "mine", "summary": "a test kind on the CPU device",
            "origin": "$NNRT_DRIVER_PLUGINS", "target": "test_kinds:GOOD", "usable": True,
            "error": None} in listed
    driver = start_driver(tmp_path / "rt", "mine", "--answer", "3")
    try:
        with driver.client() as client:
            assert client.get_device_name().returnCode == NNRT_SUCCESS
    finally:
        assert driver.stop() == 0


def test_malformed_items_of_the_environment_are_logged_and_skipped(monkeypatch, caplog):
    monkeypatch.setenv(plugin.PLUGINS_ENV, "no-target, ok=os:path ,=x:y,Bad=os:sep")
    forget_kinds()
    try:
        with caplog.at_level(logging.ERROR, logger="nnrt.hdi.plugin"):
            kinds = installed_kinds()
        assert "ok" in kinds and "cpu" in kinds and "Bad" not in kinds
        assert sum("is not kind=module:attr: ignored" in r.message for r in caplog.records) == 3
    finally:
        monkeypatch.delenv(plugin.PLUGINS_ENV)
        forget_kinds()


# -- broken plugins ---------------------------------------------------------------------------


def test_a_broken_plugin_is_reported_by_name_and_the_others_work(plugins, monkeypatch, caplog):
    monkeypatch.setenv(plugin.PLUGINS_ENV, BROKEN)
    forget_kinds()
    reasons = {
        "broken": "entry point 'broken' = 'broken_kinds:KIND' ($NNRT_DRIVER_PLUGINS) cannot be "
                  "loaded: ImportError: libvendor.so.3: cannot open shared object file",
        "notakind": "is a dict, not a nnrt.hdi.plugin.DriverKind",
        "misnamed": "declares the kind 'other': the entry point's name must be the kind",
        "missing": "cannot be loaded: AttributeError",
    }
    with caplog.at_level(logging.ERROR, logger="nnrt.hdi.plugin"):
        for name, reason in reasons.items():
            with pytest.raises(PluginError, match=None) as error:
                load_kind(name)
            assert reason in str(error.value) and f"entry point {name!r}" in str(error.value)
            with pytest.raises(PluginError):
                load_kind(name)  # the same answer again, logged once
    assert len(caplog.records) == len(reasons)
    assert all(r.message.startswith("driver plugin unusable: entry point ")
               for r in caplog.records)
    assert load_kind("cpu").name == "cpu" and load_kind("gpu").name == "gpu"
    with pytest.raises(PluginError, match="no driver kind 'tpu' is installed"):
        load_kind("tpu")

    with pytest.raises(ConfigError, match=r"\[drivers.b\]: kind 'broken' cannot be used: "
                                          r"entry point 'broken'"):
        parse_config("[drivers.b]\nkind = 'broken'\n")
    with pytest.raises(ConfigError) as unknown:
        parse_config("[drivers.t]\nkind = 'tpu'\n")
    assert f"unknown kind 'tpu' (installed: {', '.join(installed_kinds())};" in str(unknown.value)
    assert {"broken", "misnamed", "cpu", "gpu"} <= set(installed_kinds())  # broken ones too
    assert [d.name for d in parse_config("[drivers.cpu]\n").drivers] == ["cpu"]


@pytest.mark.multiprocess
def test_nnrt_driver_of_a_broken_kind_exits_1_with_the_reason(plugins, monkeypatch):
    monkeypatch.setenv(plugin.PLUGINS_ENV, BROKEN)
    done = nnrt_driver("broken", "--runtime-dir", "/nonexistent")
    assert done.returncode == 1
    assert "entry point 'broken' = 'broken_kinds:KIND' ($NNRT_DRIVER_PLUGINS) cannot be " \
           "loaded: ImportError: libvendor.so.3" in done.stderr
    clash = nnrt_driver("clash", "--runtime-dir", "/nonexistent")
    assert clash.returncode == 1 and "entry point 'clash'" in clash.stderr
    assert "its options cannot be declared" in clash.stderr and "--grace" in clash.stderr
    # the others still start their parsers, list and help
    assert nnrt_driver("cpu", "--help").returncode == 0
    listing = nnrt_driver("--help")
    assert listing.returncode == 0 and "broken     unusable (entry point 'broken'" in listing.stdout
    assert nnrt_driver("cpu", "--bogus").returncode == 2


@pytest.mark.multiprocess
def test_devices_kinds_shows_a_broken_plugin_and_fails(plugins, monkeypatch):
    monkeypatch.setenv(plugin.PLUGINS_ENV, "broken=broken_kinds:KIND,mine=test_kinds:GOOD")
    done = nnrt("devices", "--kinds", "--json")
    assert done.returncode == 1
    kinds = {k["kind"]: k for k in json.loads(done.stdout)["kinds"]}
    assert kinds["mine"]["usable"] and kinds["cpu"]["usable"]
    assert not kinds["broken"]["usable"] and "libvendor.so.3" in kinds["broken"]["error"]
    assert "driver plugin unusable: entry point 'broken'" in done.stderr
    table = nnrt("devices", "--kinds").stdout
    assert "UNUSABLE: entry point 'broken'" in table
