"""What every section works with: the driver under test, its private runtime directory, a
session with it, the report, and `check` — one verdict, timed, an unexpected exception
turned into a failure that names it."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from nnrt.client.core.driver import DriverClient
from nnrt.common.hdi_model import HdiModelBuilder
from nnrt.protos import hdi_types_pb2 as ht

from .driver_process import DriverProcess
from .models import code_text
from .report import FAIL, PASS, SKIP, Check, Report

log = logging.getLogger(__name__)


class CheckFailed(AssertionError):
    """A check's verdict is fail: `detail` says what was seen; `reproducer` how to see it."""

    def __init__(self, detail: str, reproducer: dict | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.reproducer = reproducer


class CheckSkipped(Exception):
    """The check does not apply (the driver says it lacks the feature; --quick)."""


def expect(condition: bool, detail: str, reproducer: dict | None = None) -> None:
    if not condition:
        raise CheckFailed(detail, reproducer)


def expect_code(got: int, want: int, what: str, reason: str = "") -> None:
    """The driver answered `what` with `got`; the spec's code is `want`."""
    if got != want:
        raise CheckFailed(f"{what}: answered {code_text(got, reason)}, expected "
                          f"{code_text(want)}")


@dataclass
class Outcome:
    """What `Context.check` yields: set `.detail` to say what passed."""

    detail: str = ""


@dataclass
class Context:
    kind: str
    options: list[str]
    runtime: Any  # pathlib.Path of the private runtime directory
    report: Report
    quick: bool = False
    progress: Callable[[str], None] = lambda _line: None
    driver: DriverProcess | None = None
    client: DriverClient | None = None
    capabilities: dict[str, bool] = field(default_factory=dict)
    # The config every model but the operators' is prepared with: enableFloat16 for a device
    # that computes no float32 (an NPU), else the default (runner._base_config).
    base_config: ht.ModelConfig = field(default_factory=ht.ModelConfig)
    extra_drivers: list[DriverProcess] = field(default_factory=list)

    def config(self, **fields: Any) -> ht.ModelConfig:
        """The base config with these fields set."""
        config = ht.ModelConfig()
        config.CopyFrom(self.base_config)
        for name, value in fields.items():
            setattr(config, name, value)
        return config

    def start_driver(self, name: str, extra: list[str] | None = None,
                     runtime: Any = None) -> DriverProcess:
        """Another instance of the driver under test (killed at the end whatever happens)."""
        process = DriverProcess(self.kind, self.options, runtime or self.runtime, name, extra)
        self.extra_drivers.append(process)
        return process.start()

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        for process in [*self.extra_drivers, self.driver]:
            if process is not None:
                process.kill()
        self.extra_drivers.clear()

    @contextlib.contextmanager
    def check(self, section: str, name: str, *, required: bool = True,
              reproducer: dict | None = None) -> Iterator[Outcome]:
        """One check: pass unless the body raises CheckFailed (fail), CheckSkipped (skip) or
        anything else (fail, naming the exception)."""
        outcome = Outcome()
        started = time.monotonic()
        status, detail, repro = PASS, "", reproducer
        try:
            yield outcome
            detail = outcome.detail
        except CheckFailed as exc:
            status, detail = FAIL, exc.detail
            repro = exc.reproducer or reproducer
        except CheckSkipped as exc:
            status, detail = SKIP, str(exc)
        except Exception as exc:  # the driver's misbehaviour may surface as anything
            log.debug("check %s/%s raised", section, name, exc_info=True)
            status, detail = FAIL, f"{type(exc).__name__}: {exc}"
        seconds = time.monotonic() - started
        self.report.add(Check(section, name, status, detail, repro, required, seconds))
        counts = self.report.counts(section)
        self.progress(f"{section}: {counts[PASS]} passed, {counts[FAIL]} failed, "
                      f"{counts[SKIP]} skipped — {name}")

    def skip(self, section: str, name: str, why: str) -> None:
        self.report.add(Check(section, name, SKIP, why))


def add_model(n: int = 4) -> HdiModelBuilder:
    """y = x + w, float32 [n]: the model every interface check runs."""
    import numpy as np

    from nnrt.protos import node_attrs_pb2 as na

    b = HdiModelBuilder("conformance-add")
    x = b.input("x", np.float32, [n])
    w = b.constant("w", np.arange(n, dtype=np.float32))
    y = b.tensor("y", np.float32, [n])
    b.node(na.NODE_TYPE_ADD_FUSION, [x, w], [y])
    b.mark_outputs(y)
    return b


def prepare(client: DriverClient, builder: HdiModelBuilder,
            config: ht.ModelConfig | None = None) -> tuple[int, int, str]:
    """PrepareModel of a builder's model: (code, preparedModelId, reason)."""
    with builder.packed(client) as model:
        reply = client.prepare_model(model, config)
    return reply.returnCode, reply.preparedModelId, reply.reason


def release(client: DriverClient, model_id: int) -> None:
    if model_id and client.alive:
        client.release_prepared_model(model_id)


__all__ = ["CheckFailed", "CheckSkipped", "Context", "expect", "expect_code", "add_model",
           "prepare", "release"]
