"""Every operator of hdi_ops.json has a CPU kernel that accepts at least one valid node.

One minimal valid node per NodeType, written once in a neutral form (`Case`), goes two ways:

* in-process: NodeSpec / TensorSpec (tests/hdi/reference/util.py) through create_kernel →
  infer_shapes (must give the declared output shapes) → execute (arrays of the declared
  dtypes and shapes; the values are checked by the per-operator tests);
* across processes: each node as a single-node HDI model (HdiModelBuilder, constants in
  shared memory) through a real CPU driver's GetSupportedOperation, which must answer True.

A NodeType without an entry here, or an entry for a NodeType hdi_ops.json does not list,
fails `test_table_covers_hdi_ops`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.hdi.reference import ops  # noqa: F401  (importing ops fills KERNELS)
from nnrt.hdi.reference.kernel import KERNELS, create_kernel
from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na
from nnrt.protos.generate import DEFAULT_SPEC
from nnrt.common.errors import NNRT_SUCCESS
from nnrt.hdi.graph import NodeSpec, QuantParam
from tests.hdi.reference.util import Const, readonly, tensor_spec

F32 = np.float32
I32 = np.int32
I8 = np.int8
NHWC = ht.FORMAT_NHWC
NCHW = ht.FORMAT_NCHW
Q = QuantParam(num_bits=8, zero_point=0, scale=0.1)


# ----------------------------------------------------------------------------- neutral form


@dataclass(frozen=True)
class Quantised:
    """A run-time input carrying QuantParams."""

    array: np.ndarray
    quant: tuple[QuantParam, ...] = (Q,)


@dataclass(frozen=True)
class Out:
    dtype: Any
    shape: tuple[int, ...]
    quant: tuple[QuantParam, ...] = ()


InputLike = np.ndarray | Const | Quantised


@dataclass(frozen=True)
class Case:
    node_type: int
    attrs: Any  # the node's attribute message
    inputs: tuple[InputLike, ...]
    outputs: tuple[Out, ...]
    fmt: int = NHWC  # the format tag of every tensor of the node

    @property
    def name(self) -> str:
        return na.NodeType.Name(self.node_type)


def _array(item: InputLike) -> np.ndarray:
    return item if isinstance(item, np.ndarray) else item.array


def _quant(item: InputLike) -> tuple[QuantParam, ...]:
    return item.quant if isinstance(item, Quantised) else ()


def _rand(*shape: int, dtype: Any = F32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _pos(*shape: int, dtype: Any = F32, seed: int = 1) -> np.ndarray:
    """Values in [0.5, 1.5): valid for log, sqrt, rsqrt, reciprocal, divisors."""
    return (np.random.default_rng(seed).random(shape) + 0.5).astype(dtype)


def _bools(*shape: int, seed: int = 2) -> np.ndarray:
    return np.random.default_rng(seed).random(shape) < 0.5


def _ints(values: Any, dtype: Any = I32) -> Const:
    return Const(np.array(values, dtype))


def _rows(pairs: Sequence[Sequence[int]]) -> list[ht.Int64Array]:
    return [ht.Int64Array(values=list(p)) for p in pairs]


def _same(node_type: int, attrs: Any, *inputs: InputLike, shape: tuple[int, ...] = (2, 3),
          dtype: Any = F32) -> Case:
    """A node whose one output has `shape` and `dtype`."""
    return Case(node_type, attrs, tuple(inputs), (Out(dtype, shape),))


def _unary(node_type: int, attrs: Any) -> Case:
    return _same(node_type, attrs, _pos(2, 3))


def _binary(node_type: int, attrs: Any, out_dtype: Any = F32) -> Case:
    return _same(node_type, attrs, _rand(2, 3), _pos(1, 3), dtype=out_dtype)


# ----------------------------------------------------------------------------- the table


def _cases() -> list[Case]:
    x23 = _rand(2, 3)
    img = _rand(1, 3, 3, 2)  # NHWC
    return [
        _unary(na.NODE_TYPE_ABS, na.Abs()),
        _same(na.NODE_TYPE_ACTIVATION, na.Activation(activationType=ht.ACTIVATION_TYPE_RELU),
              x23),
        _binary(na.NODE_TYPE_ADD_FUSION, na.AddFusion()),
        _same(na.NODE_TYPE_ALL, na.All(), _bools(2, 3), _ints(1), shape=(2,), dtype=np.bool_),
        _same(na.NODE_TYPE_ARGMAX_FUSION, na.ArgMaxFusion(axis=1), x23, shape=(2,), dtype=I32),
        _same(na.NODE_TYPE_ASSERT, na.Assert(summarize=3), np.ones((2,), np.bool_), x23,
              shape=(2,), dtype=np.bool_),
        _same(na.NODE_TYPE_AVGPOOL_FUSION,
              na.AvgPoolFusion(kernelSize=[2, 2], strides=[1, 1], padMode=ht.PAD_MODE_VALID,
                               format=NHWC), img, shape=(1, 2, 2, 2)),
        _same(na.NODE_TYPE_BATCH_TO_SPACE_ND,
              na.BatchToSpaceND(blockShape=[2, 2], crops=_rows([[0, 0], [0, 0]])),
              _rand(4, 1, 1, 2), shape=(1, 2, 2, 2)),
        _same(na.NODE_TYPE_BIAS_ADD, na.BiasAdd(), x23, Const(_rand(3, seed=3))),
        _same(na.NODE_TYPE_BROADCAST_TO, na.BroadcastTo(shape=[2, 3]), _rand(1, 3)),
        _same(na.NODE_TYPE_CAST, na.Cast(), x23, _ints(ht.DATA_TYPE_INT32), dtype=I32),
        _unary(na.NODE_TYPE_CEIL, na.Ceil()),
        _same(na.NODE_TYPE_CLIP, na.Clip(min=-1.0, max=1.0), x23),
        _same(na.NODE_TYPE_CONCAT, na.Concat(axis=0), _rand(1, 3), Const(x23), shape=(3, 3)),
        _same(na.NODE_TYPE_CONV2D_FUSION,
              na.Conv2DFusion(kernelSize=[2, 2], stride=[1, 1], dilation=[1, 1],
                              padMode=ht.PAD_MODE_PAD, group=1, inChannel=2, outChannel=3),
              img, Const(_rand(3, 2, 2, 2, seed=4)), Const(_rand(3, seed=5)),
              shape=(1, 2, 2, 3)),
        _same(na.NODE_TYPE_CONV2D_TRANSPOSE_FUSION,
              na.Conv2dTransposeFusion(kernelSize=[2, 2], stride=[1, 1], dilation=[1, 1],
                                       padMode=ht.PAD_MODE_PAD, group=1, inChannel=2,
                                       outChannel=3),
              img, Const(_rand(3, 2, 2, 2, seed=4)), Const(_rand(3, seed=5)),
              shape=(1, 4, 4, 3)),
        _unary(na.NODE_TYPE_COS, na.Cos()),
        # ConstantOfShape's only input is its (constant) shape; the model gets a dummy input
        _same(na.NODE_TYPE_CONSTANT_OF_SHAPE, na.ConstantOfShape(value=[1.5]), _ints([2, 3])),
        _same(na.NODE_TYPE_CROP, na.Crop(axis=0, offset=[1, 1]), _rand(3, 4), _ints([2, 3])),
        _same(na.NODE_TYPE_DEPTH_TO_SPACE, na.DepthToSpace(blockSize=2, format=NHWC, mode="DCR"),
              _rand(1, 1, 1, 4), shape=(1, 2, 2, 1)),
        Case(na.NODE_TYPE_DETECTION_POST_PROCESS,
             na.DetectionPostProcess(scale=[10.0, 10.0, 5.0, 5.0], nmsIoUThreshold=0.5,
                                     nmsScoreThreshold=0.1, maxDetections=2,
                                     detectionsPerClass=2, maxClassesPerDetection=1,
                                     numClasses=2),
             (_rand(1, 3, 4), _pos(1, 3, 3) - 0.5,
              Const(np.array([[0.5, 0.5, 0.2, 0.2], [0.2, 0.2, 0.1, 0.1],
                              [0.8, 0.8, 0.3, 0.3]], F32))),
             (Out(F32, (1, 2, 4)), Out(F32, (1, 2)), Out(F32, (1, 2)), Out(F32, (1,)))),
        _binary(na.NODE_TYPE_DIV_FUSION, na.DivFusion()),
        _same(na.NODE_TYPE_ELTWISE, na.Eltwise(mode=ht.ELTWISE_MODE_SUM), x23, _rand(2, 3, seed=6)),
        _binary(na.NODE_TYPE_EQUAL, na.Equal(), np.bool_),
        _same(na.NODE_TYPE_EXPFUSION, na.ExpFusion(base=-1.0, scale=1.0, shift=0.0), x23),
        _same(na.NODE_TYPE_EXPAND_DIMS, na.ExpandDims(), x23, _ints(0), shape=(1, 2, 3)),
        _same(na.NODE_TYPE_FLATTEN, na.Flatten(axis=1), _rand(2, 3, 4), shape=(2, 12)),
        _unary(na.NODE_TYPE_FLOOR, na.Floor()),
        _same(na.NODE_TYPE_FILL, na.Fill(), np.array(1.5, F32), _ints([2, 3])),
        _same(na.NODE_TYPE_FULL_CONNECTION, na.FullConnection(hasBias=True),
              x23, Const(_rand(4, 3, seed=7)), Const(_rand(4, seed=8)), shape=(2, 4)),
        _same(na.NODE_TYPE_FUSED_BATCH_NORM, na.FusedBatchNorm(epsilon=1e-5), x23,
              *(Const(_rand(3, seed=s)) for s in (9, 10, 11)), Const(_pos(3, seed=12))),
        _same(na.NODE_TYPE_GATHER, na.Gather(), _rand(3, 4), _ints([0, 2]), _ints([0]),
              shape=(2, 4)),
        _same(na.NODE_TYPE_GATHER_ND, na.GatherNd(), _rand(3, 4), _ints([[0], [2]]),
              shape=(2, 4)),
        _binary(na.NODE_TYPE_GREATER, na.Greater(), np.bool_),
        _binary(na.NODE_TYPE_GREATER_EQUAL, na.GreaterEqual(), np.bool_),
        _same(na.NODE_TYPE_INSTANCE_NORM, na.InstanceNorm(epsilon=1e-5), img,
              Const(_rand(2, seed=13)), Const(_rand(2, seed=14)), shape=img.shape),
        _same(na.NODE_TYPE_LAYER_NORM_FUSION,
              na.LayerNormFusion(beginNormAxis=1, epsilon=1e-5, elementwiseAffine=True,
                                 beginParamsAxis=1),
              x23, Const(_rand(3, seed=15)), Const(_rand(3, seed=16))),
        _same(na.NODE_TYPE_LEAKY_RELU, na.LeakyRelu(negativeSlope=0.1), x23),
        _binary(na.NODE_TYPE_LESS, na.Less(), np.bool_),
        _binary(na.NODE_TYPE_LESS_EQUAL, na.LessEqual(), np.bool_),
        _unary(na.NODE_TYPE_LOG, na.Log()),
        _same(na.NODE_TYPE_LOGICAL_AND, na.LogicalAnd(), _bools(2, 3), _bools(2, 3, seed=3),
              dtype=np.bool_),
        _same(na.NODE_TYPE_LOGICAL_NOT, na.LogicalNot(), _bools(2, 3), dtype=np.bool_),
        _same(na.NODE_TYPE_LOGICAL_OR, na.LogicalOr(), _bools(2, 3), _bools(2, 3, seed=3),
              dtype=np.bool_),
        _same(na.NODE_TYPE_LRN,
              na.LRN(depthRadius=1, bias=1.0, alpha=1e-4, beta=0.75, normRegion="ACROSS_CHANNELS"),
              img, shape=img.shape),
        _lstm(),
        _same(na.NODE_TYPE_L2_NORMALIZE_FUSION, na.L2NormalizeFusion(axis=[-1], epsilon=1e-6),
              x23),
        _same(na.NODE_TYPE_MATMUL_FUSION, na.MatMulFusion(), x23, Const(_rand(3, 4, seed=17)),
              shape=(2, 4)),
        _binary(na.NODE_TYPE_MAXIMUM, na.Maximum()),
        _same(na.NODE_TYPE_MAX_POOL_FUSION,
              na.MaxPoolFusion(kernelSize=[2, 2], strides=[1, 1], padMode=ht.PAD_MODE_VALID,
                               format=NHWC), img, shape=(1, 2, 2, 2)),
        _binary(na.NODE_TYPE_MINIMUM, na.Minimum()),
        _same(na.NODE_TYPE_MOD, na.Mod(), np.array([5, 7, -3], I32), _ints([3, 2, 2]),
              shape=(3,), dtype=I32),
        _binary(na.NODE_TYPE_MUL_FUSION, na.MulFusion()),
        _unary(na.NODE_TYPE_NEG, na.Neg()),
        _binary(na.NODE_TYPE_NOT_EQUAL, na.NotEqual(), np.bool_),
        _same(na.NODE_TYPE_ONE_HOT, na.OneHot(axis=-1), np.array([0, 3, 1], I32), _ints(4),
              Const(np.array(1.0, F32)), Const(np.array(0.0, F32)), shape=(3, 4)),
        _same(na.NODE_TYPE_PAD_FUSION, na.PadFusion(paddingMode=ht.PADDING_MODE_CONSTANT),
              x23, _ints([[1, 1], [0, 2]]), shape=(4, 5)),
        _same(na.NODE_TYPE_POW_FUSION, na.PowFusion(scale=1.0, shift=0.0), _pos(2, 3), x23),
        _same(na.NODE_TYPE_PRELU_FUSION, na.PReLUFusion(), x23, Const(_rand(3, seed=18))),
        Case(na.NODE_TYPE_QUANT_DTYPE_CAST,
             na.QuantDTypeCast(srcT=ht.DATA_TYPE_FLOAT32, dstT=ht.DATA_TYPE_INT8), (x23,),
             (Out(I8, (2, 3), (Q,)),)),
        _same(na.NODE_TYPE_RANK, na.Rank(), x23, shape=(), dtype=I32),
        # the framework passes one input, which Range does not read
        _same(na.NODE_TYPE_RANGE, na.Range(start=0, limit=5, delta=1), np.zeros(1, I32),
              shape=(5,), dtype=I32),
        _unary(na.NODE_TYPE_RECIPROCAL, na.Reciprocal()),
        _binary(na.NODE_TYPE_REAL_DIV, na.RealDiv()),
        _same(na.NODE_TYPE_REDUCE_FUSION, na.ReduceFusion(mode=ht.REDUCE_MODE_SUM), x23,
              _ints([1]), shape=(2,)),
        _same(na.NODE_TYPE_RESHAPE, na.Reshape(), x23, _ints([3, 2]), shape=(3, 2)),
        _same(na.NODE_TYPE_RESIZE,
              na.Resize(method=ht.RESIZE_METHOD_NEAREST, newHeight=4, newWidth=4,
                        coordinateTransformMode=ht.COORDINATE_TRANSFORM_MODE_ASYMMETRIC),
              _rand(1, 2, 2, 1), shape=(1, 4, 4, 1)),
        _unary(na.NODE_TYPE_ROUND, na.Round()),
        _unary(na.NODE_TYPE_RSQRT, na.Rsqrt()),
        _same(na.NODE_TYPE_SCALE_FUSION, na.ScaleFusion(axis=-1), x23,
              Const(_rand(3, seed=19)), Const(_rand(3, seed=20))),
        _same(na.NODE_TYPE_SCATTER_ND, na.ScatterNd(), _ints([[0], [2]]), x23, _ints([4, 3]),
              shape=(4, 3)),
        _same(na.NODE_TYPE_SHAPE, na.Shape(), x23, shape=(2,), dtype=I32),
        _unary(na.NODE_TYPE_SIN, na.Sin()),
        _same(na.NODE_TYPE_SLICE_FUSION, na.SliceFusion(), _rand(3, 4), _ints([0, 1]),
              _ints([2, 2]), shape=(2, 2)),
        _same(na.NODE_TYPE_SOFTMAX, na.Softmax(axis=[-1]), x23),
        _same(na.NODE_TYPE_SPACE_TO_BATCH_ND,
              na.SpaceToBatchND(blockShape=[2, 2], paddings=_rows([[0, 0], [0, 0]])),
              _rand(1, 2, 2, 1), shape=(4, 1, 1, 1)),
        _same(na.NODE_TYPE_SPACE_TO_DEPTH, na.SpaceToDepth(blockSize=2, format=NHWC),
              _rand(1, 2, 2, 1), shape=(1, 1, 1, 4)),
        _same(na.NODE_TYPE_SPARSE_TO_DENSE, na.SparseToDense(), _ints([[0, 1], [1, 2]]),
              _rand(2), _ints([2, 3])),
        Case(na.NODE_TYPE_SPLIT, na.Split(outputNum=2, axis=1), (_rand(2, 4),),
             (Out(F32, (2, 2)), Out(F32, (2, 2)))),
        _unary(na.NODE_TYPE_SQRT, na.Sqrt()),
        _same(na.NODE_TYPE_SQUEEZE, na.Squeeze(axis=[0]), _rand(1, 3), shape=(3,)),
        _unary(na.NODE_TYPE_SQUARE, na.Square()),
        _binary(na.NODE_TYPE_SQUARED_DIFFERENCE, na.SquaredDifference()),
        _same(na.NODE_TYPE_STACK, na.Stack(axis=0), _rand(3), Const(_rand(3, seed=21)),
              shape=(2, 3)),
        _same(na.NODE_TYPE_STRIDED_SLICE, na.StridedSlice(), _rand(3, 4), _ints([0, 0]),
              _ints([2, 4]), _ints([1, 2]), shape=(2, 2)),
        _binary(na.NODE_TYPE_SUB_FUSION, na.SubFusion()),
        _same(na.NODE_TYPE_TILE_FUSION, na.TileFusion(), x23, _ints([2, 1]), shape=(4, 3)),
        Case(na.NODE_TYPE_TOPK_FUSION, na.TopKFusion(sorted=True, axis=-1),
             (_rand(2, 5), _ints(2)), (Out(F32, (2, 2)), Out(I32, (2, 2)))),
        _same(na.NODE_TYPE_TRANSPOSE, na.Transpose(), x23, _ints([1, 0]), shape=(3, 2)),
        _same(na.NODE_TYPE_UNSQUEEZE, na.Unsqueeze(axis=[0]), _rand(3), shape=(1, 3)),
        Case(na.NODE_TYPE_UNSTACK, na.Unstack(axis=0), (x23,), (Out(F32, (3,)), Out(F32, (3,)))),
        _same(na.NODE_TYPE_WHERE, na.Where(), _bools(2, 3), x23, _rand(2, 3, seed=22)),
        _same(na.NODE_TYPE_SELECT, na.Select(), _bools(2, 3), x23, _rand(2, 3, seed=22)),
        _unary(na.NODE_TYPE_ERF, na.Erf()),
        _same(na.NODE_TYPE_LOG_SOFTMAX, na.LogSoftmax(axis=-1), x23),
        Case(na.NODE_TYPE_QUANT_DTYPE_CAST_V2,
             na.QuantDTypeCastV2(srcT=ht.DATA_TYPE_INT8, dstT=ht.DATA_TYPE_FLOAT32, axis=0),
             (Quantised(np.array([[-3, 0, 5], [7, 1, -128]], I8)),), (Out(F32, (2, 3)),)),
    ]


def _lstm() -> Case:
    seq, batch, inp, hidden = 3, 2, 4, 5
    return Case(
        na.NODE_TYPE_LSTM, na.LSTM(hasBias=True, inputSize=inp, hiddenSize=hidden, numLayers=1,
                                   numDirections=1),
        (_rand(seq, batch, inp), Const(_rand(1, 4 * hidden, inp, seed=23)),
         Const(_rand(1, 4 * hidden, hidden, seed=24)), Const(_rand(1, 8 * hidden, seed=25)),
         _rand(1, batch, hidden, seed=26), _rand(1, batch, hidden, seed=27)),
        (Out(F32, (seq, batch, hidden)), Out(F32, (1, batch, hidden)),
         Out(F32, (1, batch, hidden))))


CASES = _cases()
BY_TYPE = {case.node_type: case for case in CASES}


# ----------------------------------------------------------------------------- the two adapters


def node_spec(case: Case) -> NodeSpec:
    """The case as the host hands it to the CPU driver."""
    inputs = []
    for i, item in enumerate(case.inputs):
        array = _array(item)
        inputs.append(tensor_spec(i, array.dtype, array.shape, fmt=case.fmt, quant=_quant(item),
                                  constant=array if isinstance(item, Const) else None))
    outputs = [tensor_spec(len(inputs) + k, out.dtype, out.shape, fmt=case.fmt, quant=out.quant)
               for k, out in enumerate(case.outputs)]
    return NodeSpec(index=0, name=case.name.lower(), node_type=case.node_type, attrs=case.attrs,
                    inputs=tuple(inputs), outputs=tuple(outputs))


def hdi_model(case: Case) -> HdiModelBuilder:
    """The case as a single-node HDI model: run-time inputs are model inputs, constants
    travel in shared memory, every node output is a model output."""
    b = HdiModelBuilder(name=case.name.lower())
    ins = []
    for i, item in enumerate(case.inputs):
        array = _array(item)
        quant = [(q.num_bits, q.zero_point, q.scale) for q in _quant(item)]
        if isinstance(item, Const):
            ins.append(b.tensor(f"c{i}", array.dtype, array.shape, data=array, fmt=case.fmt))
        else:
            ins.append(b.tensor(f"x{i}", array.dtype, array.shape, fmt=case.fmt, quant=quant))
            b.inputs.append(ins[-1])
    if not b.inputs:  # a model needs an input; this one is read by no node
        b.input("unused", F32, (1,), fmt=case.fmt)
    outs = [b.tensor(f"y{k}", out.dtype, out.shape, fmt=case.fmt,
                     quant=[(q.num_bits, q.zero_point, q.scale) for q in out.quant])
            for k, out in enumerate(case.outputs)]
    b.node(case.node_type, ins, outs, case.attrs)
    b.mark_outputs(*outs)
    return b


# ----------------------------------------------------------------------------- tests


def test_table_covers_hdi_ops() -> None:
    spec = json.loads(DEFAULT_SPEC.read_text())
    spec_types = {na.NodeType.Value(op["node_type"]) for op in spec}
    assert len(spec) == len(spec_types) == 96
    assert len(CASES) == len(BY_TYPE), "a NodeType has two entries"
    assert set(BY_TYPE) == spec_types, {
        "missing": sorted(na.NodeType.Name(t) for t in spec_types - set(BY_TYPE)),
        "extra": sorted(na.NodeType.Name(t) for t in set(BY_TYPE) - spec_types)}
    unregistered = sorted(na.NodeType.Name(t) for t in spec_types - set(KERNELS))
    assert not unregistered, f"no CPU kernel registered for {unregistered}"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name[len("NODE_TYPE_"):].lower())
def test_kernel_runs(case: Case) -> None:
    assert case.node_type in KERNELS
    node = node_spec(case)
    kernel = create_kernel(node)
    arrays = [readonly(_array(item)) for item in case.inputs]
    declared = [out.shape for out in case.outputs]
    assert kernel.infer_shapes([a.shape for a in arrays]) == declared
    outs = kernel.execute(arrays)
    assert len(outs) == len(case.outputs)
    for k, (got, want) in enumerate(zip(outs, case.outputs)):
        assert isinstance(got, np.ndarray), (k, type(got))
        assert (got.dtype, got.shape) == (np.dtype(want.dtype), want.shape), k


def test_driver_supports_every_operator(client) -> None:
    answers = {}
    for case in CASES:
        with hdi_model(case).packed(client) as model:
            reply = client.get_supported_operation(model)
        assert reply.returnCode == NNRT_SUCCESS, (case.name, reply.returnCode)
        answers[case.name] = list(reply.ops)
    refused = {name: got for name, got in answers.items() if got != [True]}
    assert not refused, f"GetSupportedOperation refused {refused}"
