"""The mission on a real node: `pulumi up` of a platform, a tenant and an experiment whose PS and
workers run the real trainer in containers (the training image built here), find each other
through cluster DNS, train, and end: the workers' Job completes, the PS retire themselves through
the API from inside their pods, and readiness says the run succeeded; `destroy` leaves the
tenant's volumes, with the run's TensorBoard events on the log volume.

The cluster's simulated training nodes are cordoned and its real node left untainted
(TFK8S_REAL_NODE_TAINT=none), so the scheduler puts every training pod on the real node with no
placement in the stack file; the tenant's Jupyter and TensorBoard stay on the simulated User Node.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drivers import CLUSTER, ROOT, Cli, Kube

import toolenv

REALNODE = str(ROOT / "hack" / "realnode.sh")
TENANT, STACK, NAMESPACE = "tenant-alice", "real-mnist", "tfk8s-alice"
# The image's user (hack/images.py) and the platform's default pod identity for TensorFlow pods.
UID = 1000


@pytest.fixture(scope="module")
def cluster() -> Iterator[Kube]:
    name = f"{CLUSTER}-train"
    env = {**os.environ, "TFK8S_CLUSTER_NAME": name, "TFK8S_REAL_NODE_TAINT": "none"}
    check = subprocess.run([REALNODE, "check"], capture_output=True, text=True, env=env)
    assert check.returncode == 0, f"this machine cannot run the real-node tests: {check.stdout.strip()}"
    with toolenv.throwaway_cluster(name) as kubeconfig:
        subprocess.run([REALNODE, "start"], check=True, env=env)
        kube = Kube(kubeconfig, cluster=name)
        for node in kube.get("nodes"):
            if node["metadata"]["name"] != "tfk8s-user-node" and "kwok.x-k8s.io/node" in node["metadata"].get("annotations", {}):
                kube.run("cordon", node["metadata"]["name"])
        yield kube


def _import(kube: Kube, what: str) -> str:
    env = {**os.environ, "TFK8S_CLUSTER_NAME": kube.cluster or ""}
    return subprocess.run([REALNODE, "import", what], check=True, capture_output=True, text=True, env=env).stdout.strip()


def _until(what: str, seconds: float, probe: Any) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        found = probe()
        if found:
            return found
        assert time.monotonic() < deadline, f"{what} within {seconds} s"
        time.sleep(1)


def test_pulumi_up_trains_for_real_and_the_ps_retire_themselves(cluster: Kube, tmp_path: Path) -> None:
    start = time.monotonic()
    image = _import(cluster, "tensorflow")
    imported = time.monotonic() - start
    work = toolenv.project_copy(tmp_path / "project")
    volumes = tmp_path / "volumes"
    env = {
        **os.environ,
        "PULUMI_BACKEND_URL": f"file://{work / 'state'}",
        "KUBECONFIG": str(cluster.kubeconfig),
        "PULUMI_CONFIG_PASSPHRASE": "real-node-test",
    }
    env.pop("PULUMI_CONFIG_PASSPHRASE_FILE", None)
    env.update(toolenv.exported(env))
    cli = Cli(work, env)
    platform = "platform-dev"
    cli("stack", "select", "--create", platform)
    for path, value in {
        "tfk8s:platform.storage.local.hostPathRoot": str(volumes),
        "tfk8s:platform.images.tensorflow": image,
        "tfk8s:platform.images.tensorboard": image,
    }.items():
        cli("config", "set", "--stack", platform, "--path", path, value)
    cli("up", "--stack", platform, "--yes", "--skip-preview")
    cli("stack", "select", "--create", TENANT)
    cli("up", "--stack", TENANT, "--yes", "--skip-preview")
    # hostPath volumes, and the log volume's per-cluster sub-directory (a subPath mount), are
    # created by the kubelet as root: give them to the pods' user first, as a storage provisioner
    # (or fsGroup, which hostPath ignores) would. (README "A real node": what this means for
    # hostPath storage.)
    for volume in cluster.get("pv"):
        path = Path(volume["spec"]["hostPath"]["path"])
        for directory in (path, path / STACK, path / STACK / "mnist") if "log" in path.name else (path,):
            directory.mkdir(parents=True, exist_ok=True)
            os.chown(directory, UID, UID)

    cli.init_experiment(
        STACK,
        tenant=TENANT,
        settings={
            "tfk8s:clusters[0].name": "mnist",
            "tfk8s:clusters[0].ps.cpu": "250m",
            "tfk8s:clusters[0].ps.memory": "1Gi",
            "tfk8s:clusters[0].workers.count": "2",
            "tfk8s:clusters[0].workers.cpu": "500m",
            "tfk8s:clusters[0].workers.memory": "1500Mi",
        },
    )
    # A short run (the trainer's flag; `--` keeps the CLI from reading it as its own).
    subprocess.run(
        [
            "pulumi",
            "config",
            "set",
            "--stack",
            STACK,
            "--path",
            "tfk8s:clusters[0].args[0]",
            "--non-interactive",
            "--",
            "--steps=60",
        ],
        cwd=work,
        env=env,
        check=True,
        capture_output=True,
    )
    up_started = time.monotonic()
    done = cli("up", "--stack", STACK, "--yes", "--skip-preview", check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr + _logs(cluster)
    up_seconds = time.monotonic() - up_started
    pods = [p for p in cluster.get("pods", NAMESPACE) if p["metadata"]["labels"].get("tfk8s.io/stack") == STACK]
    node = f"tfk8s-real-{cluster.cluster}"
    assert pods and all(p["spec"]["nodeName"] == node for p in pods), [
        (p["metadata"]["name"], p["spec"].get("nodeName")) for p in pods
    ]

    def job_done() -> dict[str, Any] | None:
        (job,) = [j for j in cluster.get("jobs", NAMESPACE) if j["metadata"]["labels"].get("tfk8s.io/stack") == STACK]
        status = job.get("status", {})
        assert not status.get("failed"), _logs(cluster)
        return job if status.get("succeeded") == 2 else None

    job = _until("the workers' Job completes", 600, job_done)
    trained = time.monotonic() - up_started

    def ps_retired() -> bool:
        deployments = [d for d in cluster.get("deployments", NAMESPACE) if d["metadata"]["labels"].get("tfk8s.io/stack") == STACK]
        return bool(deployments) and all(d["spec"]["replicas"] == 0 for d in deployments)

    try:
        _until("the PS scale their own Deployment to zero", 120, ps_retired)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{_logs(cluster)}") from None
    cli("up", "--stack", STACK, "--yes", "--skip-preview", "--refresh")
    readiness = cli.outputs(STACK)["readiness"]["clusters"]["mnist"]
    assert readiness["phase"] == "Succeeded", readiness
    events = list(volumes.rglob("events.out.tfevents.*"))
    assert events, f"no TensorBoard events under {volumes}"
    print(
        f"\n[real node] image import {imported:.1f} s; `pulumi up` {up_seconds:.1f} s; up to a finished run "
        f"{trained:.1f} s (Job {job['metadata']['name']}); {len(events)} event files"
    )
    cli("destroy", "--stack", STACK, "--yes")
    claims = cluster.get("pvc", NAMESPACE)
    assert claims and all(c["status"]["phase"] == "Bound" for c in claims)


def _logs(kube: Kube) -> str:
    out = []
    for pod in kube.get("pods", NAMESPACE):
        name = pod["metadata"]["name"]
        done = subprocess.run(
            [
                kube.binary,
                "--kubeconfig",
                str(kube.kubeconfig),
                "logs",
                "-n",
                NAMESPACE,
                name,
                "--all-containers",
                "--tail",
                "30",
            ],
            capture_output=True,
            text=True,
        )
        out.append(f"--- {name}\n{done.stdout}{done.stderr}")
    return "\n".join(out) + json.dumps([p["status"] for p in kube.get("pods", NAMESPACE)])[:4000]
