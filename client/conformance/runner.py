"""One certification run: the driver started in a private runtime directory, the sections in
order, everything the run started killed, reaped and removed at the end."""

from __future__ import annotations

import logging
from collections.abc import Callable

from . import capabilities, interface, limits, operators, recovery
from nnrt.common.errors import NNRT_SUCCESS, NNRT_UNSUPPORTED_OP
from nnrt.protos import hdi_types_pb2 as ht

from .context import Context, add_model, prepare, release
from .driver_process import DriverProcess, DriverStartError, PrivateRuntime, split_driver_spec
from .report import Report

log = logging.getLogger(__name__)

# (name, module, runs with --quick)
SECTIONS = (("interface", interface, True), ("operators", operators, True),
            ("capabilities", capabilities, True), ("recovery", recovery, False),
            ("limits", limits, False))
DRIVER_NAME = "conformance"


def certify(driver_spec: str, *, quick: bool = False, sections: set[str] | None = None,
            progress: Callable[[str], None] = lambda _line: None) -> Report:
    """Run the suite against `nnrt-driver KIND OPTIONS` (driver_spec "KIND [OPTIONS]")."""
    kind, options = split_driver_spec(driver_spec)
    report = Report(driver=driver_spec, quick=quick)
    runtime = PrivateRuntime()
    ctx = Context(kind, options, runtime.path, report, quick=quick, progress=progress)
    try:
        progress(f"starting nnrt-driver {driver_spec}")
        ctx.driver = DriverProcess(kind, options, runtime.path, DRIVER_NAME)
        try:
            ctx.driver.start()
        except DriverStartError as exc:
            report.aborted = f"{exc}; its log ends:\n{exc.log_text[-1500:]}"
            return report
        ctx.client = ctx.driver.client()
        report.device = _device(ctx)
        _base_config(ctx)
        for name, module, in_quick in SECTIONS:
            if sections is not None and name not in sections:
                continue
            if quick and not in_quick:
                ctx.skip(name, f"{name} section", "skipped by --quick")
                continue
            progress(f"{name} ...")
            if ctx.client is None or not ctx.client.alive or not ctx.driver.alive:
                report.aborted = (f"the driver died during the checks before {name}; its log "
                                  f"ends:\n{ctx.driver.log(1500)}")
                break
            module.run(ctx)
    finally:
        ctx.close()
        runtime.close()
        report.finish()
    return report


def _base_config(ctx: Context) -> None:
    """A device that computes no float32 (an NPU: float32 models only in float16 mode)
    refuses the float32 add model the checks use; they then prepare it with enableFloat16."""
    code, model_id, _ = prepare(ctx.client, add_model())
    release(ctx.client, model_id)
    if code == NNRT_UNSUPPORTED_OP and ctx.capabilities.get("IsFloat16PrecisionSupported"):
        code, model_id, _ = prepare(ctx.client, add_model(), ht.ModelConfig(enableFloat16=True))
        release(ctx.client, model_id)
        if code == NNRT_SUCCESS:
            ctx.base_config = ht.ModelConfig(enableFloat16=True)
            ctx.report.device["models"] = "enableFloat16 (float32 refused: NNRT_UNSUPPORTED_OP)"


def _device(ctx: Context) -> dict[str, str]:
    c = ctx.client
    device = {"name": c.get_device_name().name, "vendor": c.get_vendor_name().name}
    version = c.get_version()
    device["version"] = f"{version.major}.{version.minor}"
    # What the driver says it has decides what later sections expect (the interface
    # section checks that each query answers at all).
    for name, query in (("IsFloat16PrecisionSupported", c.is_float16_precision_supported),
                        ("IsPerformanceModeSupported", c.is_performance_mode_supported),
                        ("IsPrioritySupported", c.is_priority_supported),
                        ("IsDynamicInputSupported", c.is_dynamic_input_supported),
                        ("IsModelCacheSupported", c.is_model_cache_supported)):
        reply = query()
        if reply.returnCode == 0:
            ctx.capabilities[name] = reply.isSupported
    device["capabilities"] = ", ".join(
        name[2:-9] for name, yes in ctx.capabilities.items() if yes) or "none"
    return device
