"""The driver contract: everything a driver implements or uses, and nothing else.

A driver (ours in nnrt.drivers, or a vendor's package) imports from here and from
nnrt.common / nnrt.protos only — never from the host (nnrt.server) or another driver:

- `device`: the interface a driver implements (`Device`, `PreparedModel`, `Capabilities`,
  `PrepareConfig`, `BoundRun`);
- `graph`: the frozen, validated model a driver receives (`Graph`, `NodeSpec`,
  `TensorSpec`); `model_validation`: protobuf Model → `Graph`, the host's checks;
- `graph_cache`, `sealed_blob`, `cache_key`: the model-cache formats and their keyed seal;
- `memory_budget`, `memory_limits`: device-memory accounting and the default limits;
- `regions`: the host's notice before it unmaps a client's shared memory;
- `cores`: the cores the host's scheduler granted the run being computed;
- `registry`: the operator registry (kernels registered by `NodeType`);
- `reference`: the numpy reference engine — kernels (`reference/ops/op_*.py`), plan,
  float16 rewrite, shape inference and run memory (`reference/graph_checks.py`) — that
  every driver validates and infers shapes with, so one node means the same everywhere.

Layers: protos ← common ← hdi ← drivers ← server (the host); client ← common.
"""
