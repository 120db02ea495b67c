"""The GitOps runner (tfk8s_gitops.engine.Pulumi) with a fake `pulumi` on PATH: an `up` the API
server refused only because the namespace's quota controller had just written the quota's status
runs once more with the same arguments, and its result counts both runs' changes; an `up` that
also failed for anything else, and any other command, runs once (docs/concepts/quotas.md). A lock
refused at the handoff from another run before the engine started is tried again, a few times."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from tfk8s.errors import MissingPrerequisite
from tfk8s_gitops import summary
from tfk8s_gitops.engine import LOCK_HANDOFF, LOCK_HANDOFF_TRIES, QUOTA_STATUS_CONFLICT, BackendError, Pulumi, Workspace
from tfk8s_gitops.pipeline import DONE, Report, StepReport
from tfk8s_gitops.plan import Plan, Step

REFUSAL = (
    'resource "urn:pulumi:t::tfk8s::tfk8s:index:UserEnvironment$kubernetes:core/v1:PersistentVolumeClaim::t-data" was '
    "not successfully created by the Kubernetes API server: Server-Side Apply field conflict detected. The resource "
    f'managed by field manager "pulumi-kubernetes" had an apply conflict: {QUOTA_STATUS_CONFLICT} "tfk8s-quota": the '
    "object has been modified; please apply your changes to the latest version and try again"
)
POLICY = "resource violates mandatory policy no-latest-image"

# Each call appends its arguments to calls.txt and answers with the first line of answers.txt not
# yet used: "<exit code> <resources created> <error>|<error>...", each error a diagnostic event of
# its own (and printed), followed by the engine's "update failed" when the code is not 0; "-" for
# the resources created: the CLI stopped before its engine started (the errors printed, no event log).
FAKE = """#!/usr/bin/env python3
import json, sys
from pathlib import Path
here = Path(__file__).parent
calls = here / "calls.txt"
n = len(calls.read_text().splitlines()) if calls.exists() else 0
with calls.open("a") as f:
    f.write(" ".join(sys.argv[1:]).replace(sys.argv[sys.argv.index("--event-log") + 1], "LOG") + "\\n")
code, created, errors = (here / "answers.txt").read_text().splitlines()[n].split(" ", 2)
if created == "-":  # stopped before the engine started: no event log at all
    sys.stderr.write("".join(f"error: {e}\\n" for e in errors.split("|") if e))
    sys.exit(int(code))
errors = [e for e in errors.split("|") if e] + (["update failed"] if code != "0" else [])
events = [{"preludeEvent": {"config": {}}}]
for i in range(int(created)):
    urn = f"urn:pulumi:t::tfk8s::kubernetes:core/v1:ConfigMap::c{n}-{i}"
    events.append({"resOutputsEvent": {"metadata": {"op": "create", "urn": urn, "type": "kubernetes:core/v1:ConfigMap"}}})
events += [{"diagnosticEvent": {"message": e, "severity": "error", "color": "never"}} for e in errors]
events.append({"summaryEvent": {"resourceChanges": {"create": int(created)}, "isPreview": False}})
Path(sys.argv[sys.argv.index("--event-log") + 1]).write_text("".join(json.dumps(e) + "\\n" for e in events))
sys.stderr.write("".join(f"error: {e}\\n" for e in errors))
sys.exit(int(code))
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Workspace]:
    checkout = tmp_path / "checkout"
    (checkout / "stacks").mkdir(parents=True)
    made = Workspace(checkout, "stacks")
    yield made
    made.close()


