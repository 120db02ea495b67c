"""The doctor's report: a line per check for people (the fix under each failure), or JSON for scripts."""

from __future__ import annotations

import json
from typing import Any

from tfk8s.doctor.checkup import Report
from tfk8s.doctor.findings import Verdict

WIDTH = max(len(v.value) for v in Verdict)


def text(report: Report) -> list[str]:
    version = ".".join(map(str, report.version)) if report.version else "version unknown"
    lines = [f"tfk8s doctor: {report.server} (Kubernetes {version}) as {report.identity}, for {report.source}"]
    for f in report.findings:
        lines.append(f"  {f.verdict.value:<{WIDTH}}  {f.check}: {f.detail}")
        if f.fix and f.verdict is not Verdict.PASSED:
            lines.append(f"  {'':<{WIDTH}}  fix: {f.fix}")
    counts = {v: sum(1 for f in report.findings if f.verdict is v) for v in Verdict}
    tally = ", ".join(f"{n} {v.value}" for v, n in counts.items() if n)
    verdict = "ready for a tfk8s platform" if report.ready else "not ready: every required check must pass"
    lines.append(f"{tally} in {report.seconds:g} s: {verdict}")
    return lines


def as_json(report: Report) -> dict[str, Any]:
    return {
        "server": report.server,
        "version": ".".join(map(str, report.version)) if report.version else None,
        "identity": report.identity,
        "settings": report.source,
        "ready": report.ready,
        "seconds": report.seconds,
        "checks": [
            {
                "check": f.check,
                "verdict": f.verdict.value,
                "required": f.required,
                "detail": f.detail,
                "fix": f.fix,
                "seconds": f.seconds,
            }
            for f in report.findings
        ],
    }


def dumps(report: Report) -> str:
    return json.dumps(as_json(report), indent=2)
