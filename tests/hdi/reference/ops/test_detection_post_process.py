"""DetectionPostProcess on hand-computed examples (TFLite semantics): box decoding, fast and
regular NMS, score / IoU thresholds, several classes per box, background column, batches,
output dtypes, errors."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from nnrt.hdi.reference.kernel import create_kernel
from nnrt.protos import node_attrs_pb2 as na
from tests.hdi.reference.util import (
    NNRT_INVALID_NODE,
    NNRT_INVALID_SHAPE,
    NNRT_UNSUPPORTED_OP,
    Declared,
    expect_error,
    make_node,
    run_node,
    tensor_spec,
)

DPP = na.NODE_TYPE_DETECTION_POST_PROCESS
SCALE = [10.0, 10.0, 5.0, 5.0]

# Zero encodings decode to the anchors themselves: boxes [yMin, xMin, yMax, xMax].
ANCHORS = np.array([[0.5, 0.5, 1, 1],     # a0 [0, 0, 1, 1]
                    [0.55, 0.5, 1, 1],    # a1 [0.05, 0, 1.05, 1]: IoU with a0 0.905
                    [2.5, 2.5, 1, 1],     # a2 [2, 2, 3, 3]: disjoint from a0/a1
                    [2.5, 2.9, 1, 1]],    # a3 [2, 2.4, 3, 3.4]: IoU with a2 0.6/1.4
                   np.float32)
BOXES = np.array([[0, 0, 1, 1], [0.05, 0, 1.05, 1], [2, 2, 3, 3], [2, 2.4, 3, 3.4]], np.float32)
# Column 0 is the background; classes 0 and 1 follow.
SCORES = np.array([[0.0, 0.9, 0.1],
                   [0.0, 0.8, 0.7],
                   [0.0, 0.2, 0.75],
                   [0.0, 0.05, 0.6]], np.float32)


def dpp(encodings, scores, anchors, class_dtype=np.float32, count_dtype=np.float32, **attrs):
    base = dict(scale=SCALE, nmsIoUThreshold=0.5, nmsScoreThreshold=0.3, maxDetections=3,
                numClasses=2)
    base.update(attrs)
    node = make_node(DPP, na.DetectionPostProcess(**base), [encodings, scores, anchors],
                     n_outputs=4)
    outs = (tensor_spec(3, np.float32, ()), tensor_spec(4, class_dtype, ()),
            tensor_spec(5, np.float32, ()), tensor_spec(6, count_dtype, ()))
    node = dataclasses.replace(node, outputs=outs)
    arrays = [a.array if isinstance(a, Declared) else a for a in (encodings, scores, anchors)]
    return node, arrays


def run(scores=SCORES, encodings=None, anchors=ANCHORS, **attrs):
    encodings = np.zeros((1, 4, 4), np.float32) if encodings is None else encodings
    node, arrays = dpp(encodings, scores[None] if scores.ndim == 2 else scores, anchors, **attrs)
    return run_node(node, arrays)


def test_fast_nms() -> None:
    boxes, classes, scores, count = run()
    # a0 (0.9) suppresses a1 (IoU 0.905 > 0.5); a2 keeps a3 (IoU 0.43).
    np.testing.assert_allclose(boxes[0], BOXES[[0, 2, 3]], rtol=1e-6)
    np.testing.assert_array_equal(classes[0], [0, 1, 1])
    np.testing.assert_allclose(scores[0], [0.9, 0.75, 0.6], rtol=1e-6)
    assert count.tolist() == [3.0]
    # IoU threshold 0.4 now also suppresses a3; the last row stays empty.
    boxes, classes, scores, count = run(nmsIoUThreshold=0.4)
    np.testing.assert_allclose(boxes[0], [BOXES[0], BOXES[2], [0, 0, 0, 0]], rtol=1e-6)
    np.testing.assert_allclose(scores[0], [0.9, 0.75, 0.0], rtol=1e-6)
    assert count.tolist() == [2.0]
    # Score threshold 0.7: a3 (0.6) is out before NMS; maxDetections 1 keeps a0 only.
    _, _, scores, count = run(nmsScoreThreshold=0.7)
    np.testing.assert_allclose(scores[0], [0.9, 0.75, 0.0], rtol=1e-6)
    _, classes, scores, count = run(maxDetections=1)
    assert scores.shape == (1, 1) and scores[0, 0] == np.float32(0.9) and count[0] == 1


def test_fast_nms_several_classes_per_box() -> None:
    boxes, classes, scores, count = run(maxClassesPerDetection=2, class_dtype=np.int32,
                                        count_dtype=np.int32)
    assert boxes.shape == (1, 6, 4) and classes.dtype == np.int32 and count.dtype == np.int32
    np.testing.assert_allclose(boxes[0], BOXES[[0, 0, 2, 2, 3, 3]], rtol=1e-6)
    np.testing.assert_array_equal(classes[0], [0, 1, 1, 0, 1, 0])
    np.testing.assert_allclose(scores[0], [0.9, 0.1, 0.75, 0.2, 0.6, 0.05], rtol=1e-6)
    assert count.tolist() == [3]
    # More classes per box than classes: the rows of the missing ones stay empty.
    _, classes, scores, _ = run(scores=SCORES[:, :2], numClasses=1, maxClassesPerDetection=2)
    np.testing.assert_allclose(scores[0], [0.9, 0.0, 0.0, 0.0, 0.0, 0.0], rtol=1e-6)


def test_regular_nms() -> None:
    boxes, classes, scores, count = run(useRegularNms=True, detectionsPerClass=2)
    # class 0: a0 selected, a1 suppressed; class 1: a2 then a1 (limit 2, a3 dropped).
    np.testing.assert_allclose(boxes[0], BOXES[[0, 2, 1]], rtol=1e-6)
    np.testing.assert_array_equal(classes[0], [0, 1, 1])
    np.testing.assert_allclose(scores[0], [0.9, 0.75, 0.7], rtol=1e-6)
    assert count.tolist() == [3.0]
    _, classes, scores, count = run(useRegularNms=True, detectionsPerClass=2, maxDetections=2)
    np.testing.assert_allclose(scores[0], [0.9, 0.75], rtol=1e-6)
    # detectionsPerClass unset (100): class 1 keeps a2, a1 and a3; the best 4 overall.
    _, classes, scores, count = run(useRegularNms=True, maxDetections=4)
    np.testing.assert_allclose(scores[0], [0.9, 0.75, 0.7, 0.6], rtol=1e-6)
    np.testing.assert_array_equal(classes[0], [0, 1, 1, 1])
    assert count.tolist() == [4.0]


def test_ties_keep_the_lower_anchor_and_class() -> None:
    scores = np.array([[0.5, 0.5], [0.5, 0.5], [0.5, 0.5], [0.1, 0.1]], np.float32)
    _, classes, _, _ = run(scores=scores, numClasses=2, maxClassesPerDetection=2,
                           nmsIoUThreshold=1.0, maxDetections=2)
    np.testing.assert_array_equal(classes[0], [0, 1, 0, 1])  # no background column here
    boxes, classes, _, _ = run(scores=scores, numClasses=2, useRegularNms=True,
                               nmsIoUThreshold=1.0, maxDetections=4)
    np.testing.assert_allclose(boxes[0], BOXES[[0, 1, 2, 0]], rtol=1e-6)
    np.testing.assert_array_equal(classes[0], [0, 0, 0, 1])


def test_decoding_and_batches() -> None:
    anchors = np.array([[1.0, 1.0, 2.0, 4.0], [5.0, 5.0, 1.0, 1.0]], np.float32)
    enc = np.array([[[1.0, -2.0, 5 * math.log(2.0), 0.0, 9.0], [0, 0, 0, 0, 0]],
                    [[0, 0, 0, 0, 0], [0.0, 10.0, 0.0, 5 * math.log(3.0), 0.0]]], np.float32)
    scores = np.array([[[0.9], [0.0]], [[0.0], [0.8]]], np.float32)
    node, arrays = dpp(enc, scores, anchors, numClasses=1, maxDetections=1,
                       nmsScoreThreshold=0.5)
    boxes, classes, out_scores, count = run_node(node, arrays)
    # yc = 1/10*2 + 1 = 1.2, xc = -2/10*4 + 1 = 0.2, h = 2*2 = 4, w = 4.
    np.testing.assert_allclose(boxes[0, 0], [-0.8, -1.8, 3.2, 2.2], rtol=1e-5)
    # yc = 5, xc = 10/10*1 + 5 = 6, h = 1, w = 3.
    np.testing.assert_allclose(boxes[1, 0], [4.5, 4.5, 5.5, 7.5], rtol=1e-5)
    np.testing.assert_allclose(out_scores[:, 0], [0.9, 0.8], rtol=1e-6)
    assert count.tolist() == [1.0, 1.0]


def test_empty_result_and_dynamic_anchors() -> None:
    _, _, scores, count = run(nmsScoreThreshold=0.95)
    assert count.tolist() == [0.0] and not scores.any()
    node, arrays = dpp(Declared(np.zeros((1, 4, 4), np.float32), (1, -1, 4)),
                       Declared(SCORES[None], (1, -1, 3)), Declared(ANCHORS, (-1, 4)))
    kernel = create_kernel(node)
    assert kernel.infer_shapes([(1, -1, 4), (1, -1, 3), (-1, 4)])[0] == (1, 3, 4)
    _, _, scores, _ = run_node(node, arrays, kernel)
    np.testing.assert_allclose(scores[0], [0.9, 0.75, 0.6], rtol=1e-6)
    bad = [arrays[0], arrays[1], arrays[2][:3]]
    expect_error(NNRT_INVALID_SHAPE, lambda: run_node(node, bad, kernel))


@pytest.mark.parametrize("attrs,code", [
    (dict(scale=[10.0, 10.0, 5.0]), NNRT_INVALID_NODE),
    (dict(scale=[10.0, 0.0, 5.0, 5.0]), NNRT_INVALID_NODE),
    (dict(nmsIoUThreshold=1.5), NNRT_INVALID_NODE),
    (dict(maxDetections=0), NNRT_INVALID_NODE),
    (dict(numClasses=0), NNRT_INVALID_NODE),
    (dict(numClasses=5), NNRT_INVALID_NODE),  # scores have 3 columns
    (dict(detectionsPerClass=-1), NNRT_INVALID_NODE),
    (dict(maxClassesPerDetection=-1), NNRT_INVALID_NODE),
    (dict(outQuantized=True), NNRT_UNSUPPORTED_OP),
])
def test_bad_attributes(attrs, code) -> None:
    node, _ = dpp(np.zeros((1, 4, 4), np.float32), SCORES[None], ANCHORS, **attrs)
    expect_error(code, lambda: create_kernel(node))


def test_bad_inputs() -> None:
    enc = np.zeros((1, 4, 4), np.float32)
    for args in [(enc[..., :3], SCORES[None], ANCHORS), (enc, SCORES, ANCHORS),
                 (enc, SCORES[None], ANCHORS[:3]), (enc, SCORES[None], ANCHORS[:, :3])]:
        node, _ = dpp(*args)
        expect_error(NNRT_INVALID_NODE, lambda: create_kernel(node))
    node, _ = dpp(enc.astype(np.uint8), SCORES[None].astype(np.uint8), ANCHORS.astype(np.uint8))
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_kernel(node))
    node, _ = dpp(enc, SCORES[None].astype(np.float16), ANCHORS)
    expect_error(NNRT_UNSUPPORTED_OP, lambda: create_kernel(node))
    node, _ = dpp(enc, SCORES[None], ANCHORS, class_dtype=np.bool_)
    expect_error(NNRT_INVALID_NODE, lambda: create_kernel(node))
    node, _ = dpp(enc, SCORES[None], ANCHORS)
    node = dataclasses.replace(node, outputs=node.outputs[:3])
    expect_error(NNRT_INVALID_NODE, lambda: create_kernel(node))
    node, _ = dpp(enc, SCORES[None], ANCHORS)
    node = dataclasses.replace(node, outputs=(tensor_spec(3, np.float16, ()),) + node.outputs[1:])
    expect_error(NNRT_INVALID_NODE, lambda: create_kernel(node))
