"""Normalisation, pooling and reduction cases."""

from __future__ import annotations

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na

from .base import NHWC, Case, _case, _const, _f32, _run, generates

@generates(na.NODE_TYPE_SOFTMAX, na.NODE_TYPE_LOG_SOFTMAX)
def _softmax(rng: np.random.Generator, node_type: int) -> list[Case]:
    attrs = na.Softmax if node_type == na.NODE_TYPE_SOFTMAX else na.LogSoftmax
    last = attrs(axis=[-1]) if node_type == na.NODE_TYPE_SOFTMAX else attrs(axis=-1)
    first = attrs(axis=[1]) if node_type == na.NODE_TYPE_SOFTMAX else attrs(axis=1)
    return [_case(node_type, "last axis", [_run(_f32(rng, 3, 7, low=-5, high=5))], last),
            _case(node_type, "axis 1", [_run(_f32(rng, 2, 4, 3, low=-5, high=5))], first)]


@generates(na.NODE_TYPE_LAYER_NORM_FUSION)
def _layer_norm(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "last axis, affine",
                  [_run(_f32(rng, 2, 3, 8)), _const(_f32(rng, 8)), _const(_f32(rng, 8))],
                  na.LayerNormFusion(beginNormAxis=-1, beginParamsAxis=-1, epsilon=1e-5,
                                     elementwiseAffine=True))]


@generates(na.NODE_TYPE_FUSED_BATCH_NORM)
def _batch_norm(rng: np.random.Generator, node_type: int) -> list[Case]:
    c = 3
    return [_case(node_type, "NHWC", [_run(_f32(rng, 1, 2, 2, c)), _const(_f32(rng, c)),
                                      _const(_f32(rng, c)), _const(_f32(rng, c)),
                                      _const(_f32(rng, c, low=0.5, high=2.0))],
                  na.FusedBatchNorm(epsilon=1e-3), fmt=NHWC)]


@generates(na.NODE_TYPE_INSTANCE_NORM)
def _instance_norm(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "NHWC", [_run(_f32(rng, 1, 3, 3, 2)), _const(_f32(rng, 2)),
                                      _const(_f32(rng, 2))],
                  na.InstanceNorm(epsilon=1e-5), fmt=NHWC)]


@generates(na.NODE_TYPE_L2_NORMALIZE_FUSION)
def _l2_normalize(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "last axis", [_run(_f32(rng, 3, 4))],
                  na.L2NormalizeFusion(axis=[-1], epsilon=1e-6))]


@generates(na.NODE_TYPE_LRN)
def _lrn(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "radius 2", [_run(_f32(rng, 1, 2, 2, 6))],
                  na.LRN(depthRadius=2, bias=1.0, alpha=1e-3, beta=0.75,
                         normRegion="ACROSS_CHANNELS"), fmt=NHWC)]


@generates(na.NODE_TYPE_AVGPOOL_FUSION, na.NODE_TYPE_MAX_POOL_FUSION)
def _pool(rng: np.random.Generator, node_type: int) -> list[Case]:
    attrs = na.AvgPoolFusion if node_type == na.NODE_TYPE_AVGPOOL_FUSION else na.MaxPoolFusion
    return [_case(node_type, "2x2 stride 2", [_run(_f32(rng, 1, 4, 4, 3))],
                  attrs(kernelSize=[2, 2], strides=[2, 2], pad=[0, 0, 0, 0],
                        padMode=ht.PAD_MODE_VALID, format=NHWC), fmt=NHWC),
            _case(node_type, "3x3 same", [_run(_f32(rng, 1, 5, 5, 2))],
                  attrs(kernelSize=[3, 3], strides=[1, 1], pad=[0, 0, 0, 0],
                        padMode=ht.PAD_MODE_SAME, format=NHWC), fmt=NHWC),
            _case(node_type, "global", [_run(_f32(rng, 1, 3, 3, 4))],
                  attrs(kernelSize=[3, 3], strides=[1, 1], pad=[0, 0, 0, 0],
                        padMode=ht.PAD_MODE_VALID, format=NHWC, **{"global": True}), fmt=NHWC)]


@generates(na.NODE_TYPE_REDUCE_FUSION)
def _reduce(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, f"{ht.ReduceMode.Name(mode)} axis 1",
                  [_run(_f32(rng, 2, 3, 4, low=0.5, high=1.5)), _const(np.int32([1]))],
                  na.ReduceFusion(keepDims=keep, mode=mode, coeff=1.0))
            for mode, keep in ((ht.REDUCE_MODE_SUM, False), (ht.REDUCE_MODE_MEAN, True),
                               (ht.REDUCE_MODE_MAX, False), (ht.REDUCE_MODE_MIN, False),
                               (ht.REDUCE_MODE_PROD, False), (ht.REDUCE_MODE_L2, False))]


@generates(na.NODE_TYPE_ARGMAX_FUSION)
def _argmax(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 1", [_run(_f32(rng, 3, 5))],
                  na.ArgMaxFusion(axis=1, topK=1, keepDims=False, outMaxValue=False),
                  out_dtype=np.int32, float16=False)]


@generates(na.NODE_TYPE_TOPK_FUSION)
def _topk(rng: np.random.Generator, node_type: int) -> list[Case]:
    x = rng.permutation(24).astype(np.float32).reshape(4, 6)  # distinct: one right order
    return [_case(node_type, "k=3 last axis", [_run(x), _const(np.int32([3]))],
                  na.TopKFusion(sorted=True, axis=-1), outputs=2, notes={"dtypes": (
                      np.float32, np.int32)}, float16=False)]


@generates(na.NODE_TYPE_ALL)
def _all(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 1", [_run(rng.random((3, 4)) > 0.2), _const(np.int32([1]))],
                  na.All(keepDims=0), float16=False)]
