"""How long a program's process takes to end once its work is done: the interpreter's teardown,
which the CLI waits for, vs. tfk8s's language host ending it after its exit handlers
(hack/langhost/run_program.py `end_without_teardown`).

A fresh process imports what a program's process holds (the SDK alone, as Pulumi's floor program;
then tfk8s's program too), marks the time in its last exit handler and ends either way; the parent
notes when it is gone. Alternating, medians of `--repeat`, in one run. No cluster, no engine.

    .venv/bin/python bench/program_exit.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "lab")]

import toolenv  # noqa: E402

HOLDS = {
    "the SDK (Pulumi's floor program)": "import pulumi",
    "the SDK and tfk8s's program": "import pulumi\nimport tfk8s.program",
}
# The child: what a program's process holds, the time at its last exit handler, then the end.
CHILD = """
import atexit, sys, time
sys.path[:0] = [{infra!r}, {langhost!r}]
{holds}
from run_program import end_without_teardown
if {skip}:
    atexit.register(end_without_teardown, [0])  # first registered: runs last, as run_program does
atexit.register(lambda: sys.stderr.write(repr(time.time())))
"""


def ending(holds: str, skip: bool) -> float:
    code = CHILD.format(infra=str(ROOT / "infra"), langhost=str(ROOT / "hack" / "langhost"), holds=holds, skip=skip)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    gone = time.time()
    return gone - float(done.stderr.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    toolenv.time_as_a_user()
    os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"  # as the program's entry point sets it
    print(f"from the last exit handler to the process gone, medians of {args.repeat} (ms)\n")
    print("| the process holds | interpreter teardown | ended after the exit handlers | saved |")
    print("|---|---:|---:|---:|")
    for label, holds in HOLDS.items():
        runs: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeat):
            for skip in (False, True):
                runs[skip].append(ending(holds, skip))
        kept, skipped = (statistics.median(runs[s]) * 1000 for s in (False, True))
        print(f"| {label} | {kept:.1f} | {skipped:.1f} | {kept - skipped:.1f} |", flush=True)


if __name__ == "__main__":
    main()
