"""The onnxruntime engine of the CPU driver (`nnrt-driver cpu --engine ort`, the default).

`lowering.py` is the framework (how a node becomes ONNX nodes), `ops/lower_*.py` the
lowerings by operator, `activation.py` the activation types, `engine.py` partitioning,
sessions and the optimised-model cache. The cores a run may use come from the host's run
scheduler (server/run_scheduler.py).
"""
