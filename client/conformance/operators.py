"""Section `operators`: each generated case (cases.py) as a one-node model. The driver's
GetSupportedOperation decides what is expected: a supported node must prepare, run and agree
with the reference engine within semantics.md's tolerances (float32; float16 mode when the
driver says it has it; quantised outputs within one step); an unsupported one must be
refused by PrepareModel. One check per case and mode; a node type the driver supports in
none of its cases is listed as skipped, with the reason the driver gave."""

from __future__ import annotations

from nnrt.common import errors as e
from nnrt.hdi.reference.kernel import KERNELS
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na

from .cases import Case, cases_for
from .context import CheckFailed, CheckSkipped, Context, expect_code, release
from .models import (builder_of, code_text, describe, mismatch, reference_float16,
                     reference_outputs, run_inputs, run_prepared)

SECTION = "operators"
QUICK_CASES = 2  # per node type with --quick


def node_types() -> list[int]:
    """Every node type the reference engine defines, in NodeType order."""
    import nnrt.hdi.reference.ops  # noqa: F401  (registers the kernels)

    return sorted(KERNELS)


def _check_case(ctx: Context, case: Case) -> None:
    """The case's checks: float32 as GetSupportedOperation says, then float16 mode."""
    c = ctx.client
    name = f"{case.type_name[10:]} {case.name}"
    reproducer = describe(case)
    expected = reference_outputs(case)
    builder = builder_of(case, expected)
    with builder.packed(c) as model:
        supported = c.get_supported_operation(model)
    if supported.returnCode != e.NNRT_SUCCESS or len(supported.ops) != 1:
        with ctx.check(SECTION, f"{name}: GetSupportedOperation", reproducer=reproducer):
            raise CheckFailed(f"GetSupportedOperation answered "
                              f"{code_text(supported.returnCode, supported.reason)} with "
                              f"{len(supported.ops)} flags for 1 node")
        return
    claimed = bool(supported.ops[0])
    why = supported.reasons[0] if supported.reasons else ""
    if claimed:
        with ctx.check(SECTION, f"{name}: float32", reproducer=reproducer):
            _run_and_compare(ctx, builder, case, expected, float16=False, claimed=True)
    else:
        with ctx.check(SECTION, f"{name}: unsupported, refused by PrepareModel",
                       reproducer=reproducer):
            code, model_id = _prepare(c, builder)
            release(c, model_id)
            if code == e.NNRT_SUCCESS:
                raise CheckFailed("GetSupportedOperation says unsupported"
                                  f"{f' ({why})' if why else ''}, yet PrepareModel accepted it")
            raise CheckSkipped(f"not supported by the driver ({why or 'no reason given'}); "
                               f"PrepareModel refused it: {code_text(code)}")
    if case.float16 and ctx.capabilities.get("IsFloat16PrecisionSupported"):
        # GetSupportedOperation knows no config: a node may run in one precision only (an
        # NPU computes float32 models in float16 alone; a GPU kernel may lack float16).
        with ctx.check(SECTION, f"{name}: float16 mode", reproducer=reproducer):
            want = reference_float16(builder, run_inputs(case))
            _run_and_compare(ctx, builder, case, want, float16=True, claimed=claimed)


def _prepare(client, builder, config: ht.ModelConfig | None = None) -> tuple[int, int]:
    with builder.packed(client) as model:
        reply = client.prepare_model(model, config)
    return reply.returnCode, reply.preparedModelId


def _run_and_compare(ctx: Context, builder, case: Case, expected, *, float16: bool,
                     claimed: bool) -> None:
    """Prepare, run, compare. A refusal fails a node said supported, except a float16-mode
    refusal with NNRT_UNSUPPORTED_OP (a skip: that precision is not computed, and said so);
    for a node said unsupported any refusal is a skip."""
    c = ctx.client
    config = ht.ModelConfig(enableFloat16=True) if float16 else None
    mode = " (enableFloat16)" if float16 else ""
    with builder.packed(c) as model:
        reply = c.prepare_model(model, config)
    if reply.returnCode != e.NNRT_SUCCESS:
        refusal = code_text(reply.returnCode, reply.reason)
        if not claimed or (float16 and reply.returnCode == e.NNRT_UNSUPPORTED_OP):
            raise CheckSkipped(f"PrepareModel{mode} refused it: {refusal}")
        raise CheckFailed(f"GetSupportedOperation says supported, but PrepareModel{mode} "
                          f"answered {refusal}")
    try:
        result = run_prepared(c, reply.preparedModelId, run_inputs(case), expected, case.fmt)
        expect_code(result.code, e.NNRT_SUCCESS, f"Run{mode}", result.reason)
        why = mismatch(result.outputs, expected, float16=float16,
                       quantised=case.quant_type == ht.QUANT_TYPE_ALL)
        if why is not None:
            raise CheckFailed(f"differs from the reference engine{mode}: {why}")
    finally:
        release(c, reply.preparedModelId)


def run(ctx: Context) -> None:
    for node_type in node_types():
        cases = cases_for(node_type)
        name = na.NodeType.Name(node_type)[10:]
        if not cases:
            ctx.skip(SECTION, f"{name}: no generated case", "the conformance suite has no "
                     "case generator for this node type yet")
            continue
        if ctx.quick:
            cases = cases[:QUICK_CASES]
        for case in cases:
            if not ctx.client.alive:  # one failure that says so, not one per case left
                with ctx.check(SECTION, f"{name} {case.name}: the driver is alive",
                               reproducer=describe(case)):
                    raise CheckFailed(f"the driver died during the operator checks, before "
                                      f"this case (the one before it killed it?); its log "
                                      f"ends: {ctx.driver.log(600)}")
                return
            _check_case(ctx, case)
