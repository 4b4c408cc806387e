"""Cases of shapes and values: Shape, Rank, Fill, Range, quantisation casts, detection."""

from __future__ import annotations

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na

from .base import Case, Operand, _case, _const, _f32, _run, generates

@generates(na.NODE_TYPE_SHAPE)
def _shape(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "rank 3", [_run(_f32(rng, 2, 3, 4))], out_dtype=np.int32,
                  float16=False)]


@generates(na.NODE_TYPE_RANK)
def _rank(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "rank 3", [_run(_f32(rng, 2, 3, 4))], out_dtype=np.int32,
                  float16=False)]


@generates(na.NODE_TYPE_FILL)
def _fill(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "[2,3] of 1.5", [_run(np.float32([1.5])), _const(np.int32([2, 3]))],
                  float16=False)]


@generates(na.NODE_TYPE_CONSTANT_OF_SHAPE)
def _constant_of_shape(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "[3,2] of 2", [_run(np.int32([3, 2]))],
                  na.ConstantOfShape(dataType=ht.DATA_TYPE_FLOAT32, value=[2.0]),
                  out_dtype=np.float32, float16=False)]


@generates(na.NODE_TYPE_RANGE)
def _range(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "0..10 step 3", [_run(np.int32([0])), _const(np.int32([10])),
                                              _const(np.int32([3]))],
                  na.Range(dataType=ht.DATA_TYPE_INT32, start=0, limit=10, delta=3),
                  out_dtype=np.int32, float16=False)]


@generates(na.NODE_TYPE_SPARSE_TO_DENSE)
def _sparse_to_dense(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "2 values in [3,4]", [_const(np.int32([[0, 1], [2, 3]])),
                                                   _run(_f32(rng, 2)), _const(np.int32([3, 4])),
                                                   _const(np.float32([0.0]))],
                  out_dtype=np.float32)]


@generates(na.NODE_TYPE_QUANT_DTYPE_CAST, na.NODE_TYPE_QUANT_DTYPE_CAST_V2)
def _quant_dtype_cast(rng: np.random.Generator, node_type: int) -> list[Case]:
    attrs = na.QuantDTypeCast if node_type == na.NODE_TYPE_QUANT_DTYPE_CAST else na.QuantDTypeCastV2
    q = ((8, 2, 0.05),)
    x = _f32(rng, 2, 6)
    return [_case(node_type, "f32 -> int8", [_run(x)],
                  attrs(srcT=ht.DATA_TYPE_FLOAT32, dstT=ht.DATA_TYPE_INT8), out_dtype=np.int8,
                  out_quant=q, float16=False),
            _case(node_type, "int8 -> f32", [Operand(rng.integers(-128, 127, (2, 6), np.int8),
                                                     quant=q)],
                  attrs(srcT=ht.DATA_TYPE_INT8, dstT=ht.DATA_TYPE_FLOAT32),
                  out_dtype=np.float32, float16=False)]


@generates(na.NODE_TYPE_DETECTION_POST_PROCESS)
def _detection_post_process(rng: np.random.Generator, node_type: int) -> list[Case]:
    boxes, classes = 6, 2
    anchors = np.concatenate([rng.uniform(0.2, 0.8, (boxes, 2)),
                              rng.uniform(0.1, 0.3, (boxes, 2))], axis=1).astype(np.float32)
    return [_case(node_type, "6 anchors 2 classes",
                  [_run(_f32(rng, 1, boxes, 4, low=-0.5, high=0.5)),
                   _run(rng.uniform(0, 1, (1, boxes, classes + 1)).astype(np.float32)),
                   _const(anchors)],
                  na.DetectionPostProcess(format=ht.FORMAT_NHWC, inputSize=300,
                                          scale=[10.0, 10.0, 5.0, 5.0], nmsIoUThreshold=0.5,
                                          nmsScoreThreshold=0.3, maxDetections=3,
                                          detectionsPerClass=3, maxClassesPerDetection=1,
                                          numClasses=classes, useRegularNms=False,
                                          outQuantized=False),
                  outputs=4, notes={"dtypes": (np.float32, np.float32, np.float32, np.int32)},
                  float16=False)]


@generates(na.NODE_TYPE_ASSERT)
def _assert(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "true condition", [_run(np.ones((2,), np.bool_)),
                                                _run(_f32(rng, 2))],
                  na.Assert(summarize=3), out_dtype=np.bool_, float16=False)]
