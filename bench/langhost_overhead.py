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

With `--baseline REV`, then, in a loop of their own, a no-change `pulumi preview` and `pulumi up`
through the language host as of REV (hack/langhost at that revision), alternating with this tree's: a
directory first on PATH holds a `pulumi-language-python` that starts that revision's host with
the toolchain's host virtualenv (the CLI looks for its language host on PATH before its own
directory). Same CLI, program, state, cluster and provider; only the host differs.

    make tools && .venv/bin/python bench/langhost_overhead.py [--repeat 5] [--baseline REV]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "infra"), str(ROOT / "lab")]

import toolenv  # noqa: E402


def project() -> Path:
    work = toolenv.project_copy(Path(tempfile.mkdtemp(prefix="tfk8s-bench-host-")))
    os.environ["PULUMI_BACKEND_URL"] = f"file://{work / 'state'}"
    return work


def pulumi(work: Path, *args: str, stack: str = "dev", host: Path | None = None) -> float:
    """`host`: a directory from `toolenv.language_host`, first on PATH, where the CLI looks for its language host first."""
    env = {**os.environ, "PATH": f"{host}{os.pathsep}{os.environ['PATH']}"} if host else None
    started = time.perf_counter()
    subprocess.run(
        ["pulumi", *args, "--stack", stack, "--non-interactive", "--color", "never"],
        cwd=work,
        check=True,
        capture_output=True,
        env=env,
    )
    return time.perf_counter() - started


def automation_preview(work: Path) -> float:
    """Child mode: preview through the Automation API with the program inline; prints Stack.preview()'s seconds."""
    import pulumi.automation as auto
    from tfk8s import gc_policy

    gc_policy.use_evaluation_thresholds()  # as the entry point does, before the program's imports
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


def compare(repeat: int, baseline: str | None) -> None:
    work = project()
    stacks = ("platform-dev", "tenant-alice", "dev")  # each builds on the one before
    for stack in stacks:
        subprocess.run(["pulumi", "stack", "init", stack, "--non-interactive"], cwd=work, check=True, capture_output=True)
        pulumi(work, "up", "--yes", "--skip-preview", stack=stack)
    old_host = toolenv.language_host(baseline) if baseline else None
    host, whole, call = [], [], []
    ups: list[float] = []
    old_previews: list[float] = []
    old_ups: list[float] = []
    try:
        pulumi(work, "preview")  # warm the page cache for both sides
        for _ in range(repeat):
            host.append(pulumi(work, "preview"))
            total, inner = timed_automation(work)
            whole.append(total)
            call.append(inner)
        # The hosts compared in a loop of their own: an Automation API process between them (a
        # Python process importing the program and the SDK's automation) moved them by ~0.1 s.
        for _ in range(repeat if old_host else 0):
            ups.append(pulumi(work, "up", "--yes", "--skip-preview"))
            old_ups.append(pulumi(work, "up", "--yes", "--skip-preview", host=old_host))
            old_previews.append(pulumi(work, "preview", host=old_host))
            host.append(pulumi(work, "preview"))
    finally:
        for stack in reversed(stacks):
            pulumi(work, "destroy", "--yes", stack=stack)
        if old_host:
            shutil.rmtree(old_host)
    h, a, c = (statistics.median(x) for x in (host[:repeat], whole, call))
    print(f"medians of {repeat}, alternating; dev stack deployed, preview = no changes")
    print("| path | preview (s) | ratio host / Automation API |")
    print("|---|---:|---:|")
    print(f"| `pulumi preview` through tfk8s's language host | {h:.3f} | {h / a:.2f} |")
    print(f"| Automation API, whole command (`python -m tfk8s.automation preview dev` before) | {a:.3f} | 1.00 |")
    print(f"| Automation API, the `Stack.preview()` call alone | {c:.3f} | {h / c:.2f} |")
    if old_host:
        h, u = statistics.median(host[repeat:]), statistics.median(ups)
        oh, ou = statistics.median(old_previews), statistics.median(old_ups)
        print(f"\nthe language host as of {baseline} vs this tree's, alternating, medians of {repeat}")
        print("| host | no-change `pulumi preview` (s) | no-change `pulumi up` (s) |")
        print("|---|---:|---:|")
        print(f"| {baseline} | {oh:.3f} | {ou:.3f} |")
        print(f"| this tree | {h:.3f} | {u:.3f} |")
        print(f"| ratio this tree / {baseline} | {h / oh:.3f} | {u / ou:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline", help="a git revision: its language host beside this tree's")
    parser.add_argument("--automation-preview", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.automation_preview:
        print(automation_preview(args.automation_preview))
        return
    toolenv.time_as_a_user()
    with toolenv.throwaway_cluster("tfk8s-bench") as kubeconfig:
        os.environ.update(toolenv.exported({"KUBECONFIG": str(kubeconfig)}))
        compare(args.repeat, args.baseline)


if __name__ == "__main__":
    main()
