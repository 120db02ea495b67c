"""The GitOps runner (tfk8s_gitops.engine.Pulumi) with a fake `pulumi` on PATH: an `up` the API
server refused only because the namespace's quota controller had just written the quota's status
runs once more, and its result counts both runs' changes; any other failure, and any other
command, runs once (docs/concepts/quotas.md)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from tfk8s_gitops import summary
from tfk8s_gitops.engine import QUOTA_STATUS_CONFLICT, Pulumi, Workspace
from tfk8s_gitops.pipeline import DONE, StepReport

REFUSAL = (
    'error: resource "urn:pulumi:t::tfk8s::kubernetes:core/v1:PersistentVolumeClaim::t-data" was not successfully '
    "created by the Kubernetes API server: Server-Side Apply field conflict detected. The resource managed by field "
    f'manager "pulumi-kubernetes" had an apply conflict: {QUOTA_STATUS_CONFLICT} "tfk8s-quota": the object has '
    "been modified; please apply your changes to the latest version and try again"
)

# Each call appends its arguments to calls.txt; a call's answer is the first line of answers.txt not
# yet used: "<exit code> <resources created> <stderr>".
FAKE = """#!/usr/bin/env python3
import json, sys
from pathlib import Path
here = Path(__file__).parent
calls = here / "calls.txt"
n = len(calls.read_text().splitlines()) if calls.exists() else 0
with calls.open("a") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n")
code, created, err = (here / "answers.txt").read_text().splitlines()[n].split(" ", 2)
log = sys.argv[sys.argv.index("--event-log") + 1]
events = [{"preludeEvent": {"config": {}}}]
for i in range(int(created)):
    urn = f"urn:pulumi:t::tfk8s::kubernetes:core/v1:ConfigMap::c{n}-{i}"
    events.append({"resOutputsEvent": {"metadata": {"op": "create", "urn": urn, "type": "kubernetes:core/v1:ConfigMap"}}})
events.append({"summaryEvent": {"resourceChanges": {"create": int(created)}, "isPreview": False}})
Path(log).write_text("".join(json.dumps(e) + "\\n" for e in events))
sys.stderr.write(err + "\\n")
sys.exit(int(code))
"""


def runner(tmp_path: Path, answers: list[str]) -> tuple[Pulumi, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "pulumi"
    fake.write_text(FAKE)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    (bin_dir / "answers.txt").write_text("\n".join(answers) + "\n")
    checkout = tmp_path / "checkout"
    (checkout / "stacks").mkdir(parents=True)
    workspace = Workspace(checkout, "stacks")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return Pulumi(workspace, env), bin_dir / "calls.txt"


def test_an_up_refused_by_the_quota_status_write_runs_again_and_counts_both_runs(tmp_path: Path) -> None:
    cli, calls = runner(tmp_path, [f"255 2 {REFUSAL}", "0 1 "])
    result = cli.run("t", "up", "--yes", "--skip-preview")
    assert len(calls.read_text().splitlines()) == 2
    assert result.ok and result.applied
    assert result.retried is not None and QUOTA_STATUS_CONFLICT in result.retried
    assert result.changes == {"create": 3}
    assert [urn.rsplit("::", 1)[1] for _, urn, _ in result.changed] == ["c0-0", "c0-1", "c1-0"]
    assert REFUSAL in result.output  # the first run's output is kept, for the log
    note = summary._note(StepReport(stack="t", kind="tenant", action="up", reason="new", outcome=DONE, result=result))
    assert "ran twice" in note and QUOTA_STATUS_CONFLICT in note


@pytest.mark.parametrize(
    ("args", "answers"),
    [
        (("up", "--yes"), ["255 1 error: update failed: a policy refused it", "0 1 "]),
        (("preview", "--diff"), [f"255 0 {REFUSAL}", "0 0 "]),
        (("destroy", "--yes"), [f"255 0 {REFUSAL}", "0 0 "]),
    ],
    ids=["another-refusal", "preview", "destroy"],
)
def test_anything_else_runs_once(tmp_path: Path, args: tuple[str, ...], answers: list[str]) -> None:
    cli, calls = runner(tmp_path, answers)
    result = cli.run("t", *args)
    assert len(calls.read_text().splitlines()) == 1
    assert not result.ok and result.retried is None


def test_an_up_refused_twice_fails_with_the_second_runs_result(tmp_path: Path) -> None:
    cli, calls = runner(tmp_path, [f"255 2 {REFUSAL}", f"255 1 {REFUSAL}", "0 0 "])
    result = cli.run("t", "up", "--yes")
    assert len(calls.read_text().splitlines()) == 2
    assert not result.ok and result.retried is not None
    assert result.changes == {"create": 3}  # what both runs made, though the stack is not done
    assert result.output.count(QUOTA_STATUS_CONFLICT) == 2
