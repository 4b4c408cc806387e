"""Type conversions beyond Cast: CastLike, a Cast to the element type of its second input
(only that input's type is read, never its values)."""

from __future__ import annotations

from typing import Any

import numpy as np

from nnrt.client.api.dtypes import _OH_TYPES

from ..importer import _handles, _Importer
from ..loading import OnnxImportError
from ..values import _Attrs, _Value


@_handles("CastLike")
def _cast_like(im: _Importer, node: Any, a: _Attrs) -> None:
    a.get("saturate")  # float8 targets only, which are refused below
    x = im.need(node, 0)
    target = im.dtype(node.input[1], node)
    if target not in _OH_TYPES:
        raise OnnxImportError(f"target type {target} has no OH_NN data type", node)
    out = node.output[0]
    if target == x.dtype:
        im.alias(out, x)
        return
    if x.const is not None:  # a constant cast to the type of a computed tensor
        value = np.asarray(x.const).astype(target)
        im.values[out] = _Value(tuple(value.shape), value.dtype, const=value)
        return
    im.op(node, "CAST", [im.view(x, x.perm), np.asarray([int(_OH_TYPES[target])], np.int32)],
          out, x.perm, dtype=target)
