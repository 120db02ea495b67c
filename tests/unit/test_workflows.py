"""The GitOps workflows as a pull request's author would read them: what of their tree runs, and with
which credentials. The same preview step is run for real, on a pull request that rewrites its own
judge, by tests/e2e/test_gitops.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

WORKFLOWS = Path(__file__).resolve().parents[2] / ".github" / "workflows"


def workflow(name: str) -> dict[str, Any]:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list(job["steps"])


def test_a_pull_requests_preview_gets_the_teams_secrets_only_in_its_protected_environment() -> None:
    preview = workflow("tfk8s-preview.yml")
    assert "secrets." not in yaml.safe_dump(preview.get("env") or {})  # nothing workflow-wide
    (job,) = preview["jobs"].values()
    assert job["environment"] == "tfk8s-preview"
    # Every secret the job names is in the job itself (its environment's), none in another job.
    assert "secrets." in yaml.safe_dump(job["env"])


def test_nothing_from_the_pull_requests_tree_runs_as_tooling() -> None:
    (job,) = workflow("tfk8s-preview.yml")["jobs"].values()
    checkouts = {s["with"]["path"]: s["with"] for s in steps(job) if str(s.get("uses", "")).startswith("actions/checkout@")}
    assert checkouts["trusted"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    assert checkouts["pr"]["ref"] == "${{ github.event.pull_request.head.sha }}"
    assert all(c["persist-credentials"] is False for c in checkouts.values())
    # Actions: the marketplace's pinned ones, or the base branch's own.
    local = [s["uses"] for s in steps(job) if str(s.get("uses", "")).startswith("./")]
    assert local == ["./trusted/.github/actions/tfk8s-setup"]
    setup = next(s for s in steps(job) if s.get("uses") == local[0])
    assert setup["with"]["root"] == "trusted"
    # Scripts: the pull request's tree is named only as the checkout to preview and where the base's
    # virtualenv is linked; the pipeline command and the policy pack are the base's.
    scripts = "\n".join(s["run"] for s in steps(job) if "run" in s)
    mentions = re.findall(r"(?<![\w/])pr/[\w./-]*|--checkout pr\b", scripts)
    assert sorted(set(mentions)) == ["--checkout pr", "pr/.venv"], mentions
    assert "trusted/hack/gitops.sh --checkout pr preview" in scripts
    assert '--policy-pack "$PWD/trusted/policies"' in scripts


def test_the_setup_action_builds_in_the_checkout_it_is_given() -> None:
    action = yaml.safe_load((WORKFLOWS.parent / "actions" / "tfk8s-setup" / "action.yml").read_text())
    assert action["inputs"]["root"]["default"] == "."
    runs = [s for s in action["runs"]["steps"] if "run" in s and "make venv" in s["run"]]
    assert [s["working-directory"] for s in runs] == ["${{ inputs.root }}"]


def test_a_merge_can_be_given_the_confirmations_a_destroy_needs_only_by_a_person() -> None:
    apply = workflow("tfk8s-apply.yml")
    on = apply.get("on") or apply[True]  # YAML 1.1 reads the key `on` as true
    assert "push" in on and {"confirm_destroy", "confirm_config_dir_move"} <= set(on["workflow_dispatch"]["inputs"])
    script = next(s["run"] for s in apply["jobs"]["apply"]["steps"] if "run" in s and "gitops.sh apply" in s["run"])
    assert '--confirm-destroy "$stack"' in script and "$MOVE" in script
