"""bench/critical_path.py's reading of a trace: the moments it reports come from the right spans and
marks, the earliest of each, and a trace without a span it needs is an error that says so."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from critical_path import critical_path  # noqa: E402

ORIGIN = 1_800_000_000_000_000_000  # ns since the epoch
MS = 1_000_000


def export(service: str, *spans: tuple[str, int, int]) -> str:
    """One OTLP JSON export line, as `pulumi --otel-traces file://` writes it; times in ms after ORIGIN."""
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
                    "scopeSpans": [
                        {
                            "scope": {},
                            "spans": [
                                {"name": name, "startTimeUnixNano": str(ORIGIN + a * MS), "endTimeUnixNano": str(ORIGIN + b * MS)}
                                for name, a, b in spans
                            ],
                        }
                    ],
                }
            ]
        }
    )


def marks(at_ms: dict[str, int]) -> str:
    """The program's phases, as tfk8s.timings writes them; times in ms after ORIGIN."""
    return "\n".join(json.dumps({"phase": phase, "time": (ORIGIN + ms * MS) / 1e9, "pid": 1}) for phase, ms in at_ms.items())


@pytest.fixture
def trace(tmp_path: Path) -> tuple[Path, Path]:
    lines = [
        export("pulumi-cli", ("pulumi", 0, 600), ("pulumirpc.LanguageRuntime/Run", 170, 590)),
        # The provider's span of the same name starts earlier and ends first, and a provider span starts
        # before the CLI's first: the CLI's, which the engine waits on, count.
        export("pulumi-resource-provider", ("pulumirpc.ResourceProvider/Configure", 319, 430), ("early", -50, -40)),
        export(
            "pulumi-cli",
            ("pulumirpc.ResourceMonitor/Invoke", 320, 445),
            ("pulumirpc.ResourceProvider/Configure", 321, 440),
            ("pulumirpc.ResourceMonitor/RegisterResource", 490, 500),
            ("pulumirpc.ResourceMonitor/RegisterResource", 470, 520),
        ),
    ]
    (tmp_path / "trace.json").write_text("\n".join(lines) + "\n")
    (tmp_path / "marks.jsonl").write_text(marks({"start": 315, "import": 420, "declared": 465, "exit": 570}))
    return tmp_path / "trace.json", tmp_path / "marks.jsonl"


def test_the_moments_come_from_the_cli_s_spans_and_the_program_s_marks(trace: tuple[Path, Path]) -> None:
    got = critical_path(*trace)
    expected = {
        "the host's Run": 0.170,
        "the program's first line": 0.315,
        "the provider warm-up's invoke": 0.320,
        "the provider configured": 0.440,
        "the program's import done": 0.420,
        "its reads and declarations done": 0.465,
        "the first RegisterResource": 0.470,
        "the program's exit": 0.570,
        "the trace's end": 0.600,
        "slack: provider ready before the first registration": 0.030,
    }
    assert got == pytest.approx(expected, abs=1e-6)


def test_a_trace_without_the_provider_s_configure_names_the_span(trace: tuple[Path, Path]) -> None:
    path, marked = trace
    exports: list[dict[str, Any]] = [json.loads(line) for line in path.read_text().splitlines()]
    for export_ in exports:
        for resource in export_["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                scope["spans"] = [s for s in scope["spans"] if s["name"] != "pulumirpc.ResourceProvider/Configure"]
    path.write_text("\n".join(json.dumps(e) for e in exports) + "\n")
    with pytest.raises(SystemExit, match="no pulumirpc.ResourceProvider/Configure span from pulumi-cli"):
        critical_path(path, marked)