def runner(tmp_path: Path, workspace: Workspace, answers: list[str], poll: float = 2.0) -> tuple[Pulumi, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "pulumi"
    fake.write_text(FAKE)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    (bin_dir / "answers.txt").write_text("\n".join(answers) + "\n")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return Pulumi(workspace, env, poll=poll), bin_dir / "calls.txt"


def test_an_up_refused_for_the_quota_status_runs_again_and_counts_both_runs(tmp_path: Path, workspace: Workspace) -> None:
    cli, calls = runner(tmp_path, workspace, [f"255 2 {REFUSAL}", "0 1 "])
    result = cli.run("t", "up", "--yes", "--skip-preview", "--policy-pack", "p")
    first, second = calls.read_text().splitlines()
    assert first == second and "--skip-preview --policy-pack p" in first  # the same command, again
    assert result.ok and result.applied and result.retried == "t-data"
    assert result.changes == {"create": 3}
    assert [urn.rsplit("::", 1)[1] for _, urn, _ in result.changed] == ["c0-0", "c0-1", "c1-0"]
    assert REFUSAL in result.output  # the first run's output is kept, for the log
    step = StepReport("t", "tenant", "update", "added", outcome=DONE, result=result)
    plan = Plan("a" * 40, "b" * 40, (Step("t", "update", "tenant", "added", None),), False)
    (row,) = [line for line in summary.markdown(Report("apply", plan, [step], 3.0)).splitlines() if "| `t` |" in line]
    assert "ran twice: the API server refused t-data for its quota's status" in row and "+3" in row


@pytest.mark.parametrize(
    ("args", "answers"),
    [
        (("up", "--yes"), [f"255 1 {POLICY}", "0 1 "]),
        (("up", "--yes"), [f"255 1 {REFUSAL}|{POLICY}", "0 1 "]),
        (("preview", "--diff"), [f"255 0 {REFUSAL}", "0 0 "]),
        (("destroy", "--yes"), [f"255 0 {REFUSAL}", "0 0 "]),
    ],
    ids=["another-refusal", "the-quota-status-and-another", "preview", "destroy"],
)
def test_anything_else_runs_once(tmp_path: Path, workspace: Workspace, args: tuple[str, ...], answers: list[str]) -> None:
    cli, calls = runner(tmp_path, workspace, answers)
    result = cli.run("t", *args)
    assert len(calls.read_text().splitlines()) == 1
    assert not result.ok and result.retried is None


def test_an_up_refused_twice_fails_with_both_runs_changes(tmp_path: Path, workspace: Workspace) -> None:
    cli, calls = runner(tmp_path, workspace, [f"255 2 {REFUSAL}", f"255 1 {REFUSAL}", "0 0 "])
    result = cli.run("t", "up", "--yes")
    assert len(calls.read_text().splitlines()) == 2
    assert not result.ok and result.retried == "t-data" and result.applied
    assert result.changes == {"create": 3}  # what both runs made, though the stack is not done
    assert result.output.count(QUOTA_STATUS_CONFLICT) == 2


HANDOFF = (
    f"operation error S3: PutObject, https response error StatusCode: 409, api error {LOCK_HANDOFF}: "
    "Existing Object is a directory."
)


def test_a_lock_refused_at_the_handoff_before_the_engine_started_is_tried_again(tmp_path: Path, workspace: Workspace) -> None:
    """versitygw refused the lock of an `up` that had waited for another run's (a cold CI,
    2026-11-30): nothing ran, so the runner tries again, and the second try's result is the run's."""
    cli, calls = runner(tmp_path, workspace, [f"1 - {HANDOFF}", "0 2 "], poll=0.01)
    result = cli.run("t", "up", "--yes")
    assert len(calls.read_text().splitlines()) == 2
    assert result.ok and result.changes.get("create") == 2, result.output


def test_the_same_refusal_after_the_engine_started_or_past_its_tries_fails(tmp_path: Path, workspace: Workspace) -> None:
    """Once the engine has started (its event log written) the refusal may have come mid-update:
    not tried again. Before it, tried LOCK_HANDOFF_TRIES more times, then the run fails with it."""
    cli, calls = runner(tmp_path, workspace, [f"1 0 {HANDOFF}"], poll=0.01)
    assert not cli.run("t", "up", "--yes").ok and len(calls.read_text().splitlines()) == 1
    other = tmp_path / "again"
    other.mkdir()
    cli, calls = runner(other, workspace, [f"1 - {HANDOFF}"] * (LOCK_HANDOFF_TRIES + 2), poll=0.01)
    result = cli.run("t", "up", "--yes")
    assert not result.ok and LOCK_HANDOFF in result.output
    assert len(calls.read_text().splitlines()) == LOCK_HANDOFF_TRIES + 1


def test_a_backend_that_refuses_a_read_is_a_missing_prerequisite_with_the_clis_words(
    tmp_path: Path, workspace: Workspace
) -> None:
    """`stack ls` and `stack export` against a backend the CLI cannot open: the project's own error
    (one line, no traceback: tfk8s_gitops.__main__ prints every Tfk8sError alone), with the CLI's reason."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "pulumi"
    fake.write_text("#!/bin/sh\necho 'error: unable to open state directory \"file:///x\": /x is not a directory' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    cli = Pulumi(workspace, {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    with pytest.raises(BackendError, match=r"^pulumi stack ls: error: unable to open state directory") as listed:
        cli.stack_names()
    assert isinstance(listed.value, MissingPrerequisite)
    with pytest.raises(BackendError, match=r"^pulumi stack export --stack dev: error: unable to open state directory"):
        cli.export("dev")
