"""The tfk8s policy pack (policies/) run by the real CLI, through tfk8s's language host's RunPlugin,
on all three kinds of stack: the repository's stacks pass every mandatory rule (the advisory ones
speak), and an experiment that breaks one is stopped before anything changes: a rule a team made
mandatory in its pack's configuration (`--policy-pack-config`). A `:latest` image, which the pack
refuses too, the program itself refuses first on this platform (`platform.images.allowLatest` off:
tests/e2e/test_gitops.py has a team that allows it, where the pack is the gate)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from drivers import ROOT, SMALL_CLUSTER, Cli, Kube

PACK = ROOT / "policies"
STACK = "policy-exp"


@pytest.fixture(scope="module")
def pack() -> Path:
    """The pack with its own virtualenv (`make policy-venv`; pulumi-policy pins protobuf 5)."""
    if not (PACK / ".venv" / ".installed").exists():
        subprocess.run(["make", "-C", str(ROOT), "policy-venv"], check=True, capture_output=True)
    return PACK


def test_every_kind_of_stack_passes_the_pack_and_a_rule_made_mandatory_stops_an_up(
    cli: Cli, kube: Kube, platform: str, tenants: dict[str, str], pack: Path, tmp_path: Path
) -> None:
    cli.init_experiment(STACK, tenant=tenants["alice"], settings=SMALL_CLUSTER)
    try:
        # `up` runs the pack on every resource with its values known; then a preview of each kind.
        cli("up", "--stack", STACK, "--yes", "--skip-preview", "--policy-pack", str(pack))
        for stack in (platform, tenants["alice"], STACK):
            done = cli("preview", "--stack", stack, "--policy-pack", str(pack), "--diff")
            text = done.stdout + done.stderr
            assert "mandatory" not in text, text
            assert "can't run policy" not in text, text  # every rule saw known values: none was skipped
        # The advisory rules speak (this experiment sets no TTL nor deadline) without stopping it.
        assert "jobs-cleaned-up" in text and "advisory" in text, text
        (job,) = [j for j in kube.get("jobs", "tfk8s-alice") if j["metadata"]["labels"].get("tfk8s.io/stack") == STACK]

        # A team that makes the advisory rule mandatory: the same experiment, with another worker count, is stopped.
        config = tmp_path / "pack-config.json"
        config.write_text(json.dumps({"jobs-cleaned-up": "mandatory"}))
        cli("config", "set", "--stack", STACK, "--path", "tfk8s:clusters[0].workers.count", str(job["spec"]["completions"] + 1))
        pack_args = ("--policy-pack", str(pack), "--policy-pack-config", str(config))
        done = cli("up", "--stack", STACK, "--yes", *pack_args, check=False)
        text = done.stdout + done.stderr
        assert done.returncode != 0, text
        assert "jobs-cleaned-up" in text and "mandatory" in text, text
        (after,) = [j for j in kube.get("jobs", "tfk8s-alice") if j["metadata"]["labels"].get("tfk8s.io/stack") == STACK]
        assert after["metadata"]["uid"] == job["metadata"]["uid"]  # nothing changed
        assert after["spec"]["completions"] == job["spec"]["completions"]

        # A floating image: the program refuses it before anything is declared, naming the key.
        cli("config", "set", "--stack", STACK, "--path", "tfk8s:clusters[0].image", "tensorflow/tensorflow:latest")
        done = cli("preview", "--stack", STACK, "--policy-pack", str(pack), check=False)
        text = done.stdout + done.stderr
        assert done.returncode != 0, text
        assert "clusters[0].image: 'tensorflow/tensorflow:latest' is tagged latest" in text, text
        assert "no-latest-image" not in text, text  # the program stopped first: no resource reached the pack
    finally:
        cli("destroy", "--stack", STACK, "--yes")
        cli("stack", "rm", STACK, "--yes")
