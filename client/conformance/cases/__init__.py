"""Generated one-node cases, per node type: small inputs, attributes and constants that the
reference engine accepts, as the kernel tests (tests/hdi/reference/ops) build them.

A `Case` is one node with its operands: run-time inputs (fed at Run) and constants (sent in
the model). Each generator takes a seeded `numpy.random.Generator` and returns its cases,
the most ordinary first (`--quick` runs the first few). A node type without a generator
here is reported as skipped by the operators section, never as passed.
"""

from . import elementwise, linear, movement, reductions, values  # noqa: F401 (each registers its generators)
from .base import GENERATORS, NHWC, Case, Operand, cases_for

__all__ = ["GENERATORS", "NHWC", "Case", "Operand", "cases_for"]
