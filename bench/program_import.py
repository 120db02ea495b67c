"""What importing tfk8s's program costs a program's process, three ways side by side: with
pydantic's plugin lookup, without it (tfk8s.entry.boot sets PYDANTIC_DISABLE_PLUGINS: the lookup
reads the entry points of every distribution in the virtualenv when the first model is built), and
without it under the program's garbage-collection thresholds (tfk8s.entry.boot sets
tfk8s.gc_policy's before the import: with Python's defaults the collector scans the import's
growing heap, pydantic's models and every module's classes, again and again, and none of it is
garbage).

A fresh process imports the SDK and what tfk8s.entry.boot imports before the program (not
timed), then `tfk8s.program` (timed), each way in turn, medians of `--repeat`, in one run. No
cluster, no engine.

    .venv/bin/python bench/program_import.py [--repeat 21]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "lab")]

import toolenv  # noqa: E402

CHILD = """
import sys, time
sys.path.insert(0, {infra!r})
import pulumi
from tfk8s import entry, gc_policy
if {thresholds!r}:
    gc_policy.use_evaluation_thresholds()
from tfk8s import timings
from tfk8s.kube import objects
from tfk8s.stack_kinds import outputs
started = time.perf_counter()
import tfk8s.program
print(time.perf_counter() - started)
"""
VARIABLE = "PYDANTIC_DISABLE_PLUGINS"
# (label, pydantic's plugin lookup, tfk8s.gc_policy's thresholds), in the order they were removed.
WAYS = (
    ("plugin lookup, Python's GC thresholds", True, False),
    ("no plugin lookup, Python's GC thresholds", False, False),
    ("no plugin lookup, tfk8s.gc_policy's thresholds (tfk8s.entry.boot)", False, True),
)


def import_seconds(plugins: bool, thresholds: bool) -> float:
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    if not plugins:
        env[VARIABLE] = "__all__"
    code = CHILD.format(infra=str(ROOT / "infra"), thresholds=thresholds)
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args()
    toolenv.time_as_a_user()
    runs: dict[str, list[float]] = {label: [] for label, _, _ in WAYS}
    for _ in range(args.repeat):
        for label, plugins, thresholds in WAYS:
            runs[label].append(import_seconds(plugins, thresholds))
    print(f"`import tfk8s.program`, medians of {args.repeat} (ms)\n")
    print("| way | ms | saved by the step |\n|---|---:|---:|")
    before = None
    for label, _, _ in WAYS:
        median = statistics.median(runs[label]) * 1000
        saved = "" if before is None else f"{before - median:.1f}"
        print(f"| {label} | {median:.1f} | {saved} |")
        before = median


if __name__ == "__main__":
    main()
