"""DetectionPostProcess: SSD box decoding and non-maximum suppression, TensorFlow Lite's
TFLite_Detection_PostProcess semantics (the operator MindSpore Lite, and so NNRt, carries).

Inputs: box encodings [B, A, >=4] (ty, tx, th, tw; extra values per box are ignored),
class scores [B, A, numClasses (+1 background)], anchors [A, 4] (yCenter, xCenter, h, w).
Outputs (fixed size M = maxDetections * maxClassesPerDetection rows per image): boxes
[B, M, 4] (yMin, xMin, yMax, xMax), classes [B, M], scores [B, M], numDetections [B].

* Decoding with scale = [y, x, h, w]: yc = ty / y * ha + ya; xc = tx / x * wa + xa;
  h = exp(th / h) * ha; w = exp(tw / w) * wa; box = (yc - h/2, xc - w/2, yc + h/2, xc + w/2).
* Scores: when the score tensor has numClasses + 1 columns the first is the background and
  is skipped (label offset 1); reported class indices count from the first real class.
* Single-class NMS (both modes): boxes with score >= nmsScoreThreshold, by decreasing score
  (stable: ties keep the lower anchor first), greedily selected while suppressing every later
  box whose IoU with a selected one is > nmsIoUThreshold (IoU 0 when either box has no
  area), up to a limit.
* Fast (useRegularNms false): each anchor's classes sorted by decreasing score (ties: lower
  class first); NMS on each anchor's best score, limit maxDetections; row
  i * maxClassesPerDetection + j holds the i-th selected box with its j-th best class, for
  j < min(maxClassesPerDetection, numClasses). numDetections = number of selected boxes.
* Regular (useRegularNms true): NMS per class with limit detectionsPerClass; the union,
  sorted by decreasing score (stable: ties keep the lower class, then NMS order), gives the
  first maxDetections rows. numDetections = rows filled.
* Unfilled rows are 0 (boxes, classes and scores).

Decisions where the spec is silent: scale must hold 4 positive values; nmsIoUThreshold must
lie in [0, 1]; maxDetections >= 1 and numClasses >= 1 are required; detectionsPerClass 0
(proto3's unset) means TFLite's default 100 and maxClassesPerDetection 0 means 1; inputSize
and format are not used (the tensors are not images); outQuantized (quantised outputs) is
unsupported, and so are non-float inputs (dequantise them first). Boxes, scores and anchors
share one float dtype, which the box and score outputs carry; the class and count outputs
may be any float or integer type. Batches are processed one at a time; NMS loops over the
selected boxes only (at most the limit), each step vectorised over all candidates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from nnrt.hdi.reference.kernel import Kernel, invalid, register, unsupported
from nnrt.hdi.reference.ops._common import (
    FLOAT_DTYPES,
    NUMERIC_DTYPES,
    bad_shape,
    check_declared_shapes,
    require_unquantised,
    same_dim,
)
from nnrt.hdi.reference.ops.op_topk import descending_order
from nnrt.protos import node_attrs_pb2 as na
from nnrt.hdi.graph import NodeSpec, Shape

DEFAULT_DETECTIONS_PER_CLASS = 100  # TFLite's value when the option is absent


def iou_row(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """IoU of one [4] box with [n, 4] boxes (yMin, xMin, yMax, xMax); 0 without area."""
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    inter_h = np.maximum(np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0]), 0)
    inter_w = np.maximum(np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1]), 0)
    inter = inter_h * inter_w
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / (area + areas - inter)
    return np.where((area > 0) & (areas > 0), iou, 0.0)


def non_max_suppression(boxes: np.ndarray, scores: np.ndarray, score_threshold: float,
                        iou_threshold: float, limit: int) -> np.ndarray:
    """Anchor indices selected by greedy single-class NMS, in selection order."""
    keep = np.flatnonzero(scores >= score_threshold)
    order = keep[np.argsort(-scores[keep], kind="stable")]
    candidates = boxes[order]
    active = np.ones(order.size, dtype=bool)
    selected: list[int] = []
    while len(selected) < limit:  # one iteration per selected box
        remaining = np.flatnonzero(active)
        if remaining.size == 0:
            break
        first, rest = remaining[0], remaining[1:]
        selected.append(int(order[first]))
        active[first] = False
        active[rest[iou_row(candidates[first], candidates[rest]) > iou_threshold]] = False
    return np.array(selected, dtype=np.intp)


@register(na.NODE_TYPE_DETECTION_POST_PROCESS)
class DetectionPostProcess(Kernel):
    def __init__(self, node: NodeSpec) -> None:
        super().__init__(node)
        self.expect_counts(3, 4)
        require_unquantised(node)
        attrs = node.attrs
        if attrs.outQuantized:
            raise unsupported(node, "quantised outputs (outQuantized)")
        dtypes = {t.dtype for t in node.inputs}
        if len(dtypes) != 1 or not dtypes <= FLOAT_DTYPES:
            raise unsupported(node, f"inputs of dtypes {sorted(str(d) for d in dtypes)}: one "
                                    f"float dtype is computed")
        (self.dtype,) = dtypes
        boxes_out, classes_out, scores_out, count_out = node.outputs
        for name, out in (("boxes", boxes_out), ("scores", scores_out)):
            if out.dtype != self.dtype:
                raise invalid(node, f"{name} output dtype {out.dtype} differs from the "
                                    f"inputs' {self.dtype}")
        for name, out in (("classes", classes_out), ("numDetections", count_out)):
            if out.dtype not in NUMERIC_DTYPES:
                raise invalid(node, f"{name} output must be numeric, is {out.dtype}")
        scale = [float(v) for v in attrs.scale]
        if len(scale) != 4 or not all(math.isfinite(v) and v > 0 for v in scale):
            raise invalid(node, f"scale must hold 4 positive values [y, x, h, w], is {scale}")
        self.scale = np.array(scale)
        self.iou = float(attrs.nmsIoUThreshold)
        if not 0.0 <= self.iou <= 1.0:
            raise invalid(node, f"nmsIoUThreshold {self.iou} is not in [0, 1]")
        self.score_threshold = float(attrs.nmsScoreThreshold)
        if math.isnan(self.score_threshold):
            raise invalid(node, "nmsScoreThreshold is NaN")
        self.max_detections = int(attrs.maxDetections)
        self.num_classes = int(attrs.numClasses)
        if self.max_detections < 1 or self.num_classes < 1:
            raise invalid(node, f"maxDetections {self.max_detections} and numClasses "
                                f"{self.num_classes} must be >= 1")
        if attrs.detectionsPerClass < 0 or attrs.maxClassesPerDetection < 0:
            raise invalid(node, "detectionsPerClass and maxClassesPerDetection must be >= 0")
        self.per_class = int(attrs.detectionsPerClass) or DEFAULT_DETECTIONS_PER_CLASS
        self.classes_per_box = int(attrs.maxClassesPerDetection) or 1
        self.regular = bool(attrs.useRegularNms)
        self.rows = self.max_detections * self.classes_per_box
        shapes = [t.shape for t in node.inputs]
        for name, shape, rank in zip(("box encodings", "scores", "anchors"), shapes, (3, 3, 2)):
            if len(shape) != rank:
                raise invalid(node, f"{name} must be {rank}-D, has shape {list(shape)}")
        check_declared_shapes(self)

    def infer_shapes(self, input_shapes: Sequence[Shape]) -> list[Shape]:
        node = self.node
        boxes, scores, anchors = (tuple(s) for s in input_shapes)
        if len(boxes) != 3 or len(scores) != 3 or len(anchors) != 2:
            raise bad_shape(node, "box encodings and scores must be 3-D, anchors 2-D")
        batch = same_dim(node, boxes[0], scores[0], "batch of boxes vs scores")
        count = same_dim(node, boxes[1], scores[1], "anchors of boxes vs scores")
        same_dim(node, count, anchors[0], "anchor count")
        same_dim(node, anchors[1], 4, "anchor size")
        if boxes[2] != -1 and boxes[2] < 4:
            raise bad_shape(node, f"box encodings need 4 values per box, have {boxes[2]}")
        if scores[2] not in (-1, self.num_classes, self.num_classes + 1):
            raise bad_shape(node, f"scores have {scores[2]} classes for numClasses "
                                  f"{self.num_classes} (+1 background)")
        return [(batch, self.rows, 4), (batch, self.rows), (batch, self.rows), (batch,)]

    def _decode(self, encodings: np.ndarray, anchors: np.ndarray) -> np.ndarray:
        t = encodings[:, :4].astype(np.float64) / self.scale
        ya, xa, ha, wa = anchors.astype(np.float64).T
        yc = t[:, 0] * ha + ya
        xc = t[:, 1] * wa + xa
        with np.errstate(over="ignore"):
            half_h = 0.5 * np.exp(t[:, 2]) * ha
            half_w = 0.5 * np.exp(t[:, 3]) * wa
        return np.stack([yc - half_h, xc - half_w, yc + half_h, xc + half_w], axis=1)

    def execute(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        self.infer_shapes([a.shape for a in inputs])
        encodings, scores, anchors = inputs
        batch = encodings.shape[0]
        offset = scores.shape[2] - self.num_classes
        out_boxes = np.zeros((batch, self.rows, 4), dtype=self.dtype)
        out_classes = np.zeros((batch, self.rows), dtype=self.node.outputs[1].dtype)
        out_scores = np.zeros((batch, self.rows), dtype=self.dtype)
        counts = np.zeros(batch, dtype=self.node.outputs[3].dtype)
        for b in range(batch):  # images one at a time
            # Boxes rounded to the tensor type first, as the outputs carry them.
            boxes = self._decode(encodings[b], anchors).astype(self.dtype).astype(np.float64)
            class_scores = scores[b, :, offset:].astype(np.float64)
            if self.regular:
                anchor, label, value = self._regular(boxes, class_scores)
                rows = np.arange(anchor.size)
                counts[b] = anchor.size
            else:
                anchor, label, value, rows, counts[b] = self._fast(boxes, class_scores)
            out_boxes[b, rows] = boxes[anchor]
            out_classes[b, rows] = label
            out_scores[b, rows] = value
        return [out_boxes, out_classes, out_scores, counts]

    def _fast(self, boxes: np.ndarray, class_scores: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
        """(anchor, class, score, output row) of every filled row, and the box count."""
        per_box = min(self.classes_per_box, self.num_classes)
        top = descending_order(class_scores, axis=1)[:, :per_box]  # [A, per_box]
        best = np.take_along_axis(class_scores, top[:, :1], axis=1)[:, 0]
        selected = non_max_suppression(boxes, best, self.score_threshold, self.iou,
                                       self.max_detections)
        anchor = np.repeat(selected, per_box)
        col = np.tile(np.arange(per_box), selected.size)
        label = top[anchor, col]
        rows = np.repeat(np.arange(selected.size) * self.classes_per_box, per_box) + col
        return anchor, label, class_scores[anchor, label], rows, selected.size

    def _regular(self, boxes: np.ndarray, class_scores: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(anchor, class, score) of the rows, best first."""
        anchors, labels = [], []
        for c in range(self.num_classes):  # one NMS per class
            selected = non_max_suppression(boxes, class_scores[:, c], self.score_threshold,
                                           self.iou, self.per_class)
            anchors.append(selected)
            labels.append(np.full(selected.size, c, dtype=np.intp))
        anchor, label = np.concatenate(anchors), np.concatenate(labels)
        value = class_scores[anchor, label]
        order = np.argsort(-value, kind="stable")[:self.max_detections]
        return anchor[order], label[order], value[order]
