"""A queueing platform for real (issue 38): Kueue and JobSet running beside a local cluster of its own
(tests/e2e/queueing_env.py), the platform stack with `queueing.enabled` and a capacity, and its
tenants, each deployed by the plain `pulumi` CLI from a project copy of its own. Then two plain
JobSets in a tenant's namespace that together exceed the CPU capacity: Kueue admits the first whole
and holds the second whole, saying why, until the first is gone. (Experiments as JobSets, through
`pulumi up`: tests/e2e/test_queued_experiments.py.)
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from drivers import Cli, Kube, wait_until
from queueing_env import (
    CAPACITY,
    CLUSTER,
    COHORT,
    LOCAL_QUEUE,
    NAMESPACES,
    PLATFORM,
    apply,
    condition,
    pods_of,
    project,
    queueing_platform,
    workload_of,
)

import toolenv

NAMESPACE = NAMESPACES["alice"]
TASK_CPU = "1"
# How long the second JobSet may wait for its pods once the first is deleted. Measured on this
# machine (2026-11-27): see lab/kueue/README.md; the bound leaves room for a loaded CI machine.
ADMITTED_WITHIN = 30.0


def test_preview_refuses_queueing_on_a_cluster_without_kueue(tmp_path_factory: pytest.TempPathFactory) -> None:
    with toolenv.throwaway_cluster(f"{CLUSTER}-none") as kubeconfig:  # a cluster without Kueue
        cli = project(tmp_path_factory.mktemp("noqueue"), kubeconfig)
        queueing_platform(cli, tmp_path_factory.mktemp("noqueue-volumes"))
        preview = cli("preview", "--stack", PLATFORM, check=False)
    assert preview.returncode != 0
    refusal = (
        "tfk8s:platform.queueing.enabled: is true, but the cluster serves no kueue.x-k8s.io/v1beta2 clusterqueues "
        "and no jobset.x-k8s.io/v1alpha2 jobsets"
    )
    assert refusal in preview.stdout + preview.stderr, preview.stdout + preview.stderr
    assert "hack/cluster.sh start --queueing" in preview.stdout + preview.stderr


def test_the_cohort_holds_the_capacity_and_the_tenant_queues_in_it(queue_cli: Cli, queue_kube: Kube) -> None:
    kube = queue_kube
    cohort = kube.get("cohorts.kueue.x-k8s.io", name=COHORT)
    quotas = {
        r["name"]: r["nominalQuota"]
        for group in cohort["spec"]["resourceGroups"]
        for flavor in group["flavors"]
        for r in flavor["resources"]
    }
    assert quotas == {"cpu": CAPACITY["cpu"], "memory": CAPACITY["memory"], "nvidia.com/gpu": str(CAPACITY["gpus"])}

    def active() -> dict[str, Any] | None:
        queue = kube.get("clusterqueues.kueue.x-k8s.io", name=NAMESPACE)
        return queue if condition(queue, "Active").get("status") == "True" else None

    queue = wait_until(active, f"ClusterQueue {NAMESPACE} Active")
    assert queue["spec"]["cohortName"] == COHORT
    local = kube.get("localqueues.kueue.x-k8s.io", NAMESPACE, LOCAL_QUEUE)
    assert local["spec"]["clusterQueue"] == NAMESPACE


def jobset(name: str) -> dict[str, Any]:
    """A training cluster's shape as a JobSet (1 PS Job, an Indexed Job of 2 workers, done when the
    workers are), in the tenant's LocalQueue, its pods as Pod Security `restricted` wants them."""

    def job(role: str, count: int, restart: str) -> dict[str, Any]:
        container = {
            "name": role,
            "image": "busybox",
            "resources": {"requests": {"cpu": TASK_CPU, "memory": "1Gi"}, "limits": {"cpu": TASK_CPU, "memory": "1Gi"}},
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        }
        pod = {
            "restartPolicy": restart,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [container],
        }
        spec = {"parallelism": count, "completions": count, "completionMode": "Indexed", "template": {"spec": pod}}
        return {"name": role, "replicas": 1, "template": {"spec": spec}}

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"kueue.x-k8s.io/queue-name": LOCAL_QUEUE}},
        "spec": {
            "successPolicy": {"operator": "All", "targetReplicatedJobs": ["worker"]},
            "replicatedJobs": [job("ps", 1, "OnFailure"), job("worker", 2, "Never")],
        },
    }


def all_pods(kube: Kube, name: str) -> list[dict[str, Any]] | None:
    """The JobSet's pods once all 3 exist (1 PS, 2 workers), else None."""
    found = pods_of(kube, NAMESPACE, name)
    return found if len(found) == 3 else None


def test_two_jobsets_past_the_capacity_are_admitted_whole_one_after_the_other(queue_cli: Cli, queue_kube: Kube) -> None:
    kube = queue_kube
    apply(kube, jobset("first"))
    first = wait_until(lambda: all_pods(kube, "first"), "the first JobSet's 3 pods")
    assert sorted(p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] for p in first) == ["ps", "worker", "worker"]

    apply(kube, jobset("second"))

    def pending() -> dict[str, Any] | None:
        workload = workload_of(kube, NAMESPACE, "second")
        reserved = condition(workload, "QuotaReserved") if workload else {}
        return reserved if reserved.get("status") == "False" and reserved.get("reason") == "Pending" else None

    reserved = wait_until(pending, "the second JobSet's Workload to say why it waits")
    assert "insufficient unused quota for cpu in flavor cpu" in reserved["message"], reserved
    time.sleep(2)  # a partial admission would show by now: none of its pods may exist
    assert pods_of(kube, NAMESPACE, "second") == []
    assert kube.get("jobsets.jobset.x-k8s.io", NAMESPACE, "second")["spec"]["suspend"] is True
    assert len(pods_of(kube, NAMESPACE, "first")) == 3

    started = time.monotonic()
    kube.run("delete", "jobset", "-n", NAMESPACE, "first", "--wait=false")
    wait_until(lambda: all_pods(kube, "second"), "the second JobSet's 3 pods", timeout=ADMITTED_WITHIN)
    admitted_after = time.monotonic() - started
    print(f"second JobSet's 3 pods exist {admitted_after:.2f} s after the first was deleted")
    assert condition(workload_of(kube, NAMESPACE, "second") or {}, "Admitted").get("status") == "True"
    assert pods_of(kube, NAMESPACE, "first") == []
    # Gone with its capacity, for the next test on this cluster.
    kube.run("delete", "jobset", "-n", NAMESPACE, "second", "--wait=true")
    wait_until(lambda: not pods_of(kube, NAMESPACE, "second"), "the second JobSet's pods to go")
