"""A case as an HDI model, its expected outputs from the reference engine (computed here, in
the conformance process), its run on the driver through the client core, and the comparison
with semantics.md's tolerances."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nnrt.client.core.driver import DriverClient
from nnrt.common.dtypes import hdi_data_type
from nnrt.common.errors import NNRT_SUCCESS, code_name
from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.hdi.graph import Graph, NodeSpec, QuantParam, TensorSpec
from nnrt.hdi.model_validation import build_graph
from nnrt.hdi.reference.float16 import to_float16
from nnrt.hdi.reference.kernel import create_kernel
from nnrt.hdi.reference.plan import ExecutionPlan
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.protos.generate import oneof_member

from .cases import Case

RUN_TIMEOUT = 30.0  # s: one Run of a small case
# semantics.md: float32 as the reference computes it, to rounding; float16 mode within two
# float16 ulps of the reference's float16 graph (sums accumulate in float32 on every device,
# element-wise steps may round once or per step); quantised outputs within one step.
FLOAT32_RTOL, FLOAT32_ATOL = 1e-4, 1e-5
FLOAT16_RTOL, FLOAT16_ATOL = 2 * 2.0 ** -10, 2 * 2.0 ** -11
QUANT_STEPS = 1


def _quant_params(quant: Sequence[tuple[int, int, float]]) -> tuple[QuantParam, ...]:
    return tuple(QuantParam(num_bits=b, zero_point=z, scale=s) for b, z, s in quant)


def _out_dtypes(case: Case) -> list[np.dtype]:
    dtypes = case.notes.get("dtypes")
    if dtypes is not None:
        return [np.dtype(d) for d in dtypes]
    dtype = case.out_dtype if case.out_dtype is not None else case.operands[0].array.dtype
    return [np.dtype(dtype)] * case.outputs


def _spec(index: int, array_dtype: np.dtype, shape: Sequence[int], fmt: int,
          constant: np.ndarray | None = None,
          quant: Sequence[tuple[int, int, float]] = ()) -> TensorSpec:
    return TensorSpec(index=index, name=f"t{index}", data_type=hdi_data_type(array_dtype),
                      dtype=np.dtype(array_dtype), shape=tuple(shape), format=fmt,
                      quant_params=_quant_params(quant), constant=constant)


def attrs_of(case: Case):
    """The node's attribute message (an empty one of its type when the case gives none)."""
    if case.attrs is not None:
        return case.attrs
    node = na.Node()
    member = getattr(node, oneof_member(case.type_name))
    member.SetInParent()
    return member


def reference_outputs(case: Case) -> list[np.ndarray]:
    """The case's outputs by the reference kernel (float32 / the types as given);
    DriverError when the reference refuses the node (a generator's mistake)."""
    inputs = tuple(_spec(i, op.array.dtype, op.array.shape, case.fmt,
                         op.array if op.constant else None, op.quant)
                   for i, op in enumerate(case.operands))
    outputs = tuple(_spec(len(inputs) + k, dtype, (), case.fmt,
                          quant=case.out_quant)
                    for k, dtype in enumerate(_out_dtypes(case)))
    node = NodeSpec(index=0, name="node", node_type=case.node_type, attrs=attrs_of(case),
                    inputs=inputs, outputs=outputs, quant_type=case.quant_type)
    kernel = create_kernel(node)
    return [np.array(y) for y in kernel.execute([op.array for op in case.operands])]


def run_inputs(case: Case) -> list[np.ndarray]:
    return [op.array for op in case.operands if not op.constant]


def builder_of(case: Case, expected: Sequence[np.ndarray]) -> HdiModelBuilder:
    """The one-node model: run-time inputs, constants, outputs declared as computed."""
    b = HdiModelBuilder(f"conformance-{case.type_name[10:].lower()}")
    indices = []
    for i, op in enumerate(case.operands):
        if op.constant:
            indices.append(b.tensor(f"c{i}", op.array.dtype, op.array.shape, data=op.array,
                                    fmt=case.fmt, quant=op.quant))
        else:
            index = b.tensor(f"x{i}", op.array.dtype, op.array.shape, fmt=case.fmt,
                             quant=op.quant)
            b.inputs.append(index)
            indices.append(index)
    outs = [b.tensor(f"y{k}", y.dtype, y.shape, fmt=case.fmt, quant=case.out_quant)
            for k, y in enumerate(expected)]
    b.node(case.node_type, indices, outs, case.attrs, quant_type=case.quant_type)
    b.mark_outputs(*outs)
    return b


def reference_graph(builder: HdiModelBuilder) -> Graph:
    """The model as a driver's host would validate it (nnrt.hdi.model_validation)."""
    blob = b"".join(builder.constants[i].tobytes() for i in sorted(builder.constants))
    window = ht.SharedBuffer(bufferId=1, bufferSize=max(len(blob), 1), offset=0,
                             dataSize=len(blob))
    model = builder.model(window if builder.constants else None)
    return build_graph(model, lambda w: blob[w.offset:w.offset + w.dataSize])


