"""Lowering validated HDI nodes to ONNX nodes: the framework of the onnxruntime engine.

One lowering function per operator (or tight family), in `ops/lower_*.py`, registered by
NodeType with `@lowers(...)`. It receives the node's CPU kernel — already created, so the
node is validated and its attributes are read once, by the reference — and a `NodeEmitter`
through which it writes ONNX nodes into the segment being built. It raises `NotLowerable`
(the reason is logged at prepare) when the ONNX operator would not compute exactly what
semantics.md decides; the node then stays on its numpy kernel.

Conventions every lowering keeps:

* Tensors keep the HDI layout at the segment's edges (NHWC); a lowering that needs ONNX's
  NCHW asks for a permuted input (`e.input(i, perm=...)`: a constant is permuted once,
  here; a run-time value gets a Transpose) and transposes its result back. onnxruntime's
  transpose optimiser cancels the pairs between consecutive layers.
* The output has the output tensor's dtype and shape: `e.output(k)` is the name the last
  ONNX node of output k must write.
* A dtype outside what the chosen ONNX operator's onnxruntime CPU kernel takes is
  NotLowerable (`e.require_dtypes`), never a session that fails to load.
* Integer arithmetic that can trap (division, remainder) stays on numpy: a SIGFPE inside
  onnxruntime would end the driver process.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from onnx import NodeProto, TensorProto, helper, numpy_helper

from nnrt.hdi.registry import registrar
from nnrt.hdi.reference.kernel import Kernel

OPSET = 21  # ONNX opset of every lowered graph (Gelu needs 20)
IR_VERSION = 10  # the ONNX IR version that opset 21 came with

F32 = np.dtype(np.float32)
FLOAT32_ONLY = frozenset({F32})


class NotLowerable(Exception):
    """The node cannot be expressed exactly in ONNX; it runs on its numpy kernel."""


Lowering = Callable[[Kernel, "NodeEmitter"], None]
LOWERINGS: dict[int, Lowering] = {}
_register = registrar(LOWERINGS)  # type: ignore[arg-type]


def lowers(*node_types: int) -> Callable[[Lowering], Lowering]:
    """`@lowers(NODE_TYPE_...)` on a lowering function."""
    return _register(*node_types)  # type: ignore[return-value]


def onnx_dtype(dtype: np.dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


class SegmentGraph:
    """The ONNX graph of one segment under construction: nodes, initializers, the HDI
    tensors it reads from outside (its inputs) and those it writes."""

    def __init__(self) -> None:
        self.nodes: list[NodeProto] = []
        self.initializers: list[TensorProto] = []
        self.inputs: dict[int, Any] = {}  # HDI index -> TensorSpec of an outside value read
        self.written: dict[int, Any] = {}  # HDI index -> TensorSpec of a value written here
        self.lowered: list[int] = []  # HDI node indices, in order
        self._counter = 0
        self._constants: dict[tuple[int, tuple[int, ...] | None], str] = {}

    def fresh(self, hint: str) -> str:
        self._counter += 1
        return f"{hint}_{self._counter}"

    def checkpoint(self) -> tuple[int, ...]:
        return (len(self.nodes), len(self.initializers), len(self.inputs), len(self.written),
                len(self._constants))

    def rollback(self, mark: tuple[int, ...]) -> None:
        """Forget everything added since `mark` (a node turned out not lowerable)."""
        n_nodes, n_init, n_in, n_written, n_const = mark
        del self.nodes[n_nodes:], self.initializers[n_init:]
        for table, keep in ((self.inputs, n_in), (self.written, n_written),
                            (self._constants, n_const)):
            for key in list(table)[keep:]:
                del table[key]

    def constant(self, key: tuple[int, tuple[int, ...] | None], array: np.ndarray) -> str:
        """An initializer made once per (tensor, permutation)."""
        name = self._constants.get(key)
        if name is None:
            name = self.fresh(f"c{key[0]}")
            self.initializers.append(numpy_helper.from_array(np.array(array, order="C"), name))
            self._constants[key] = name
        return name

    def add_array(self, array: np.ndarray, hint: str) -> str:
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.array(array, order="C"), name))
        return name


def value_name(index: int) -> str:
    """The ONNX name of HDI tensor `index` inside a segment and at its edges."""
    return f"t{index}"


class NodeEmitter:
    """What a lowering function writes one HDI node with."""

    def __init__(self, graph: SegmentGraph, kernel: Kernel) -> None:
        self.graph = graph
        self.kernel = kernel
        self.node = kernel.node

    # -- operands

    def spec(self, i: int) -> Any:
        return self.node.inputs[i]

    def input(self, i: int, perm: Sequence[int] | None = None) -> str:
        """Input i as an ONNX name, permuted by `perm` when given."""
        return self.tensor(self.node.inputs[i], perm)

    def tensor(self, spec: Any, perm: Sequence[int] | None = None) -> str:
        """An HDI tensor as an ONNX name (an initializer when constant), permuted by `perm`."""
        key = None if perm is None else tuple(perm)
        if spec.is_constant:
            array = spec.constant if key is None else np.transpose(spec.constant, key)
            return self.graph.constant((spec.index, key), array)
        if spec.index not in self.graph.written:
            self.graph.inputs.setdefault(spec.index, spec)
        name = value_name(spec.index)
        if key is None:
            return name
        return self.op("Transpose", [name], perm=list(key))

    def finite(self, i: int) -> bool:
        """Whether input i can hold no NaN or infinity (a dequantized integer), so that a
        lowering may skip what it writes out for them."""
        return False

    def const(self, value: Any, dtype: Any, hint: str = "k") -> str:
        """A new initializer holding `value` as `dtype`."""
        return self.graph.add_array(np.asarray(value, dtype=dtype), hint)

    def int64s(self, values: Sequence[int], hint: str = "i") -> str:
        return self.const(list(values), np.int64, hint)

    def output(self, k: int = 0) -> str:
        spec = self.node.outputs[k]
        self.graph.written[spec.index] = spec
        return value_name(spec.index)

    # -- nodes

    def op(self, op_type: str, inputs: Sequence[str], *, out: str | None = None,
           n_out: int = 1, domain: str = "", **attrs: Any) -> Any:
        """Append one ONNX node; its output name (or names when n_out > 1)."""
        if out is not None:
            outputs = [out]
        else:
            outputs = [self.graph.fresh(f"n{self.node.index}_{op_type}") for _ in range(n_out)]
        self.graph.nodes.append(helper.make_node(
            op_type, list(inputs), outputs, name=self.graph.fresh(f"node{self.node.index}"),
            domain=domain, **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def subgraph(self, emit: Callable[[], Sequence[str]], name: str) -> Any:
        """What `emit` writes, taken out of the segment as a subgraph (a branch of If) whose
        outputs are the float32 values it returns; it reads the segment's values and
        initializers from the outer scope."""
        mark = len(self.graph.nodes)
        results = emit()
        outputs = []
        for value in results:
            out = self.graph.fresh(f"{name}_out")
            self.op("Identity", [value], out=out)
            outputs.append(helper.make_tensor_value_info(out, TensorProto.FLOAT, None))
        nodes = self.graph.nodes[mark:]
        del self.graph.nodes[mark:]
        return helper.make_graph(nodes, self.graph.fresh(name), [], outputs)

    # -- checks

    def require_dtypes(self, allowed: frozenset[np.dtype], *specs: Any) -> None:
        """NotLowerable unless every given tensor (default: every input and output) has a
        dtype in `allowed`."""
        specs = specs or (*self.node.inputs, *self.node.outputs)
        for spec in specs:
            if spec.dtype not in allowed:
                raise NotLowerable(f"{spec.dtype} tensor {spec.name!r}")

    def require_float32(self) -> None:
        self.require_dtypes(FLOAT32_ONLY)

    def require_static(self, i: int) -> tuple[int, ...]:
        shape = self.node.inputs[i].shape
        if -1 in shape:
            raise NotLowerable(f"input {i} has a dynamic shape")
        return tuple(shape)
