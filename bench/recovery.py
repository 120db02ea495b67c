"""What a lost task costs a run on the real node, per mode and fault: medians of `--repeat` runs.

Runs the real node's fault tests `--repeat` times, each a whole pytest run with its own throwaway
clusters and real node: tests/e2e/test_real_training.py's between-graph run that loses its parameter
server's pod, its chief's, a worker's, its parameter server's container killed in place, then its
node; its seed-era script that loses its parameter server's pod; its in-graph run, driven by a
chief, that loses its parameter server's pod, its worker's, the chief's, then its parameter server's
container; and tests/e2e/test_real_queueing.py's run queued as a JobSet on a queueing platform
(preempted and admitted again first), which loses its parameter server's pod, a worker's, the
chief's, then its parameter server's container, and its in-graph run driven by a chief, queued as
a JobSet too, which loses its parameter server's pod, its worker's, the chief's, then its parameter
server's container; and tests/e2e/test_real_notebook.py's in-graph run driven from the tenant's
notebook, in her Jupyter on the node, which loses its parameter server's pod, then a worker's (the
other worker trains on meanwhile: its seconds are those to the worker's next pod serving).
Each fault is injected on the run's progress, never on a timer, and each test records what it
cost (tests/e2e/fault_record.py): the seconds from the fault until the run trains past the step it had
reached (a joining worker: until it trained a step), the step it resumed from, the steps lost, and
the phases of the task that started again, from its progress file (its pod back and its launcher
running, its trainer started, TensorFlow imported, its cluster formed).

The baseline, from the same runs: the issue's goal, 30 s plus that start's own TensorFlow import
(the import is the part tfk8s cannot shorten). The ratio is the median of the seconds to train
again over the median of that goal; at most 1.0 meets it.

    make tools real-node-deps && .venv/bin/python bench/recovery.py [--repeat 3]

Needs root (a real kubelet and containerd; `lab/realnode.sh check` says why not). About 17 minutes
a repeat.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "e2e")]

from fault_record import RECORD_ENV  # noqa: E402

TESTS = [
    "tests/e2e/test_real_training.py",
    "tests/e2e/test_real_queueing.py",
    "tests/e2e/test_real_notebook.py",
    "-k",
    "loses_its_ps or ps_is_lost or preempted_run",
]
GOAL_SECONDS = 30.0  # plus the start's own TensorFlow import
PHASES = ("pod_back", "trainer_started", "tensorflow_import", "cluster_formed")


def run_tests(records: Path) -> float:
    """One pytest run of the fault tests, recording into `records`; its seconds."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *TESTS, "-s", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env={**os.environ, RECORD_ENV: str(records)},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(f"the fault tests failed (rc {done.returncode}):\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}")
    return time.monotonic() - started


def median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def table(records: list[dict[str, Any]]) -> str:
    """Markdown: a row per mode and fault, medians over the runs."""
    rows: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for one in records:
        rows[one["mode"], one["fault"]].append(one)
    head = (
        "| mode | fault | runs | resumed from | steps lost | pod back (s) | trainer started (s) | TensorFlow import (s) "
        "| cluster formed (s) | training again (s) | goal: 30 s + import (s) | ratio |\n"
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    lines = [head]
    for (mode, fault), found in rows.items():
        phases = {name: median([f["phases"][name] for f in found]) for name in PHASES}
        again = median([f["training_again"] for f in found])
        goal = median([GOAL_SECONDS + (f["phases"]["tensorflow_import"] or 0.0) for f in found])
        assert again is not None and goal is not None
        lost = median([f["steps_lost"] for f in found])

        def seconds(value: float | None) -> str:
            return "-" if value is None else f"{value:.1f}"

        lines.append(
            f"| {mode} | {fault} | {len(found)} | {', '.join(str(f['resumed_from']) for f in found)} | {lost:g} "
            f"| {' | '.join(seconds(phases[name]) for name in PHASES)} | {again:.1f} | {goal:.1f} | {again / goal:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--records", type=Path, help="where the runs' records go (JSON lines; default: a scratch file)")
    parser.add_argument("--append", action="store_true", help="add to --records' earlier runs, and count them too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tfk8s-recovery-") as scratch:
        # Written as each fault is measured: a run that fails keeps what the earlier ones measured.
        records = args.records or Path(scratch) / "records.jsonl"
        if not (args.append and records.exists()):
            records.write_text("")
        for repeat in range(args.repeat):
            seconds = run_tests(records)
            print(f"run {repeat + 1} of {args.repeat}: {seconds:.0f} s", file=sys.stderr, flush=True)
        found = [json.loads(line) for line in records.read_text().splitlines()]
    print(table(found))


if __name__ == "__main__":
    main()
