"""The GitOps workflows as a pull request's author would read them: what of their tree runs, and with
which credentials; and the merge's waves (each after the ones before it, a wave's stacks at once).
The same preview step is run for real, on a pull request that rewrites its own judge, by
tests/e2e/test_gitops.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

WORKFLOWS = Path(__file__).resolve().parents[2] / ".github" / "workflows"


def workflow(name: str) -> dict[str, Any]:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list(job["steps"])


def secrets_named(node: Any) -> set[str]:
    """The secrets a workflow's node names (`${{ secrets.X }}`); `github.token` is no secret of the team's."""
    return set(re.findall(r"secrets\.(\w+)", yaml.safe_dump(node)))


def runs_pull_request_code(job: dict[str, Any]) -> bool:
    """Whether the job runs the pull request's program: a pipeline command that previews `pr`'s tree."""
    scripts = "\n".join(s.get("run", "") for s in steps(job))
    return bool(re.search(r"--checkout pr preview(?!-)", scripts))


def test_the_preview_is_the_base_branchs_workflow_and_holds_no_token_of_its_own() -> None:
    preview = workflow("tfk8s-preview.yml")
    # `pull_request` would run the pull request's own copy of this file, which its author could
    # rewrite to name any secret or environment; `pull_request_target` runs the base branch's.
    assert set(preview[True]) == {"pull_request_target"}  # PyYAML reads the key `on` as True
    assert preview["permissions"] == {} and not secrets_named(preview.get("env") or {})


def test_no_job_that_holds_a_secret_runs_the_pull_requests_code_unapproved() -> None:
    jobs = workflow("tfk8s-preview.yml")["jobs"]
    for name, job in jobs.items():
        held = secrets_named(job)
        if held:
            assert job.get("environment"), f"{name}: secrets {held} outside an environment"
        if runs_pull_request_code(job) and held:
            assert job["environment"] == "tfk8s-preview", f"{name}: runs the pull request's code with {held}"
    # The pull request's own job: no secret, no token of the repository's, its recorded state and the
    # preview identity's token from the team's job, the cache never written.
    experiments = jobs["experiments"]
    assert runs_pull_request_code(experiments) and not secrets_named(experiments)
    assert experiments["permissions"] == {"contents": "read"} and "environment" not in experiments
    setup = next(s for s in steps(experiments) if s.get("uses") == "./trusted/.github/actions/tfk8s-setup")
    assert setup["with"] == {"root": "trusted", "save-cache": "false"}
    script = next(s["run"] for s in steps(experiments) if "run" in s and "--recorded-state" in s["run"])
    assert 'export KUBECONFIG="$RUNNER_TEMP/state/preview.kubeconfig"' in script
    # The team's job, which holds the store's read keys and may mint the preview token, runs none of it.
    state = jobs["state"]
    assert not runs_pull_request_code(state) and state["environment"] == "tfk8s-preview-state"
    # A fork's author is no collaborator: no token of the preview identity is minted for her.
    assert state["if"] == "github.event.pull_request.head.repo.full_name == github.repository"
    assert secrets_named(state) == {
        "TFK8S_BACKEND_URL",
        "TFK8S_S3_READ_ACCESS_KEY_ID",
        "TFK8S_S3_READ_SECRET_ACCESS_KEY",
        "TFK8S_PREVIEW_MINTER_KUBECONFIG",
    }
    # Platforms and tenants: the team's credentials, once a maintainer approves; its cache not written either.
    team = jobs["team"]
    assert runs_pull_request_code(team) and team["environment"] == "tfk8s-preview" and "needs" not in team
    assert team["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert next(s for s in steps(team) if "uses" in s and "tfk8s-setup" in s["uses"])["with"]["save-cache"] == "false"
    # The experiments' summary is posted by a job that runs nothing of the pull request's.
    comment = jobs["comment"]
    assert not secrets_named(comment) and comment["permissions"] == {"pull-requests": "write"}
    assert [s["uses"] for s in steps(comment) if "uses" in s] == ["actions/download-artifact@v4"]


@pytest.mark.parametrize("name", ["tfk8s-apply.yml", "tfk8s-drift.yml"])
def test_the_teams_credentials_are_an_environments_that_only_the_default_branch_deploys_to(name: str) -> None:
    found = workflow(name)
    assert not secrets_named(found.get("env") or {}), f"{name}: secrets for every job"
    for job_name, job in found["jobs"].items():
        if secrets_named(job):
            assert job.get("environment") == "tfk8s-apply", (name, job_name)


def test_nothing_from_the_pull_requests_tree_runs_as_tooling() -> None:
    for name, job in workflow("tfk8s-preview.yml")["jobs"].items():
        checkouts = {s["with"]["path"]: s["with"] for s in steps(job) if str(s.get("uses", "")).startswith("actions/checkout@")}
        if not checkouts:
            continue
        assert checkouts["trusted"]["ref"] == "${{ github.event.pull_request.base.sha }}", name
        assert checkouts["pr"]["ref"] == "${{ github.event.pull_request.head.sha }}", name
        assert all(c["persist-credentials"] is False for c in checkouts.values()), name
        # Actions: the marketplace's pinned ones, or the base branch's own.
        local = [s["uses"] for s in steps(job) if str(s.get("uses", "")).startswith("./")]
        assert local == ["./trusted/.github/actions/tfk8s-setup"], name
        setup = next(s for s in steps(job) if s.get("uses") == local[0])
        assert setup["with"]["root"] == "trusted", name
        # Scripts: the pull request's tree is named only as the checkout to preview and where the
        # base's virtualenv is linked; the pipeline command and the policy pack are the base's.
        scripts = "\n".join(s["run"] for s in steps(job) if "run" in s)
        mentions = re.findall(r"(?<![\w/])pr/[\w./-]*|--checkout pr\b", scripts)
        assert "--checkout pr" in mentions and set(mentions) <= {"--checkout pr", "pr/.venv"}, (name, mentions)
        assert re.search(r"trusted/hack/gitops.sh --checkout pr preview", scripts), name
        if runs_pull_request_code(job):
            assert '--policy-pack "$PWD/trusted/policies"' in scripts, name


@pytest.mark.parametrize("name", sorted(p.name for p in WORKFLOWS.glob("*.yml")))
def test_no_checkout_leaves_its_credentials_in_the_tree(name: str) -> None:
    """A checkout that persists its credentials writes the job's token into .git/config, inside the
    project, where a stack's code or a link could reach it (tfk8s.checks.context refuses both too)."""
    checkouts = [
        s.get("with") or {}
        for job in workflow(name)["jobs"].values()
        for s in job.get("steps", [])
        if str(s.get("uses", "")).startswith("actions/checkout@")
    ]
    assert checkouts, f"{name}: no checkout"
    assert all(c.get("persist-credentials") is False for c in checkouts), (name, checkouts)


