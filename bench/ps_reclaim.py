"""PS-reclaim latency: the last worker failed -> the run's parameter-server pods are gone.

On a throwaway kwok cluster (`tfk8s-bench`, started and deleted here) the platform-dev, tenant-alice and dev
stacks are deployed, dev with `backoffLimitPerIndex: 0`. kwok runs no containers, so each PS task's launcher runs here as
a local process exactly as it would in its pod: the PS container's environment, the PS service
account's own token (`kubectl create token`), the real API server. Then every worker pod is
failed the way a kubelet reports a crashed container (status subresource, phase Failed, exit 1),
and the clock runs until the Job is Failed (the Job controller), the launcher has retired its
Deployment and exited, and the PS pods are gone (Deployment controller, kwok's deletion).
`--repeat` runs, each a fresh run (`run.number` bumped); medians and worst case.

    make tools && .venv/bin/python bench/ps_reclaim.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "lab")]

import toolenv  # noqa: E402

Kubectl = Callable[..., str]
SERVER = "import time\nwhile True: time.sleep(0.05)"  # stands in for the TF server the launcher supervises
CRASHED = {
    "status": {
        "phase": "Failed",
        "containerStatuses": [
            {
                "name": "tensorflow",
                "ready": False,
                "restartCount": 0,
                "image": "crashed",
                "imageID": "",
                "state": {"terminated": {"exitCode": 1, "reason": "Error"}},
            }
        ],
    }
}


def get(kubectl: Kubectl, *args: str) -> Any:
    return json.loads(kubectl("get", *args, "-o", "json"))


def current_ps(kubectl: Kubectl, namespace: str) -> list[dict[str, Any]]:
    deployments = get(kubectl, "deployments", "-n", namespace)["items"]
    return [d for d in deployments if d["metadata"]["labels"].get("tfk8s.io/role") == "ps" and d["spec"].get("replicas") != 0]


def start_launcher(kubectl: Kubectl, kubeconfig: Path, ps: dict[str, Any], work: Path) -> subprocess.Popen[str]:
    """The PS pod's launcher, run here with that pod's environment and service account."""
    namespace = ps["metadata"]["namespace"]
    pod = ps["spec"]["template"]["spec"]
    sa = work / f"sa-{ps['metadata']['name']}"
    sa.mkdir(parents=True, exist_ok=True)
    (sa / "token").write_text(kubectl("create", "token", pod["serviceAccountName"], "-n", namespace))
    config = json.loads(kubectl("config", "view", "--raw", "-o", "json"))["clusters"][0]["cluster"]
    shutil.copy(config["certificate-authority"], sa / "ca.crt")
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"] if "value" in e}
    env.update(
        TFK8S_NAMESPACE=namespace,
        TFK8S_KUBE_API=config["server"],
        TFK8S_SA_DIR=str(sa),
        TFK8S_LOG_DIR=str(work / "log"),
        TFK8S_CLASSIC_FLAGS="false",
        PATH=os.environ["PATH"],
    )
    launcher = ROOT / "training" / "tfk8s_train" / "launch.py"
    return subprocess.Popen(
        [sys.executable, str(launcher), "--", sys.executable, "-c", SERVER],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def reclaim(kubectl: Kubectl, kubeconfig: Path, namespace: str, job: str, work: Path) -> dict[str, Any]:
    """One run: fail every worker, time Job Failed, launcher exit and PS pods gone (seconds from the last failure)."""
    ps = current_ps(kubectl, namespace)
    runs = {d["spec"]["template"]["metadata"]["labels"]["tfk8s.io/run"] for d in ps}
    launchers = [start_launcher(kubectl, kubeconfig, d, work) for d in ps]
    time.sleep(2.0)  # the launchers are up and watching their Job, as in a running PS pod
    workers = get(kubectl, "pods", "-n", namespace, "-l", f"tfk8s.io/role=worker,job-name={job}")["items"]
    for pod in workers:
        patch = json.dumps(CRASHED)
        kubectl("patch", "pod", pod["metadata"]["name"], "-n", namespace, "--subresource=status", "--type=merge", "-p", patch)
    failed_at = time.monotonic()
    seen: dict[str, float] = {}
    while time.monotonic() - failed_at < 60 and len(seen) < 3:
        now = time.monotonic() - failed_at
        conditions = get(kubectl, "job", job, "-n", namespace).get("status", {}).get("conditions", [])
        if "job_failed" not in seen and any(c["type"] == "Failed" and c["status"] == "True" for c in conditions):
            seen["job_failed"] = now
        if "launchers_exited" not in seen and all(launcher.poll() is not None for launcher in launchers):
            seen["launchers_exited"] = now
        selector = f"tfk8s.io/role=ps,tfk8s.io/run in ({','.join(sorted(runs))})"
        if "ps_pods_gone" not in seen and not get(kubectl, "pods", "-n", namespace, "-l", selector)["items"]:
            seen["ps_pods_gone"] = now
        time.sleep(0.05)
    for launcher in launchers:
        if launcher.poll() is None:
            launcher.kill()
    return {
        **seen,
        "exit_codes": [launcher.wait() for launcher in launchers],
        "logs": [launcher.stdout.read() if launcher.stdout else "" for launcher in launchers],
        "replicas": [get(kubectl, "deployment", d["metadata"]["name"], "-n", namespace)["spec"]["replicas"] for d in ps],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tfk8s-bench-reclaim-"))
    try:
        with toolenv.throwaway_cluster("tfk8s-bench") as kubeconfig:
            backend = f"file://{work / 'project' / 'state'}"
            os.environ.update(toolenv.exported({"KUBECONFIG": str(kubeconfig), "PULUMI_BACKEND_URL": backend}))
            measure(args.repeat, kubeconfig, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(repeat: int, kubeconfig: Path, work: Path) -> None:
    def kubectl(*a: str) -> str:
        argv = [toolenv.KUBECTL, "--kubeconfig", str(kubeconfig), *a]
        return subprocess.run(argv, check=True, capture_output=True, text=True).stdout

    project = toolenv.project_copy(work / "project")

    def pulumi(*a: str, stack: str = "dev") -> None:
        subprocess.run(["pulumi", *a, "--stack", stack, "--non-interactive"], cwd=project, check=True, capture_output=True)

    base = ("platform-dev", "tenant-alice")  # what dev builds on, in deploy order
    for stack in (*base, "dev"):
        subprocess.run(["pulumi", "stack", "init", stack, "--non-interactive"], cwd=project, check=True, capture_output=True)
    for stack in base:
        pulumi("up", "--yes", "--skip-preview", stack=stack)
    pulumi("config", "set", "--path", "tfk8s:clusters[0].workers.backoffLimitPerIndex", "0")
    results = []
    for number in range(repeat):
        pulumi("config", "set", "--path", "tfk8s:clusters[0].run.number", str(number))
        pulumi("up", "--yes", "--skip-preview")
        result = reclaim(kubectl, kubeconfig, "tfk8s-alice", "dev-mnist-worker", work / f"run-{number}")
        assert result["exit_codes"] == [0] and result["replicas"] == [0], result
        results.append(result)
    pulumi("destroy", "--yes")
    for stack in reversed(base):
        pulumi("destroy", "--yes", stack=stack)
    version = server_version(kubectl)
    print(f"PS reclaim on kwok (Kubernetes {version}), {repeat} runs, seconds after the last worker failed")
    print("| event | median (s) | worst (s) |")
    print("|---|---:|---:|")
    for key, label in (
        ("job_failed", "Job Failed (Job controller)"),
        ("launchers_exited", "PS launcher retired its Deployment and exited"),
        ("ps_pods_gone", "PS pods gone (the goal: <= 1.2 s)"),
    ):
        values = [r[key] for r in results]
        print(f"| {label} | {statistics.median(values):.2f} | {max(values):.2f} |")


def server_version(kubectl: Kubectl) -> str:
    return str(json.loads(kubectl("version", "-o", "json"))["serverVersion"]["gitVersion"])


if __name__ == "__main__":
    main()
