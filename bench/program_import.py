"""What importing tfk8s's program costs a program's process with pydantic's plugin lookup and
without it (infra/__main__.py sets PYDANTIC_DISABLE_PLUGINS): the lookup reads the entry points of
every distribution in the virtualenv when the first model is built.

A fresh process imports the SDK and what infra/__main__.py imports before the program (not
timed), then `tfk8s.program` (timed), with the variable unset and set, alternating, medians of
`--repeat`, in one run. No cluster, no engine.

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
sys.path[:0] = [str(ROOT / "hack")]

import toolenv  # noqa: E402

CHILD = """
import sys, time
sys.path.insert(0, {infra!r})
import pulumi
from tfk8s import kube_objects, timings
started = time.perf_counter()
import tfk8s.program
print(time.perf_counter() - started)
"""
VARIABLE = "PYDANTIC_DISABLE_PLUGINS"


def import_seconds(plugins: bool) -> float:
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    if not plugins:
        env[VARIABLE] = "__all__"
    code = CHILD.format(infra=str(ROOT / "infra"))
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args()
    toolenv.time_as_a_user()
    runs: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(args.repeat):
        for plugins in runs:
            runs[plugins].append(import_seconds(plugins))
    looked_up, skipped = (statistics.median(runs[p]) * 1000 for p in (True, False))
    print(f"`import tfk8s.program`, medians of {args.repeat} (ms)\n")
    print("| pydantic's plugin lookup | without it | saved |\n|---:|---:|---:|")
    print(f"| {looked_up:.1f} | {skipped:.1f} | {looked_up - skipped:.1f} |")


if __name__ == "__main__":
    main()
