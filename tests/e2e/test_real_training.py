"""The mission on a real node: `pulumi up` of a platform, a tenant and an experiment whose PS and
workers run the real trainer in containers (the training image built here), find each other
through cluster DNS, train, and end: the workers' Job completes, the PS retire themselves through
the API from inside their pods, and readiness says the run succeeded; `destroy` leaves the
tenant's volumes, with the run's TensorBoard events on the log volume.

The real node keeps its taint: the experiment places its PS and workers there itself
(`ps`/`workers` `nodeSelector` and `tolerations`), the tenant's Jupyter and TensorBoard start on
the simulated User Node. The node's firewall (kube-router) enforces the tenant's and the
experiment's NetworkPolicies all along: the run trains through them, its PS reach the API server
through them. Then the platform team makes the real node the User Node, as it would retire one:
untaint it, point `userNode` at it, `pulumi up`, drain the old one. Jupyter (the Jupyter image
built here) and TensorBoard then run for real: Jupyter answers on its NodePort only with the
tenant's token, and TensorBoard's HTTP API, behind its token gate, lists the finished run from the
log volume.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drivers import CLUSTER, Kube
from real_node import (
    BRIDGE_ADDRESS,
    MNIST_ON_THE_NODE,
    REAL_NODE_KEY,
    failure_report,
    first_answer,
    give_volumes_to_pods,
    http_get,
    import_image,
    node_of,
    place_on_real_node,
    platform_settings,
    project,
    real_cluster,
    until,
)

TENANT, STACK, NAMESPACE = "tenant-alice", "real-mnist", "tfk8s-alice"
OLD_USER_NODE = "tfk8s-user-node"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Kube]:
    with real_cluster(f"{CLUSTER}-train") as kube:
        yield kube


def test_pulumi_up_trains_for_real_and_the_ps_retire_themselves(cluster: Kube, tmp_path: Path) -> None:
    start = time.monotonic()
    image = import_image(cluster, "tensorflow")
    imported = time.monotonic() - start
    start = time.monotonic()
    jupyter_image = import_image(cluster, "jupyter")
    jupyter_imported = time.monotonic() - start
    node = node_of(cluster)
    volumes = tmp_path / "volumes"
    cli = project(cluster, tmp_path / "project", "real-node-test")
    platform = "platform-dev"
    cli("stack", "select", "--create", platform)
    for path, value in {
        **platform_settings(volumes),
        "tfk8s:platform.images.tensorflow": image,
        "tfk8s:platform.images.tensorboard": image,
        "tfk8s:platform.images.jupyter": jupyter_image,
        # Jupyter and TensorBoard (with its gate) on the real node's 2 cores.
        "tfk8s:platform.containerDefaults.cpu": "500m",
        "tfk8s:platform.containerDefaults.memory": "1536Mi",
    }.items():
        cli("config", "set", "--stack", platform, "--path", path, value)
    cli("up", "--stack", platform, "--yes", "--skip-preview")
    cli("stack", "select", "--create", TENANT)
    cli("up", "--stack", TENANT, "--yes", "--skip-preview")
    give_volumes_to_pods(cluster, [f"{STACK}/mnist"])

    cli.init_experiment(
        STACK,
        tenant=TENANT,
        settings=MNIST_ON_THE_NODE,
    )
    # On the real node, which keeps its taint: PS and workers ask for it.
    place_on_real_node(cli, STACK, 0)
    # A short run (the trainer's own flag).
    cli.set_value(STACK, "tfk8s:clusters[0].args[0]", "--steps=60")
    up_started = time.monotonic()
    done = cli("up", "--stack", STACK, "--yes", "--skip-preview", check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr + _logs(cluster)
    up_seconds = time.monotonic() - up_started
    pods = [p for p in cluster.get("pods", NAMESPACE) if p["metadata"]["labels"].get("tfk8s.io/stack") == STACK]
    assert pods and all(p["spec"]["nodeName"] == node for p in pods), [
        (p["metadata"]["name"], p["spec"].get("nodeName")) for p in pods
    ]

    def job_done() -> dict[str, Any] | None:
        (job,) = [j for j in cluster.get("jobs", NAMESPACE) if j["metadata"]["labels"].get("tfk8s.io/stack") == STACK]
        status = job.get("status", {})
        # A worker pod may fail and be retried (backoffLimitPerIndex): the run fails with the Job alone.
        failed = [c for c in status.get("conditions", []) if c["type"] == "Failed" and c["status"] == "True"]
        assert not failed, f"{failed}\n{_logs(cluster)}"
        return job if status.get("succeeded") == 2 else None

    job = until("the workers' Job completes", 600, job_done)
    trained = time.monotonic() - up_started

    def ps_retired() -> bool:
        deployments = [d for d in cluster.get("deployments", NAMESPACE) if d["metadata"]["labels"].get("tfk8s.io/stack") == STACK]
        return bool(deployments) and all(d["spec"]["replicas"] == 0 for d in deployments)

    try:
        until("the PS scale their own Deployment to zero", 120, ps_retired)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{_logs(cluster)}") from None
    cli("up", "--stack", STACK, "--yes", "--skip-preview", "--refresh")
    readiness = cli.outputs(STACK)["readiness"]["clusters"]["mnist"]
    assert readiness["phase"] == "Succeeded", readiness
    events = list(volumes.rglob("events.out.tfevents.*"))
    assert events, f"no TensorBoard events under {volumes}"
    print(
        f"\n[real node] image import {imported:.1f} s (jupyter {jupyter_imported:.1f} s); `pulumi up` {up_seconds:.1f} s; "
        f"up to a finished run {trained:.1f} s (Job {job['metadata']['name']}, {job['status'].get('failed', 0)} pods retried); "
        f"{len(events)} event files"
    )
    cli("destroy", "--stack", STACK, "--yes")
    claims = cluster.get("pvc", NAMESPACE)
    assert claims and all(c["status"]["phase"] == "Bound" for c in claims)

    # The platform team makes the real node the User Node: its own taint off (the platform refuses a
    # node with another manager's taints, and says so), the platform pointed at it, the old one drained.
    cluster.run("taint", "node", node, f"{REAL_NODE_KEY}-")
    cli("config", "set", "--stack", platform, "--path", "tfk8s:platform.userNode.name", node)
    cli("config", "set", "--stack", platform, "--path", "tfk8s:platform.userNode.address", BRIDGE_ADDRESS)
    cli("up", "--stack", platform, "--yes", "--skip-preview")
    cluster.run("drain", OLD_USER_NODE, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s")
    moved = time.monotonic()
    done = cli("up", "--stack", TENANT, "--yes", "--skip-preview", "--refresh", check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr + _logs(cluster)
    apps_seconds = time.monotonic() - moved
    report = cli.outputs(TENANT)["readiness"]
    assert report["ready"], report
    apps = [
        p
        for p in cluster.get("pods", NAMESPACE)
        if p["metadata"]["labels"].get("app.kubernetes.io/name") in ("jupyter", "tensorboard")
        and "deletionTimestamp" not in p["metadata"]
    ]
    assert sorted(p["metadata"]["labels"]["app.kubernetes.io/name"] for p in apps) == ["jupyter", "tensorboard"]
    assert all(p["spec"]["nodeName"] == node for p in apps), [(p["metadata"]["name"], p["spec"].get("nodeName")) for p in apps]
    token = base64.b64decode(cluster.get("secret", NAMESPACE, "tfk8s-jupyter-token")["data"]["token"]).decode()

    jupyter = report["jupyter"]["url"]
    assert jupyter.startswith(f"http://{BRIDGE_ADDRESS}:"), jupyter
    assert first_answer(f"{jupyter}api/status").status == 403
    assert http_get(f"{jupyter}api/status", token="not-" + token).status == 403
    answer = http_get(f"{jupyter}api/contents/work/tfk8s", token=token)
    assert answer.status == 200, answer.body[:500]
    assert "master_client.ipynb" in {f["name"] for f in json.loads(answer.body)["content"]}, answer.body[:500]

    board = report["tensorboard"]["url"]
    assert first_answer(f"{board}data/runs").status == 401

    def runs() -> list[str] | None:
        answer = http_get(f"{board}data/runs", token=token)
        assert answer.status == 200, answer.body[:500]
        found = [r for r in json.loads(answer.body) if r.startswith(f"{STACK}/mnist")]
        return found or None

    listed = until("TensorBoard lists the finished run", 120, runs)
    print(f"[real node] Jupyter and TensorBoard up on the real User Node in {apps_seconds:.1f} s; runs {listed}")


def _logs(kube: Kube) -> str:
    return failure_report(kube, NAMESPACE)
