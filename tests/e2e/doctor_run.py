"""`tfk8s doctor` as a platform team runs it, for the e2e tests: the installed command in a process of
its own, against a kubeconfig, with a platform stack file written for the case. (Not in conftest.py:
pytest imports every test directory's conftest under the same module name.)"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from drivers import ROOT

import toolenv


@dataclass(frozen=True)
class Run:
    code: int
    report: dict[str, Any] | None
    stderr: str
    seconds: float

    def verdicts(self) -> dict[str, str]:
        return {c["check"]: c["verdict"] for c in (self.report or {}).get("checks", [])}

    def check(self, name: str) -> dict[str, Any]:
        return next(c for c in (self.report or {}).get("checks", []) if c["check"] == name)


def doctor(kubeconfig: Path, *args: str, timeout: float = 600) -> Run:
    """`tfk8s doctor --json ARGS` with KUBECONFIG, from the repository (its stacks/ for --stack NAME)."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "tfk8s.cli", "doctor", "--json", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    seconds = time.monotonic() - start
    report = json.loads(done.stdout) if done.stdout.strip() else None
    run = Run(done.returncode, report, done.stderr, seconds)
    # Each case's verdicts in the output of `pytest -s`, for the closing note's table.
    verdicts = ", ".join(f"{check} {verdict}" for check, verdict in run.verdicts().items()) or done.stderr.strip()
    print(f"\n[doctor] {' '.join(args)}: exit {run.code} in {seconds:.1f} s: {verdicts}")
    return run


def stack_file(directory: Path, platform: dict[str, Any], base: str = "platform-dev") -> Path:
    """A platform stack file: stacks/Pulumi.<base>.yaml's `tfk8s:platform` with `platform` merged over it."""
    config = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{base}.yaml").read_text())["config"]
    merged = _merge(copy.deepcopy(config["tfk8s:platform"]), platform)
    path = directory / "Pulumi.doctor.yaml"
    path.write_text(yaml.safe_dump({"config": {"tfk8s:kind": "platform", "tfk8s:platform": merged}}))
    return path


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    for key, value in over.items():
        base[key] = _merge(base.get(key) or {}, value) if isinstance(value, dict) else value
    return base


def sandboxes_kept(kubeconfig: Path) -> list[str]:
    """The doctor's sandbox namespaces in the cluster that are not being deleted (one whose deletion
    has begun is gone for the doctor: the namespace controller empties it)."""
    listed = subprocess.run(
        [
            toolenv.KUBECTL,
            "--kubeconfig",
            str(kubeconfig),
            "get",
            "namespaces",
            "-l",
            "app.kubernetes.io/managed-by=tfk8s-doctor",
            "-o",
            "json",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return [n["metadata"]["name"] for n in json.loads(listed.stdout)["items"] if not n["metadata"].get("deletionTimestamp")]
