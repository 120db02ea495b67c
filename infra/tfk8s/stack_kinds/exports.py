"""What every kind of stack exports besides its own facts: its readiness from live status (`ready`,
`readiness`) and the release of tfk8s that wrote it (`tfk8sVersion`; docs/operations/releases.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from tfk8s.release import VERSION


def export_readiness(report: pulumi.Output[Mapping[str, Any]]) -> None:
    pulumi.export("ready", report.apply(lambda r: r["ready"]))
    pulumi.export("readiness", report)
    pulumi.export("tfk8sVersion", VERSION)
