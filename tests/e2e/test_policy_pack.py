"""The tfk8s policy pack (policies/) run by the real CLI, through tfk8s's language host's RunPlugin,
on all three kinds of stack: the repository's stacks pass every mandatory rule (the advisory ones
speak), and an experiment that breaks one is stopped before anything changes."""

from __future__ import annotations

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


def test_every_kind_of_stack_passes_the_pack_and_a_latest_image_is_stopped(
    cli: Cli, kube: Kube, platform: str, tenants: dict[str, str], pack: Path
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
        image = job["spec"]["template"]["spec"]["containers"][0]["image"]

        cli("config", "set", "--stack", STACK, "--path", "tfk8s:clusters[0].image", "tensorflow/tensorflow:latest")
        done = cli("up", "--stack", STACK, "--yes", "--policy-pack", str(pack), check=False)
        text = done.stdout + done.stderr
        assert done.returncode != 0, text
        assert "no-latest-image" in text and "mandatory" in text, text
        assert "runs 'tensorflow/tensorflow:latest': pin a tag other than latest, or a digest" in text, text
        (after,) = [j for j in kube.get("jobs", "tfk8s-alice") if j["metadata"]["labels"].get("tfk8s.io/stack") == STACK]
        assert after["metadata"]["uid"] == job["metadata"]["uid"]  # nothing changed
        assert after["spec"]["template"]["spec"]["containers"][0]["image"] == image
    finally:
        cli("destroy", "--stack", STACK, "--yes")
        cli("stack", "rm", STACK, "--yes")
