"""Cases of nodes that move data: reshapes, transposes, slices, gathers, pads, resizes."""

from __future__ import annotations

import numpy as np

from nnrt.protos import hdi_types_pb2 as ht
from nnrt.protos import node_attrs_pb2 as na

from .base import NHWC, Case, _case, _const, _f32, _run, generates

@generates(na.NODE_TYPE_RESHAPE)
def _reshape(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "[2,6] -> [3,4]", [_run(_f32(rng, 2, 6)), _const(np.int64([3, 4]))]),
            _case(node_type, "-1", [_run(_f32(rng, 2, 3, 4)), _const(np.int32([-1, 4]))])]


@generates(na.NODE_TYPE_TRANSPOSE)
def _transpose(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "perm 0 2 1", [_run(_f32(rng, 2, 3, 4)), _const(np.int32([0, 2, 1]))]),
            _case(node_type, "NHWC -> NCHW", [_run(_f32(rng, 1, 3, 4, 2)),
                                              _const(np.int64([0, 3, 1, 2]))])]


@generates(na.NODE_TYPE_CONCAT)
def _concat(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 1", [_run(_f32(rng, 2, 3)), _run(_f32(rng, 2, 2)),
                                        _const(_f32(rng, 2, 1))], na.Concat(axis=1))]


@generates(na.NODE_TYPE_SPLIT)
def _split(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "3 equal parts", [_run(_f32(rng, 2, 6))],
                  na.Split(outputNum=3, axis=1), outputs=3),
            _case(node_type, "sizes 1,3", [_run(_f32(rng, 4, 2))],
                  na.Split(outputNum=2, sizeSplits=[1, 3], axis=0), outputs=2)]


@generates(na.NODE_TYPE_STACK)
def _stack(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 0", [_run(_f32(rng, 2, 3)), _run(_f32(rng, 2, 3))],
                  na.Stack(axis=0))]


@generates(na.NODE_TYPE_UNSTACK)
def _unstack(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 0", [_run(_f32(rng, 3, 4))], na.Unstack(axis=0), outputs=3)]


@generates(na.NODE_TYPE_SQUEEZE)
def _squeeze(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 1", [_run(_f32(rng, 2, 1, 3))], na.Squeeze(axis=[1]))]


@generates(na.NODE_TYPE_UNSQUEEZE)
def _unsqueeze(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 0", [_run(_f32(rng, 2, 3))], na.Unsqueeze(axis=[0]))]


@generates(na.NODE_TYPE_EXPAND_DIMS)
def _expand_dims(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 1", [_run(_f32(rng, 2, 3)), _const(np.int32([1]))])]


@generates(na.NODE_TYPE_FLATTEN)
def _flatten(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 1", [_run(_f32(rng, 2, 3, 4))], na.Flatten(axis=1))]


@generates(na.NODE_TYPE_SLICE_FUSION)
def _slice(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "begin 0,1 size 2,2", [_run(_f32(rng, 3, 4)), _const(np.int32([0, 1])),
                                                    _const(np.int32([2, 2]))],
                  na.SliceFusion(axes=[0, 1]))]


@generates(na.NODE_TYPE_STRIDED_SLICE)
def _strided_slice(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "stride 2", [_run(_f32(rng, 4, 6)), _const(np.int32([0, 1])),
                                          _const(np.int32([4, 6])), _const(np.int32([2, 2]))],
                  na.StridedSlice())]


@generates(na.NODE_TYPE_TILE_FUSION)
def _tile(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "2x3", [_run(_f32(rng, 2, 2)), _const(np.int32([2, 3]))],
                  na.TileFusion())]


@generates(na.NODE_TYPE_BROADCAST_TO)
def _broadcast_to(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "[3,1] -> [2,3,4]", [_run(_f32(rng, 3, 1))],
                  na.BroadcastTo(shape=[2, 3, 4]))]


@generates(na.NODE_TYPE_GATHER)
def _gather(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 0", [_run(_f32(rng, 5, 3)), _const(np.int32([4, 0, 2])),
                                        _const(np.int32([0]))])]