def test_the_setup_action_builds_in_the_checkout_it_is_given() -> None:
    action = yaml.safe_load((WORKFLOWS.parent / "actions" / "tfk8s-setup" / "action.yml").read_text())
    assert action["inputs"]["root"]["default"] == "."
    runs = [s for s in action["runs"]["steps"] if "run" in s and "make venv" in s["run"]]
    assert [s["working-directory"] for s in runs] == ["${{ inputs.root }}"]


def test_the_setup_action_writes_no_cache_when_told_not_to() -> None:
    action = yaml.safe_load((WORKFLOWS.parent / "actions" / "tfk8s-setup" / "action.yml").read_text())
    caches = {s["uses"]: s["if"] for s in action["runs"]["steps"] if str(s.get("uses", "")).startswith("actions/cache")}
    assert caches == {
        "actions/cache@v4": "inputs.save-cache == 'true'",  # restores, and saves at the job's end
        "actions/cache/restore@v4": "inputs.save-cache != 'true'",  # restores only
    }


def test_a_merge_can_be_given_the_confirmations_a_destroy_needs_only_by_a_person() -> None:
    apply = workflow("tfk8s-apply.yml")
    on = apply.get("on") or apply[True]  # YAML 1.1 reads the key `on` as true
    assert "push" in on and {"confirm_destroy", "confirm_config_dir_move"} <= set(on["workflow_dispatch"]["inputs"])
    for job in _waves(apply):
        script = next(s["run"] for s in job["steps"] if "run" in s and "gitops.sh apply" in s["run"])
        assert '--confirm-destroy "$stack"' in script and "$MOVE" in script


