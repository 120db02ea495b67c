"""A pull request's preview against recorded state (tfk8s_gitops.recorded_state): what the team's job
exports, what it refuses to, and what the pull request's job runs with. The two jobs for real, with
a hostile program: tests/e2e/test_gitops.py, step 06."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tfk8s.settings.state_store import state_id
from tfk8s_gitops import salts
from tfk8s_gitops.plan import Plan, Step
from tfk8s_gitops.recorded_state import INDEX, SECRET_SIGNATURE, Recorded, RecordedStateError, export, previewed

PLAN = Plan(
    "b" * 40,
    "h" * 40,
    (
        Step("platform", "update", "platform", "program changed", None, team=True),
        Step("tenant-bob", "update", "tenant", "program changed", "platform", team=True),
        Step("exp-b", "update", "experiment", "program changed", "tenant-bob"),
        Step("exp-new", "update", "experiment", "added", "tenant-bob"),
        Step("tenant-eve", "update", "tenant", "added", "platform"),  # not the team file's: refused
    ),
    program_changed=True,
    refusals={"tenant-eve": "stacks/team.yaml does not declare tenant-eve among the team's tenants"},
)


class FakeTeam:
    """The team job's CLI: `export` of the states it was given, counted."""

    def __init__(self, states: dict[str, dict[str, Any]]) -> None:
        self.states = states
        self.exported: list[str] = []

    def export(self, stack: str) -> dict[str, Any]:
        self.exported.append(stack)
        return json.loads(json.dumps(self.states[stack]))


def state(*resources: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": 3,
        "deployment": {
            "manifest": {},
            "secrets_providers": {"type": "passphrase", "state": {"salt": "v1:team-salt"}},
            "resources": list(resources),
        },
    }


def test_only_the_pull_requests_experiments_are_previewed_in_its_own_job() -> None:
    assert [s.stack for s in previewed(PLAN)] == ["exp-b", "exp-new"]


def test_the_team_job_exports_the_experiments_that_exist_without_the_teams_secrets_provider(tmp_path: Path) -> None:
    team = FakeTeam({"exp-b": state({"urn": "urn:pulumi:exp-b::tfk8s::kubernetes:core/v1:Service::ps"})})
    assert export(PLAN, team, {"platform", "tenant-bob", "exp-b"}, tmp_path, "41bb4c3d") == ["exp-b"]
    assert team.exported == ["exp-b"], "a team stack's state, or one that does not exist, was read"
    written = json.loads((tmp_path / "exp-b.json").read_text())
    assert "secrets_providers" not in written["deployment"]
    assert written["deployment"]["resources"] == team.states["exp-b"]["deployment"]["resources"]
    assert Recorded.read(tmp_path) == Recorded(tmp_path, frozenset({"exp-b"}), "41bb4c3d")


def test_a_state_holding_a_secret_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    secret = {SECRET_SIGNATURE: "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "v1:abc"}
    team = FakeTeam({"exp-b": state({"urn": "urn:x", "inputs": {"data": secret}})})
    with pytest.raises(RecordedStateError, match=r"exp-b: its state holds a secret"):
        export(PLAN, team, {"exp-b"}, tmp_path / "out", "41bb4c3d")
    assert not (tmp_path / "out").exists()


def test_a_directory_that_is_no_export_is_refused_naming_the_flag(tmp_path: Path) -> None:
    with pytest.raises(RecordedStateError, match=rf"--recorded-state {tmp_path}: no {INDEX} there"):
        Recorded.read(tmp_path)


def test_the_pull_requests_job_runs_in_a_scratch_backend_under_a_passphrase_of_its_own(tmp_path: Path) -> None:
    team = {
        "PATH": "/bin",
        "KUBECONFIG": "/preview.json",
        "PULUMI_BACKEND_URL": "s3://team-state",
        "PULUMI_CONFIG_PASSPHRASE": "the-teams",
        "PULUMI_CONFIG_PASSPHRASE_FILE": "/team-passphrase",
        "TFK8S_SECRETS_PROVIDER": "awskms://team-key",
        "AWS_ACCESS_KEY_ID": "AKIA",
        "AWS_SECRET_ACCESS_KEY": "the-teams-key",
    }
    recorded = Recorded(tmp_path, frozenset(), "41bb4c3d")
    first, second = recorded.environment(team, tmp_path / "a"), recorded.environment(team, tmp_path / "b")
    assert first["PULUMI_BACKEND_URL"] == (tmp_path / "a").as_uri() and (tmp_path / "a").is_dir()
    assert first["PULUMI_CONFIG_PASSPHRASE"] not in ("the-teams", second["PULUMI_CONFIG_PASSPHRASE"])
    assert set(first) == {"PATH", "KUBECONFIG", "PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "TFK8S_STATE_ID"}
    assert first["KUBECONFIG"] == "/preview.json"
    # Its program knows the team's objects as its stack's own: the team's state's id, not the scratch backend's.
    assert state_id(first) == "41bb4c3d" != state_id({"PULUMI_BACKEND_URL": first["PULUMI_BACKEND_URL"]})


def test_dropping_a_stack_files_salt_keeps_its_config(tmp_path: Path) -> None:
    stack_file = tmp_path / "Pulumi.exp-b.yaml"
    stack_file.write_text("encryptionsalt: v1:team-salt\nconfig:\n  tfk8s:kind: experiment\n")
    salts.drop(stack_file)
    assert salts.of_file(stack_file) is None
    assert "tfk8s:kind: experiment" in stack_file.read_text()