@generates(na.NODE_TYPE_GATHER_ND)
def _gather_nd(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "pairs", [_run(_f32(rng, 3, 4)), _const(np.int32([[0, 1], [2, 3]]))])]


@generates(na.NODE_TYPE_SCATTER_ND)
def _scatter_nd(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "rows", [_const(np.int32([[0], [2]])), _run(_f32(rng, 2, 3)),
                                      _const(np.int32([4, 3]))], out_dtype=np.float32)]


@generates(na.NODE_TYPE_PAD_FUSION)
def _pad(rng: np.random.Generator, node_type: int) -> list[Case]:
    paddings = np.int32([[1, 0], [2, 1]])
    return [_case(node_type, f"{ht.PaddingMode.Name(mode)}", [_run(_f32(rng, 3, 4)),
                                                              _const(paddings)],
                  na.PadFusion(paddingMode=mode, constantValue=0.5))
            for mode in (ht.PADDING_MODE_CONSTANT, ht.PADDING_MODE_REFLECT,
                         ht.PADDING_MODE_SYMMETRIC)]


@generates(na.NODE_TYPE_DEPTH_TO_SPACE)
def _depth_to_space(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "block 2", [_run(_f32(rng, 1, 2, 2, 8))],
                  na.DepthToSpace(blockSize=2, format=NHWC, mode="DCR"), fmt=NHWC)]


@generates(na.NODE_TYPE_SPACE_TO_DEPTH)
def _space_to_depth(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "block 2", [_run(_f32(rng, 1, 4, 4, 2))],
                  na.SpaceToDepth(blockSize=2, format=NHWC), fmt=NHWC)]


def _int64_arrays(rows: list[list[int]]) -> list[ht.Int64Array]:
    return [ht.Int64Array(values=row) for row in rows]


@generates(na.NODE_TYPE_SPACE_TO_BATCH_ND)
def _space_to_batch(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "block 2x2", [_run(_f32(rng, 1, 4, 4, 1))],
                  na.SpaceToBatchND(blockShape=[2, 2], paddings=_int64_arrays([[0, 0], [0, 0]])),
                  fmt=NHWC)]


@generates(na.NODE_TYPE_BATCH_TO_SPACE_ND)
def _batch_to_space(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "block 2x2", [_run(_f32(rng, 4, 2, 2, 1))],
                  na.BatchToSpaceND(blockShape=[2, 2], crops=_int64_arrays([[0, 0], [0, 0]])),
                  fmt=NHWC)]


@generates(na.NODE_TYPE_CROP)
def _crop(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "axis 1", [_run(_f32(rng, 2, 5, 4)), _run(_f32(rng, 2, 3, 2))],
                  na.Crop(axis=1, offset=[1, 2]))]


@generates(na.NODE_TYPE_RESIZE)
def _resize(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, f"{ht.ResizeMethod.Name(method)} x2", [_run(_f32(rng, 1, 3, 3, 2))],
                  na.Resize(method=method, newHeight=6, newWidth=6,
                            coordinateTransformMode=ht.COORDINATE_TRANSFORM_MODE_HALF_PIXEL,
                            nearestMode=ht.NEAREST_MODE_ROUND_HALF_DOWN), fmt=NHWC)
            for method in (ht.RESIZE_METHOD_LINEAR, ht.RESIZE_METHOD_NEAREST)]


@generates(na.NODE_TYPE_ONE_HOT)
def _one_hot(rng: np.random.Generator, node_type: int) -> list[Case]:
    return [_case(node_type, "depth 4", [_run(np.int32([0, 3, 1])), _const(np.int32([4])),
                                         _const(np.float32([1.0])), _const(np.float32([0.0]))],
                  na.OneHot(axis=-1), out_dtype=np.float32)]
