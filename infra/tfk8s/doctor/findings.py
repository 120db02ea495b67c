"""A check's verdict, what was seen and the fix: what every doctor check returns."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Verdict(enum.StrEnum):
    PASSED = "pass"
    FAILED = "fail"
    # The check could not be made (a probe pod that never ran, a read the credentials may not make):
    # never reported as a pass, and a required check not proven keeps the exit code non-zero.
    NOT_PROVEN = "not proven"
    # Worth knowing, not a reason to refuse the cluster (a quota larger than the nodes, say).
    ADVICE = "advice"


@dataclass(frozen=True, kw_only=True)
class Finding:
    check: str
    """A stable id for scripts (`--json`): `network-policy-deny`, `image:tensorflow`."""
    verdict: Verdict
    detail: str
    """What was seen: the evidence of a pass, the reason of a failure or why it is not proven."""
    fix: str | None = None
    """What to do about a failure (or a check not proven); None on a pass."""
    required: bool = True
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.PASSED or not self.required


def passed(check: str, detail: str, **kw: object) -> Finding:
    return Finding(check=check, verdict=Verdict.PASSED, detail=detail, **kw)  # type: ignore[arg-type]


def failed(check: str, detail: str, fix: str, **kw: object) -> Finding:
    return Finding(check=check, verdict=Verdict.FAILED, detail=detail, fix=fix, **kw)  # type: ignore[arg-type]


def not_proven(check: str, detail: str, fix: str | None = None, **kw: object) -> Finding:
    return Finding(check=check, verdict=Verdict.NOT_PROVEN, detail=detail, fix=fix, **kw)  # type: ignore[arg-type]


def advice(check: str, detail: str, fix: str | None = None) -> Finding:
    return Finding(check=check, verdict=Verdict.ADVICE, detail=detail, fix=fix, required=False)


def ready(findings: Iterable[Finding]) -> bool:
    """True only when every required check passed."""
    return all(f.ok for f in findings)