def reference_float16(builder: HdiModelBuilder, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The outputs in float16 mode: the float16 rewrite of the graph, float32 at its edges."""
    graph = to_float16(reference_graph(builder))
    plan = ExecutionPlan(graph)
    fed = [np.asarray(a, dtype=t.dtype) for a, t in zip(inputs, graph.inputs)]
    outs = plan.run(fed, lambda: False)
    return [np.asarray(y, dtype=np.float32) if y.dtype == np.float16 else np.asarray(y)
            for y in outs]


@dataclass
class DriverRun:
    """What one Run on the driver gave: the code, the reason, the outputs (on success)."""

    code: int
    reason: str = ""
    outputs: list[np.ndarray] | None = None


def _io(memory, array: np.ndarray, fmt: int) -> ht.IOTensor:
    return ht.IOTensor(dataType=hdi_data_type(array.dtype), dimensions=list(array.shape),
                       format=fmt, data=memory.descriptor(0, max(array.nbytes, 1)))


def run_prepared(client: DriverClient, model_id: int, inputs: Sequence[np.ndarray],
                 outputs_like: Sequence[np.ndarray], fmt: int,
                 timeout: float = RUN_TIMEOUT) -> DriverRun:
    """Run a prepared model on fresh buffers; its outputs read back as `outputs_like`."""
    memories = []
    try:
        ins, outs = [], []
        for array in inputs:
            code, memory = client.allocate_buffer(max(array.nbytes, 1))
            if code != NNRT_SUCCESS:
                return DriverRun(code, "AllocateBuffer for an input")
            memories.append(memory)
            memory.view(0, array.nbytes)[:] = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
            ins.append(_io(memory, array, fmt))
        for like in outputs_like:
            code, memory = client.allocate_buffer(max(like.nbytes, 1))
            if code != NNRT_SUCCESS:
                return DriverRun(code, "AllocateBuffer for an output")
            memories.append(memory)
            outs.append(_io(memory, like, fmt))
        reply = client.run(model_id, ins, outs, timeout=timeout)
        if reply.returnCode != NNRT_SUCCESS:
            return DriverRun(reply.returnCode, reply.reason)
        got = []
        for like, memory, dims in zip(outputs_like, memories[len(inputs):], reply.outputDims):
            shape = tuple(dims.values)
            count = int(np.prod(shape, dtype=np.int64))
            got.append(np.frombuffer(bytes(memory.view(0, count * like.dtype.itemsize)),
                                     dtype=like.dtype).reshape(shape))
        return DriverRun(NNRT_SUCCESS, outputs=got)
    finally:
        for memory in memories:
            memory.close()
            if client.alive:
                client.release_buffer(memory.descriptor())


def mismatch(got: Sequence[np.ndarray], want: Sequence[np.ndarray], *, float16: bool,
             quantised: bool) -> str | None:
    """Why `got` is not `want` within the tolerances, or None when it is."""
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            return f"output {k}: shape {list(g.shape)}, expected {list(w.shape)}"
        if g.size == 0:
            continue
        if w.dtype.kind == "f":
            rtol, atol = (FLOAT16_RTOL, FLOAT16_ATOL) if float16 else (FLOAT32_RTOL, FLOAT32_ATOL)
            gf, wf = g.astype(np.float64), w.astype(np.float64)
            same_nan = np.isnan(gf) & np.isnan(wf)
            bad = ~(np.isclose(gf, wf, rtol=rtol, atol=atol) | same_nan)
            if bad.any():
                at = tuple(int(i) for i in np.argwhere(bad)[0])
                err = np.nanmax(np.abs(gf - wf))
                return (f"output {k}: {int(bad.sum())} of {g.size} values off (rtol {rtol:g}, "
                        f"atol {atol:g}), max |error| {err:.3g}; first at {list(at)}: "
                        f"{g[at]!r}, expected {w[at]!r}")
        elif quantised and w.dtype.kind in "iu":
            steps = np.abs(g.astype(np.int64) - w.astype(np.int64))
            if steps.max() > QUANT_STEPS:
                at = tuple(int(i) for i in np.unravel_index(int(steps.argmax()), steps.shape))
                return (f"output {k}: {int(steps.max())} quantisation steps off at {list(at)}: "
                        f"{g[at]}, expected {w[at]} (one step allowed)")
        elif not np.array_equal(g, w):
            at = tuple(int(i) for i in np.argwhere(g != w)[0])
            return f"output {k}: differs at {list(at)}: {g[at]!r}, expected {w[at]!r} (exact)"
    return None


def describe(case: Case) -> dict:
    """A reproducer of the case: its node, attributes and operands (values of small ones)."""
    from google.protobuf import text_format

    operands = []
    for i, op in enumerate(case.operands):
        entry = {"index": i, "role": "constant" if op.constant else "input",
                 "dtype": str(op.array.dtype), "shape": list(op.array.shape)}
        if op.quant:
            entry["quant"] = [list(q) for q in op.quant]
        if op.array.size <= 64:
            entry["values"] = op.array.tolist()
        operands.append(entry)
    attrs = "" if case.attrs is None else text_format.MessageToString(case.attrs, as_one_line=True)
    return {"node": case.type_name, "case": case.name, "attrs": attrs, "format":
            ht.Format.Name(case.fmt), "quantType": ht.QuantType.Name(case.quant_type),
            "operands": operands}


def code_text(code: int, reason: str = "") -> str:
    return code_name(code) + (f" ({reason})" if reason else "")
