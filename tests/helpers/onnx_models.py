"""ONNX models made with onnx.helper, and their results from onnxruntime and from nnrt
compared."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from nnrt.client.onnx_import import import_onnx
from onnx import helper, numpy_helper


OPSET = 17
RTOL = 1e-4


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def f32(*shape: int, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    return (rng(seed).standard_normal(shape) * scale).astype(np.float32)


def make(nodes, inputs: dict[str, np.ndarray], outputs: list[str], inits: dict | None = None,
         opset: int = OPSET, output_shapes: dict | None = None) -> onnx.ModelProto:
    """A model of `nodes`; graph inputs typed after the feeds, outputs left to inference."""
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    known = {v.name: v for v in inferred.graph.value_info}
    for out in inferred.graph.output:  # outputs typed as inference found them
        if out.name in known:
            out.CopyFrom(known[out.name])
    onnx.checker.check_model(inferred)
    return inferred


def reference(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def ours(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    with import_onnx(model) as imported, imported.compile("cpu") as compiled, \
            compiled.executor() as executor:
        result = executor.run(**feeds)
        results = list(result) if isinstance(result, tuple) else [result]
        return [np.array(r) for r in results]


def check(model: onnx.ModelProto, feeds: dict, rtol: float = RTOL, atol: float = 1e-5) -> None:
    expected = reference(model, feeds)
    got = ours(model, feeds)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        if e.ndim == 0:  # a rank-0 output comes back as [1] from a Model (not a session)
            assert g.shape == (1,)
            g = g.reshape(())
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)


def shape_subgraph():
    """PyTorch's flatten: Shape -> Gather(0) -> Unsqueeze -> Concat(-1) -> Reshape."""
    x = f32(2, 3, 4, 4, seed=46)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    return make(nodes, {"x": x}, ["y"], {"zero": np.array(0, np.int64),
                                         "ax0": np.array([0], np.int64),
                                         "minus1": np.array([-1], np.int64)}), {"x": x}
