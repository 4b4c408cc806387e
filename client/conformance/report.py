"""Checks and their report: the readable summary, JSON for CI, JUnit XML (one testcase per
check)."""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

PASS, FAIL, SKIP = "pass", "fail", "skip"
SECTIONS = ("interface", "operators", "capabilities", "recovery", "limits")
FIRST_FAILURES = 5  # per section in the summary; --json and --junit carry them all


@dataclass
class Check:
    """One verdict: `name` says what was checked, `detail` what was seen, `reproducer` how
    to see it again (the node, its case, its operands), `required` whether it decides the
    exit code."""

    section: str
    name: str
    status: str
    detail: str = ""
    reproducer: dict[str, Any] | None = None
    required: bool = True
    seconds: float = 0.0


@dataclass
class Report:
    driver: str
    quick: bool
    device: dict[str, str] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    seconds: float = 0.0
    aborted: str = ""  # why the run stopped early (the driver never served, say)

    def add(self, check: Check) -> Check:
        self.checks.append(check)
        return check

    def counts(self, section: str | None = None) -> Counter[str]:
        return Counter(c.status for c in self.checks if section in (None, c.section))

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAIL and c.required]

    @property
    def passed(self) -> bool:
        return not self.aborted and not self.failures

    def finish(self) -> None:
        self.seconds = time.monotonic() - self.started

    # -- output ---------------------------------------------------------------------------

    def summary(self) -> str:
        lines = [f"nnrt conformance: driver {self.driver!r}"
                 f"{' (--quick)' if self.quick else ''}"]
        if self.device:
            lines.append("device: " + ", ".join(f"{k} {v}" for k, v in self.device.items()))
        if self.aborted:
            lines.append(f"ABORTED: {self.aborted}")
        lines.append("")
        lines.append(f"{'section':<14}{'pass':>6}{'fail':>6}{'skip':>6}")
        for section in SECTIONS:
            counts = self.counts(section)
            if not counts:
                continue
            lines.append(f"{section:<14}{counts[PASS]:>6}{counts[FAIL]:>6}{counts[SKIP]:>6}")
        total = self.counts()
        lines.append(f"{'total':<14}{total[PASS]:>6}{total[FAIL]:>6}{total[SKIP]:>6}")
        for section in SECTIONS:
            failed = [c for c in self.checks if c.section == section and c.status == FAIL]
            if not failed:
                continue
            lines.append("")
            lines.append(f"{section}: {len(failed)} failed" +
                         (f", the first {FIRST_FAILURES}:" if len(failed) > FIRST_FAILURES else ":"))
            for check in failed[:FIRST_FAILURES]:
                lines.append(f"  FAIL {check.name}{'' if check.required else ' (advisory)'}")
                if check.detail:
                    lines.append(f"       {check.detail}")
                if check.reproducer:
                    lines.append("       reproducer: " + _one_line(check.reproducer))
        lines.append("")
        verdict = "PASSED" if self.passed else "FAILED"
        lines.append(f"{verdict} in {self.seconds:.1f} s: {total[PASS]} passed, "
                     f"{total[FAIL]} failed, {total[SKIP]} skipped")
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {
            "driver": self.driver, "quick": self.quick, "passed": self.passed,
            "aborted": self.aborted or None, "seconds": round(self.seconds, 3),
            "device": self.device,
            "sections": {s: dict(self.counts(s)) for s in SECTIONS if self.counts(s)},
            "totals": dict(self.counts()),
            "checks": [asdict(c) for c in self.checks],
        }

    def junit(self) -> str:
        suites = ET.Element("testsuites", name="nnrt conformance", tests=str(len(self.checks)),
                            failures=str(self.counts()[FAIL]), time=f"{self.seconds:.3f}")
        for section in SECTIONS:
            checks = [c for c in self.checks if c.section == section]
            if not checks:
                continue
            counts = self.counts(section)
            suite = ET.SubElement(suites, "testsuite", name=f"conformance.{section}",
                                  tests=str(len(checks)), failures=str(counts[FAIL]),
                                  skipped=str(counts[SKIP]),
                                  time=f"{sum(c.seconds for c in checks):.3f}")
            for check in checks:
                case = ET.SubElement(suite, "testcase", classname=f"conformance.{section}",
                                     name=check.name, time=f"{check.seconds:.3f}")
                if check.status == FAIL:
                    failure = ET.SubElement(case, "failure", message=check.detail[:500])
                    failure.text = check.detail + (
                        "\nreproducer: " + json.dumps(check.reproducer, indent=1)
                        if check.reproducer else "")
                elif check.status == SKIP:
                    ET.SubElement(case, "skipped", message=check.detail[:500])
        if self.aborted:
            suite = ET.SubElement(suites, "testsuite", name="conformance.driver", tests="1",
                                  failures="0", errors="1")
            case = ET.SubElement(suite, "testcase", classname="conformance.driver", name="start")
            ET.SubElement(case, "error", message=self.aborted[:500]).text = self.aborted
        return ET.tostring(suites, encoding="unicode", xml_declaration=True)


def _one_line(reproducer: dict[str, Any]) -> str:
    text = json.dumps(reproducer, separators=(", ", ": "))
    return text if len(text) <= 600 else text[:600] + " ..."
