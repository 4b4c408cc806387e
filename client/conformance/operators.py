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


def _check_case(ctx: Context, case: Case) -> bool:
    """The case's checks; True when the driver supports it."""
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
        return False
    if not supported.ops[0]:
        why = supported.reasons[0] if supported.reasons else ""
        with ctx.check(SECTION, f"{name}: unsupported, refused by PrepareModel",
                       reproducer=reproducer) as out:
            code, model_id = _prepare(c, builder)
            release(c, model_id)
            if code == e.NNRT_SUCCESS:
                raise CheckFailed("GetSupportedOperation says unsupported"
                                  f"{f' ({why})' if why else ''}, yet PrepareModel accepted it")
            out.detail = f"{code_text(code)}; {why}"
            raise CheckSkipped(f"not supported by the driver ({why or 'no reason given'}); "
                               f"PrepareModel refused it: {code_text(code)}")
        return False
    with ctx.check(SECTION, f"{name}: float32", reproducer=reproducer):
        _run_and_compare(ctx, builder, case, expected, float16=False)
    if case.float16 and ctx.capabilities.get("IsFloat16PrecisionSupported"):
        with ctx.check(SECTION, f"{name}: float16 mode", reproducer=reproducer):
            want = reference_float16(builder, run_inputs(case))
            _run_and_compare(ctx, builder, case, want, float16=True)
    return True


def _prepare(client, builder, config: ht.ModelConfig | None = None) -> tuple[int, int]:
    with builder.packed(client) as model:
        reply = client.prepare_model(model, config)
    return reply.returnCode, reply.preparedModelId


def _run_and_compare(ctx: Context, builder, case: Case, expected, *, float16: bool) -> None:
    c = ctx.client
    config = ht.ModelConfig(enableFloat16=True) if float16 else None
    with builder.packed(c) as model:
        reply = c.prepare_model(model, config)
    if reply.returnCode != e.NNRT_SUCCESS:
        raise CheckFailed(f"GetSupportedOperation says supported, but PrepareModel"
                          f"{' (enableFloat16)' if float16 else ''} answered "
                          f"{code_text(reply.returnCode, reply.reason)}")
    try:
        result = run_prepared(c, reply.preparedModelId, run_inputs(case), expected, case.fmt)
        expect_code(result.code, e.NNRT_SUCCESS, "Run", result.reason)
        why = mismatch(result.outputs, expected, float16=float16,
                       quantised=case.quant_type == ht.QUANT_TYPE_ALL)
        if why is not None:
            raise CheckFailed(f"differs from the reference engine: {why}")
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
            _check_case(ctx, case)