def _waves(apply: dict[str, Any]) -> list[dict[str, Any]]:
    return [job for name, job in apply["jobs"].items() if name.startswith("wave-")]


def test_a_merge_applies_one_wave_after_another_and_the_stacks_of_a_wave_at_once() -> None:
    apply = workflow("tfk8s-apply.yml")
    waves = _waves(apply)
    assert [name for name in apply["jobs"] if name.startswith("wave-")] == [f"wave-{k}" for k in range(6)]
    for k, job in enumerate(waves):
        needs = [job["needs"]] if isinstance(job["needs"], str) else job["needs"]
        # Every wave before it, so that a failure two waves back stops it too (a skipped wave passes nothing on).
        assert needs == ["plan", *(f"wave-{j}" for j in range(k))]
        assert f"needs.plan.outputs.wave{k}" in job["strategy"]["matrix"]["include"]
        assert job["strategy"]["max-parallel"] > 1 and job["strategy"]["fail-fast"] is False
        assert job["concurrency"] == {"group": "tfk8s-stack-${{ matrix.stack }}", "cancel-in-progress": False}
        assert job["steps"] == waves[0]["steps"]
        if k:
            assert "!contains(needs.*.result, 'failure')" in job["if"] and "!cancelled()" in job["if"]


def _plan_step(directory: Path, steps: list[dict[str, Any]]) -> tuple[int, dict[str, str], str]:
    """The plan job's script, run with a `hack/gitops.sh` that prints `steps`: its exit code, outputs and errors."""
    (job,) = [j for name, j in workflow("tfk8s-apply.yml")["jobs"].items() if name == "plan"]
    script = next(s["run"] for s in job["steps"] if s.get("id") == "plan")
    (directory / "hack").mkdir(parents=True)
    (directory / "hack" / "gitops.sh").write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(steps)}\nEOF\n")
    (directory / "hack" / "gitops.sh").chmod(0o755)
    outputs = directory / "outputs"
    env = {"PATH": os.environ["PATH"], "BASE": "b", "GITHUB_SHA": "h", "GITHUB_OUTPUT": str(outputs)}
    done = subprocess.run(["bash", "-e", "-c", script], cwd=directory, env=env, capture_output=True, text=True)
    lines = outputs.read_text().splitlines() if outputs.exists() else []
    return done.returncode, dict(line.split("=", 1) for line in lines), done.stdout + done.stderr


@pytest.mark.skipif(shutil.which("jq") is None, reason="the runner's jq is not installed here")
def test_the_plan_job_splits_the_plan_into_its_waves(tmp_path: Path) -> None:
    steps = [
        {"stack": "p", "action": "update", "wave": 0},
        {"stack": "t1", "action": "update", "wave": 1},
        {"stack": "t2", "action": "update", "wave": 1},
    ]
    code, outputs, _ = _plan_step(tmp_path, steps)
    assert code == 0
    assert {k: json.loads(v) for k, v in outputs.items()} == {
        "wave0": steps[:1],
        "wave1": steps[1:],
        **{f"wave{k}": [] for k in range(2, 6)},
    }
    assert all(job["if"] for job in _waves(workflow("tfk8s-apply.yml")))  # an empty wave is skipped


@pytest.mark.skipif(shutil.which("jq") is None, reason="the runner's jq is not installed here")
def test_a_plan_the_workflow_cannot_hold_is_refused_naming_the_fleet_command(tmp_path: Path) -> None:
    deep = [{"stack": f"t{k}", "action": "update", "wave": k} for k in range(7)]
    code, outputs, errors = _plan_step(tmp_path / "deep", deep)
    assert code == 1 and outputs == {} and "7 waves" in errors and "make apply-fleet" in errors
    wide = [{"stack": f"t{k}", "action": "update", "wave": 1} for k in range(257)]
    code, outputs, errors = _plan_step(tmp_path / "wide", wide)
    assert code == 1 and outputs == {} and "257 stacks" in errors and "PARALLEL=4" in errors
