"""An experiment brought up again trains again: a run is one worker Job, not one config.

On the real API server, with the launchers run here as local processes with their pods' real
environment (kwok runs no containers): the PS launcher with its Deployment's env and its service
account's token, as bench/ps_reclaim.py runs it; each worker's launcher with the env the kubelet
would give that very pod (its Job's uid from its controller-uid label, its completion index from
its annotation). A shared directory stands for the user's log volume, which outlives experiments.

Each run: the PS serves until both workers finish, then retires. Then the same stack file again,
after `pulumi destroy` + `pulumi up`, and after a TTL clean-up of the finished Job +
`pulumi up --refresh`: the new run's PS must serve, not find the earlier run's done markers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from drivers import ROOT, SMALL_CLUSTER, Cli, Kube, wait_until

sys.path.insert(0, str(ROOT / "bench"))
from ps_reclaim import current_ps, start_launcher  # noqa: E402

STACK = "rerun"
NAMESPACE = "tfk8s-dora"
JOB = "rerun-mnist-worker"
LAUNCHER = ROOT / "training" / "tfk8s_train" / "launch.py"
FINISHED = {
    "status": {
        "phase": "Succeeded",
        "containerStatuses": [
            {
                "name": "tensorflow",
                "ready": False,
                "restartCount": 0,
                "image": "finished",
                "imageID": "",
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
            }
        ],
    }
}


def pod_env(pod: dict[str, Any]) -> dict[str, str]:
    """The container's environment as the kubelet resolves it for this pod: values, and the
    downward API's fields (namespace, labels, annotations) read from the pod object itself."""
    env = {}
    for entry in pod["spec"]["containers"][0]["env"]:
        if "value" in entry:
            env[entry["name"]] = entry["value"]
            continue
        path = entry["valueFrom"]["fieldRef"]["fieldPath"]
        if path == "metadata.namespace":
            env[entry["name"]] = pod["metadata"]["namespace"]
        else:
            kind, _, key = path.partition("['")
            env[entry["name"]] = pod["metadata"][kind.removeprefix("metadata.")].get(key.removesuffix("']"), "")
    return env


def worker_pods(kube: Kube) -> list[dict[str, Any]]:
    pods = [p for p in kube.get("pods", NAMESPACE) if p["metadata"]["labels"].get("job-name") == JOB]
    return sorted(pods, key=lambda p: p["metadata"]["name"])


def run_workers(kube: Kube, log_dir: Path) -> set[str]:
    """Every worker pod's launcher, here, with that pod's env: it trains (exits 0) and writes its
    done marker. The pods are then reported Succeeded, as the kubelet would. Returns their run uids."""
    uids = set()
    for pod in worker_pods(kube):
        env = {**pod_env(pod), "TFK8S_LOG_DIR": str(log_dir), "TFK8S_CLASSIC_FLAGS": "false", "PATH": os.environ["PATH"]}
        uids.add(env["TFK8S_RUN_UID"])
        done = subprocess.run([sys.executable, str(LAUNCHER), "--", sys.executable, "-c", "pass"], env=env, timeout=60)
        assert done.returncode == 0
        kube.run("patch", "pod", pod["metadata"]["name"], "-n", NAMESPACE, "--subresource=status", "--type=merge",
                 "-p", json.dumps(FINISHED))  # fmt: skip
    return uids


