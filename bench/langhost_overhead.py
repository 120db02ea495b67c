"""The language host's overhead: `pulumi preview` of the dev stack through tfk8s's host vs the
Automation API path the project used before (`python -m tfk8s.automation preview dev`).

On a throwaway kwok cluster (`tfk8s-bench`, started and deleted here), the dev experiment (of the
tenant-alice tenant on platform-dev) is deployed once, then previewed `--repeat` times each way,
alternating, from the same project copy, state and cluster:
  - host: `pulumi preview --stack dev`, the plain CLI starting our `pulumi-language-python`,
    which runs the program in a child process with the project's virtualenv;
  - Automation API: a fresh Python process that builds a LocalWorkspace with the program inline
    and calls `Stack.preview()`, as the removed wrapper did (the CLI then runs with
    `--client`, the program in the calling process). Its `Stack.preview()` call alone is
    reported too.
Medians; ratio = host / Automation API (goal: <= 1.0).

    make tools && .venv/bin/python bench/langhost_overhead.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "infra"), str(ROOT / "hack")]

import toolenv  # noqa: E402


def project() -> Path:
    work = toolenv.project_copy(Path(tempfile.mkdtemp(prefix="tfk8s-bench-host-")))
    os.environ["PULUMI_BACKEND_URL"] = f"file://{work / 'state'}"
    return work


def pulumi(work: Path, *args: str, stack: str = "dev") -> float:
    started = time.perf_counter()
    subprocess.run(
        ["pulumi", *args, "--stack", stack, "--non-interactive", "--color", "never"], cwd=work, check=True, capture_output=True
    )
    return time.perf_counter() - started


def automation_preview(work: Path) -> float:
    """Child mode: preview through the Automation API with the program inline; prints Stack.preview()'s seconds."""
    import pulumi.automation as auto
    from tfk8s.program import main

    workspace = auto.LocalWorkspace(work_dir=str(work), program=main, pulumi_home=os.environ["PULUMI_HOME"])
    stack = auto.Stack.select("dev", workspace)
    started = time.perf_counter()
    stack.preview(color="never")
    return time.perf_counter() - started


def timed_automation(work: Path) -> tuple[float, float]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, __file__, "--automation-preview", str(work)], check=True, capture_output=True, text=True
    )
    return time.perf_counter() - started, float(done.stdout.strip().splitlines()[-1])


def compare(repeat: int) -> None:
    work = project()
    stacks = ("platform-dev", "tenant-alice", "dev")  # each builds on the one before
    for stack in stacks:
        subprocess.run(["pulumi", "stack", "init", stack, "--non-interactive"], cwd=work, check=True, capture_output=True)
        pulumi(work, "up", "--yes", "--skip-preview", stack=stack)
    host, whole, call = [], [], []
    try:
        pulumi(work, "preview")  # warm the page cache for both sides
        for _ in range(repeat):
            host.append(pulumi(work, "preview"))
            total, inner = timed_automation(work)
            whole.append(total)
            call.append(inner)
    finally:
        for stack in reversed(stacks):
            pulumi(work, "destroy", "--yes", stack=stack)
    h, a, c = (statistics.median(x) for x in (host, whole, call))
    print(f"medians of {repeat}, alternating; dev stack deployed, preview = no changes")
    print("| path | preview (s) | ratio host / Automation API |")
    print("|---|---:|---:|")
    print(f"| `pulumi preview` through tfk8s's language host | {h:.2f} | {h / a:.2f} |")
    print(f"| Automation API, whole command (`python -m tfk8s.automation preview dev` before) | {a:.2f} | 1.00 |")
    print(f"| Automation API, the `Stack.preview()` call alone | {c:.2f} | {h / c:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--automation-preview", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.automation_preview:
        print(automation_preview(args.automation_preview))
        return
    toolenv.time_as_a_user()
    with toolenv.throwaway_cluster("tfk8s-bench") as kubeconfig:
        os.environ.update(toolenv.exported({"KUBECONFIG": str(kubeconfig)}))
        compare(args.repeat)


if __name__ == "__main__":
    main()
