"""`nnrt conformance`: a driver certified through the HDI alone.

* `runner` — one run: the driver started (`driver_process`), the sections in order, the report;
* one module per section: `interface`, `operators` (over the generated one-node `cases`,
  compared by `models` with the reference engine), `capabilities`, `recovery`, `limits`;
* `context` — what the sections share, and `check` (one verdict, timed);
* `report` — the summary, JSON and JUnit XML.

The CLI entry is client/commands/conformance.py.
"""