def one_run(kube: Kube, log_dir: Path) -> str:
    """The PS serves until the workers finish, then retires; returns the run's uid."""
    (ps,) = [d for d in current_ps(kube.run, NAMESPACE) if d["metadata"]["name"].startswith("rerun-mnist-ps-")]
    (job,) = [j for j in kube.get("jobs", NAMESPACE) if j["metadata"]["name"] == JOB]
    uid = job["metadata"]["uid"]
    launcher = start_launcher(kube.run, kube.kubeconfig, ps, log_dir.parent)  # its TFK8S_LOG_DIR: <work>/log
    # The PS is not given the uid (it starts beside its Job): it reads it from the Job of its run.
    launcher_env = {e["name"]: e.get("value") for e in ps["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "TFK8S_RUN_UID" not in launcher_env
    assert launcher_env["TFK8S_WATCH_JOB_RUN"] == job["metadata"]["labels"]["tfk8s.io/run"]
    time.sleep(3)  # polling its Job and the run's markers, as in a running PS pod
    assert launcher.poll() is None, launcher.communicate()[0]  # serving: no earlier run's markers count
    assert run_workers(kube, log_dir) == {uid}  # the workers read the same uid from their own labels
    assert launcher.wait(30) == 0
    out = launcher.stdout.read() if launcher.stdout else ""
    assert f"run {uid} (job {JOB}," in out, out  # the PS serves this Job's run
    assert "all of ['worker-0', 'worker-1'] are done; retiring" in out and "already done" not in out, out
    assert {p.name for p in (log_dir / f"run-{uid}" / ".tfk8s" / "done").iterdir()} == {"worker-0", "worker-1"}
    return str(uid)


def test_the_same_experiment_trains_again_after_destroy_and_after_a_ttl_clean_up(
    cli: Cli, kube: Kube, tenants: dict[str, str], tmp_path: Path
) -> None:
    settings = {**SMALL_CLUSTER, "tfk8s:clusters[0].run.ttlSecondsAfterFinished": "1"}
    cli.init_experiment(STACK, tenant=tenants["dora"], settings=settings)
    log_dir = tmp_path / "log"  # the user's log volume (the PS launcher's too): it outlives the experiment

    cli("up", "--stack", STACK, "--yes", "--skip-preview")
    first = one_run(kube, log_dir)

    # The same stack file again after destroy: a new Job, a new run, on the same log volume.
    cli("destroy", "--stack", STACK, "--yes")
    cli("up", "--stack", STACK, "--yes", "--skip-preview")
    assert cli.outputs(STACK)["ready"] is True
    second = one_run(kube, log_dir)
    assert second != first

    # The finished Job's TTL clean-up takes its PS Deployment with it (ownerReferences, which a
    # DeploymentPatch adds): nothing is left waiting at zero replicas, and `up --refresh`
    # re-creates both as a new run.
    wait_until(lambda: not [j for j in kube.get("jobs", NAMESPACE) if j["metadata"]["name"] == JOB], "TTL deletes the Job")
    wait_until(lambda: not [d for d in kube.get("deployments", NAMESPACE) if "rerun-mnist-ps" in d["metadata"]["name"]],
               "the PS Deployment goes with its Job")  # fmt: skip
    cli("up", "--stack", STACK, "--yes", "--skip-preview", "--refresh")
    assert cli.outputs(STACK)["ready"] is True
    third = one_run(kube, log_dir)
    assert len({first, second, third}) == 3
    # Three runs side by side on the volume, each with its own markers (TensorBoard: three runs).
    assert {p.name for p in log_dir.iterdir() if p.name.startswith("run-")} == {f"run-{u}" for u in (first, second, third)}

    # A no-change `up` changes nothing: the run stays the one it is.
    cli("up", "--stack", STACK, "--yes", "--skip-preview", "--expect-no-changes")
    cli("destroy", "--stack", STACK, "--yes")
    cli("stack", "rm", STACK, "--yes")


def test_a_new_experiment_leaves_nothing_to_change_for_the_next_up(cli: Cli, tenants: dict[str, str]) -> None:
    """Each PS's owner patch keeps the API server's answer as its state (awaits.PATCH_NO_AWAIT).
    With the provider's await after the patch, that state was at times the Deployment from before
    the patch, without the owner, and the next `up` patched again: 3 of 12 patches on this
    machine. Four PS, two new experiments: eight patches, each a chance to catch it."""
    stack = "owners"
    settings = {
        **SMALL_CLUSTER,
        "tfk8s:clusters[0].ps.count": "4",
        "tfk8s:clusters[0].ps.cpu": "100m",
        "tfk8s:clusters[0].ps.memory": "256Mi",
    }
    cli.init_experiment(stack, tenant=tenants["dora"], settings=settings)
    for _ in range(2):
        cli("up", "--stack", stack, "--yes", "--skip-preview")
        cli("preview", "--stack", stack, "--expect-no-changes")
        cli("destroy", "--stack", stack, "--yes")
    cli("stack", "rm", stack, "--yes")
