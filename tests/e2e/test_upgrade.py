"""An upgrade from the previous release to this tree, for real (issue 55, point 4), on a kwok cluster
of its own: the previous release's code (the commit releases.toml records, extracted with `git
archive`) brings up a platform, two tenants and an experiment of each replication shape; then this
tree upgrades them in the documented order (docs/operations/releases.md): the platform, alice and her
experiment, bob's experiment while his tenant is still on the previous release (inside the window),
then bob. Each `preview` comes first and must show no replacement or deletion of anything stateful;
afterwards every namespace, claim, volume, token Secret, StorageClass, CRD and Tenant has the uid it
had, and every stack is ready and says this release. Then a contract outside the window (bob's,
edited to say an old release) is refused by an experiment's preview, naming both releases. Last,
the way back: the previous release's code again, in the same order, with the same checks.

The team's project and the checks are tests/e2e/upgrade_env.py's; a queued experiment's upgrade is
test_upgrade_queued.py's, a Pulumi YAML program's test_upgrade_yaml.py's. Not here yet: experiments
training on the real node with checkpoints, and a toolchain that changed between releases
(upgrade_env.previous_release).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from drivers import CLUSTER, Cli, Kube
from tfk8s.release import VERSION
from upgrade_env import THIS_TREE, Release, assert_kept, destructive_steps, kept, run_release, uids

import toolenv

PLATFORM, ALICE, BOB = "platform-dev", "tenant-alice", "tenant-bob"
ALICE_RUN, BOB_RUN = "alice-between", "bob-in-graph"
KEPT = kept("tfk8s-alice", "tfk8s-bob")


@pytest.fixture(scope="module")
def kube() -> Iterator[Kube]:
    with toolenv.throwaway_cluster(f"{CLUSTER}-upgrade") as kubeconfig:
        yield Kube(kubeconfig)


def test_an_upgrade_in_order_keeps_every_stateful_object_and_every_stack_ready(
    upgrade_team: Cli, kube: Kube, previous: Release
) -> None:
    upgrade_team("stack", "init", PLATFORM)
    upgrade_team("up", "--stack", PLATFORM, "--yes", "--skip-preview")
    for tenant in (ALICE, BOB):
        upgrade_team("stack", "init", tenant)
        upgrade_team("up", "--stack", tenant, "--yes", "--skip-preview")
    upgrade_team.init_experiment(ALICE_RUN, tenant=ALICE, settings={"tfk8s:clusters[0].name": "mnist"})
    upgrade_team.init_experiment(
        BOB_RUN,
        tenant=BOB,
        settings={
            "tfk8s:clusters[0].name": "mnist",
            "tfk8s:clusters[0].replication": "in-graph",
            "tfk8s:clusters[0].inGraphClient": "chief",
        },
    )
    for run in (ALICE_RUN, BOB_RUN):
        upgrade_team("up", "--stack", run, "--yes", "--skip-preview")
    stacks = (PLATFORM, ALICE, BOB, ALICE_RUN, BOB_RUN)
    for stack in stacks:
        outputs = upgrade_team.outputs(stack)
        said = outputs.get("tfk8sVersion", previous.version)  # releases before 0.3.0 did not say
        assert outputs["ready"] is True and said == previous.version, (stack, outputs)
    before = uids(kube, KEPT)
    assert any(k.startswith("persistentvolumeclaims/tfk8s-bob/") for k in before), before

    run_release(upgrade_team, THIS_TREE)
    # The documented order, bob's experiment before his tenant: a stack reads facts one line apart.
    for stack in (PLATFORM, ALICE, ALICE_RUN, BOB_RUN, BOB):
        assert destructive_steps(upgrade_team, stack) == [], f"{stack}: the upgrade's preview deletes or replaces"
        upgrade_team("up", "--stack", stack, "--yes", "--skip-preview")
    after = uids(kube, KEPT)
    assert_kept(before, after, "the upgrade")
    for stack in stacks:
        outputs = upgrade_team.outputs(stack)
        assert outputs["ready"] is True and outputs["tfk8sVersion"] == VERSION, (stack, outputs)
    (contract,) = [c for c in kube.get("configmaps", "tfk8s-bob") if c["metadata"]["name"] == "tfk8s-contract"]
    assert json.loads(contract["data"]["tenant.json"])["release"] == VERSION


def test_an_experiment_refuses_a_contract_outside_the_window_and_changes_nothing(upgrade_team: Cli, kube: Kube) -> None:
    """Bob's contract edited (as the platform team could) to say a release two lines before this one."""
    (contract,) = [c for c in kube.get("configmaps", "tfk8s-bob") if c["metadata"]["name"] == "tfk8s-contract"]
    tenant = json.loads(contract["data"]["tenant.json"])
    major, minor = (int(part) for part in VERSION.split(".")[:2])
    old = f"{major}.{max(minor - 2, 0)}.0" if minor >= 2 else "0.0.1"
    patch = {"data": {"tenant.json": json.dumps({**tenant, "release": old})}}
    kube.run("patch", "configmap", "tfk8s-contract", "-n", "tfk8s-bob", "--type", "merge", "-p", json.dumps(patch))
    before = uids(kube, KEPT)
    try:
        done = upgrade_team("preview", "--stack", BOB_RUN, check=False)
    finally:  # bob's contract as his tenant stack wrote it, for the test after this one
        restored = json.dumps({"data": contract["data"]})
        kube.run("patch", "configmap", "tfk8s-contract", "-n", "tfk8s-bob", "--type", "merge", "-p", restored)
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert f"published by tfk8s {old}" in said and f"this experiment's tfk8s {VERSION}" in said, said[-2000:]
    assert "Upgrade in order: the tenant stack of 'tfk8s-bob'" in said, said[-2000:]
    assert uids(kube, KEPT) == before


def test_going_back_a_release_in_order_keeps_every_stateful_object_and_every_stack_ready(
    upgrade_team: Cli, kube: Kube, previous: Release
) -> None:
    """docs/operations/releases.md "Going back": the previous release's code again, stack by stack,
    in the upgrade's order (the platform, each tenant, then its experiments): a reader of 0.3.x
    refuses facts with keys it does not know, so each stack goes back after what it reads. Each
    preview deletes or replaces nothing stateful; afterwards every object has the uid it had, and
    every stack is ready and says the previous release."""
    before = uids(kube, KEPT)
    run_release(upgrade_team, previous)
    for stack in (PLATFORM, ALICE, BOB, ALICE_RUN, BOB_RUN):
        assert destructive_steps(upgrade_team, stack) == [], f"{stack}: going back, the preview deletes or replaces"
        upgrade_team("up", "--stack", stack, "--yes", "--skip-preview")
    after = uids(kube, KEPT)
    assert_kept(before, after, "going back")
    for stack in (PLATFORM, ALICE, BOB, ALICE_RUN, BOB_RUN):
        outputs = upgrade_team.outputs(stack)
        assert outputs["ready"] is True and outputs.get("tfk8sVersion") == previous.version, (stack, outputs)
