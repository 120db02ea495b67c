"""Runs that end whatever their outcome, on the real API server: workers failing for good retire
their parameter servers within seconds, readiness says Failed and why, and a documented config
change (`run.number`) starts a fresh run where re-applying the failed Job would do nothing.

The PS launcher runs as a local process with its pod's environment and its service account's
token (kwok runs no containers); bench/ps_reclaim.py times the same scenario.
"""

from __future__ import annotations

import sys
from pathlib import Path

from drivers import ROOT, SMALL_CLUSTER, Cli, Kube

sys.path.insert(0, str(ROOT / "bench"))
from ps_reclaim import current_ps, reclaim  # noqa: E402

STACK = "reclaim"
NAMESPACE = "tfk8s-dora"


def test_failed_workers_retire_their_ps_and_a_new_run_number_starts_afresh(
    cli: Cli, kube: Kube, tenants: dict[str, str], tmp_path: Path
) -> None:
    settings = {**SMALL_CLUSTER, "tfk8s:clusters[0].workers.backoffLimitPerIndex": "0"}
    cli.init_experiment(STACK, tenant=tenants["dora"], settings=settings)
    cli("up", "--stack", STACK, "--yes", "--skip-preview")
    assert cli.outputs(STACK)["ready"] is True
    (job,) = kube.get("jobs", NAMESPACE)
    assert (job["spec"]["backoffLimitPerIndex"], job["spec"]["maxFailedIndexes"]) == (0, 0)  # 1.34: per index

    result = reclaim(kube.run, kube.kubeconfig, NAMESPACE, "reclaim-mnist-worker", tmp_path)
    assert result["exit_codes"] == [0] and result["replicas"] == [0], result
    assert "job reclaim-mnist-worker is Failed; retiring" in result["logs"][0], result["logs"]
    assert result["ps_pods_gone"] < 10, result  # bench/ps_reclaim.py reports the latency (goal <= 1.2 s)

    cli("up", "--stack", STACK, "--yes", "--skip-preview", "--refresh")
    readiness = cli.outputs(STACK)["readiness"]
    cluster = readiness["clusters"]["mnist"]
    assert cluster["phase"] == "Failed" and readiness["ready"] is False
    assert any("workers Job failed: MaxFailedIndexesExceeded" in p for p in readiness["notReady"]), readiness["notReady"]

    # Re-applying the failed Job changes nothing (pulumi-kubernetes#856); a new run number is a new run.
    old_ps = {d["metadata"]["name"] for d in kube.get("deployments", NAMESPACE) if "-ps-" in d["metadata"]["name"]}
    cli("config", "set", "--stack", STACK, "--path", "tfk8s:clusters[0].run.number", "1")
    cli("up", "--stack", STACK, "--yes", "--skip-preview")
    outputs = cli.outputs(STACK)
    assert outputs["ready"] is True, outputs["readiness"]
    (job,) = kube.get("jobs", NAMESPACE)
    assert job["status"].get("ready") == 2 and not job["status"].get("failed")
    new_ps = [d["metadata"]["name"] for d in current_ps(kube.run, NAMESPACE)]
    assert len(new_ps) == 1 and new_ps[0] not in old_ps
    assert not old_ps & {d["metadata"]["name"] for d in kube.get("deployments", NAMESPACE)}  # the old run's PS are gone

    cli("destroy", "--stack", STACK, "--yes")
    cli("stack", "rm", STACK, "--yes")
