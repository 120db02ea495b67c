"""bench/program_import.py keeps measuring: its child processes import the boot's modules by path
in a string, which a move of the package does not see (one did)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_program_import_benchmark_runs_and_reports_each_way() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "program_import.py"), "--repeat", "1"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "ms" not in line.split("|")[1]]
    assert len([r for r in rows if "thresholds" in r]) == 3, done.stdout
