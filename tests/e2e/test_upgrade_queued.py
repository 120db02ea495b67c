"""A queued experiment across an upgrade, for real (issue 55, point 4: "a queued JobSet on a
queueing platform"): on a kwok cluster of its own with Kueue and JobSet, the previous release's code
brings up a queueing platform, alice's tenant and an experiment whose cluster Kueue admits and runs;
then this tree upgrades the three in order (the platform, the tenant, the experiment), each
`preview` first.

Checked: no preview deletes or replaces anything stateful; the namespace, claims, volumes, token
Secret, StorageClass, CRDs and Tenant keep their uids, and so do Kueue's queues (a ClusterQueue
replaced under an admitted workload would evict it, and its finalizer would hold the delete); the
experiment's JobSet is the same object, still admitted under the same Workload, unless the
experiment's preview showed it replaced (a release that changes the run's pods: a new run), and
then the new one is admitted and runs. Every stack is ready and says this release.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from drivers import Cli, Kube, per_worker, wait_until
from queueing_env import CAPACITY, GPU_CLUSTER, GPU_CLUSTER_PODS, JOBSET_NAME, TENANT_QUOTA, condition, pods_of, workload_of
from tfk8s.release import VERSION
from upgrade_env import (
    DESTRUCTIVE,
    THIS_TREE,
    Release,
    assert_kept,
    destructive,
    kept,
    kind_in,
    preview_steps,
    run_release,
    uids,
)

import queue_stacks
import toolenv

PLATFORM, TENANT, RUN = "platform-dev", "tenant-alice", "alice-queued"
NAMESPACE = "tfk8s-alice"
JOBSET = f"{RUN}-train"
ADMITTED_WITHIN = 60.0
KEPT = [
    *kept(NAMESPACE),
    ("clusterqueues.kueue.x-k8s.io", None),
    ("localqueues.kueue.x-k8s.io", NAMESPACE),
    ("resourceflavors.kueue.x-k8s.io", None),
]


@pytest.fixture(scope="module")
def kube() -> Iterator[Kube]:
    name = per_worker("tfk8s-e2e-upgrade-queue")
    with toolenv.throwaway_cluster(name, queueing=True) as kubeconfig:
        yield Kube(kubeconfig, cluster=name)


def the_jobset(kube: Kube) -> dict[str, Any]:
    return kube.get("jobsets.jobset.x-k8s.io", NAMESPACE, JOBSET)


def running(kube: Kube) -> bool:
    """Whether the run is admitted and all of its pods run, and the JobSet counts every Job ready
    (what the experiment's readiness reads)."""
    pods = pods_of(kube, NAMESPACE, JOBSET)
    if len(pods) != GPU_CLUSTER_PODS or any(p["status"].get("phase") != "Running" for p in pods):
        return False
    live = the_jobset(kube)
    ready = {r["name"]: r.get("ready", 0) for r in live.get("status", {}).get("replicatedJobsStatus", [])}
    return all(ready.get(r["name"], 0) >= r.get("replicas", 1) for r in live["spec"]["replicatedJobs"])


def readiness(upgrade_team: Cli) -> dict[str, Any]:
    """The experiment's outputs after `pulumi up --refresh` (its readiness reads the live status)."""
    upgrade_team("up", "--stack", RUN, "--refresh", "--yes", "--skip-preview")
    return upgrade_team.outputs(RUN)


def test_a_queued_run_keeps_its_admission_and_every_stateful_object_across_an_upgrade(
    upgrade_team: Cli, kube: Kube, previous: Release, tmp_path_factory: pytest.TempPathFactory
) -> None:
    upgrade_team("stack", "init", PLATFORM)
    queue_stacks.configure_platform(upgrade_team.cwd, tmp_path_factory.mktemp("volumes"), {"capacity": CAPACITY})
    upgrade_team("up", "--stack", PLATFORM, "--yes", "--skip-preview")
    upgrade_team("stack", "init", TENANT)
    queue_stacks.configure_tenant_quota(upgrade_team.cwd, TENANT, TENANT_QUOTA)
    upgrade_team("up", "--stack", TENANT, "--yes", "--skip-preview")
    upgrade_team.init_experiment(RUN, tenant=TENANT, settings=GPU_CLUSTER)
    upgrade_team("up", "--stack", RUN, "--yes", "--skip-preview")
    wait_until(lambda: running(kube), f"{JOBSET} admitted and running", ADMITTED_WITHIN)
    outputs = readiness(upgrade_team)
    train = outputs["readiness"]["clusters"]["train"]
    assert (outputs["ready"], train["queue"]["state"]) == (True, "Running"), train
    assert outputs.get("tfk8sVersion") == previous.version
    before = uids(kube, KEPT)
    assert any(k.startswith("clusterqueues.kueue.x-k8s.io/") for k in before), before
    jobset_uid = the_jobset(kube)["metadata"]["uid"]
    workload_uid = (workload_of(kube, NAMESPACE, JOBSET) or {})["metadata"]["uid"]

    run_release(upgrade_team, THIS_TREE)
    shown: dict[str, list[tuple[str, str]]] = {}
    for stack in (PLATFORM, TENANT, RUN):
        shown[stack] = preview_steps(upgrade_team, stack)
        assert destructive(shown[stack]) == [], f"{stack}: the upgrade's preview deletes or replaces"
        upgrade_team("up", "--stack", stack, "--yes", "--skip-preview")
    after = uids(kube, KEPT)
    assert_kept(before, after, "the queued upgrade")

    # The run: untouched, or a new run its preview announced (the JobSet replaced), admitted anew.
    replaced = any(op in DESTRUCTIVE and kind_in(urn) == "JobSet" for op, urn in shown[RUN])
    for stack, steps in shown.items():  # for the closing note's matrix (pytest -s)
        print(f"[upgrade] {stack}: " + ", ".join(sorted(f"{op} {kind_in(urn)}" for op, urn in steps)), flush=True)
    wait_until(lambda: running(kube), f"{JOBSET} running after the upgrade", ADMITTED_WITHIN)
    live, workload = the_jobset(kube), workload_of(kube, NAMESPACE, JOBSET)
    assert workload is not None and condition(workload, "Admitted").get("status") == "True", workload
    if replaced:
        assert live["metadata"]["uid"] != jobset_uid, "the preview announced a new run, but the JobSet is the old one"
    else:
        assert (live["metadata"]["uid"], workload["metadata"]["uid"]) == (jobset_uid, workload_uid), (
            "the run was replaced or queued anew, and its preview did not say so: "
            + json.dumps([s for s in shown[RUN] if s[0] != "update"])
        )
    assert all(p["metadata"]["labels"][JOBSET_NAME] == JOBSET for p in pods_of(kube, NAMESPACE, JOBSET))
    outputs = readiness(upgrade_team)
    train = outputs["readiness"]["clusters"]["train"]
    assert (outputs["ready"], train["queue"]["state"]) == (True, "Running"), train
    for stack in (PLATFORM, TENANT, RUN):
        assert upgrade_team.outputs(stack)["tfk8sVersion"] == VERSION, stack
