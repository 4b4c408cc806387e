"""The ONNX operators mapped beyond the importer's core (client/onnx_import/): one operator,
or a tight family, per module, each handler registered by op_type with the importer's
`_handles`, as onnx's reference evaluator registers its operators. Every mapping is exact:
the OH_NN operation that computes the operator's definition, or several composed where one
does not exist (each composition is the operator's own formula, evaluated in the input's
type); anything outside that raises OnnxImportError naming the node and why.

Importing this package registers them (nnrt.client.onnx_import's __init__ does)."""

from . import (activations, arithmetic, conversions, normalization, rearrange,  # noqa: F401
               reductions, scans, selection)
