"""Time to readiness: `pulumi up` vs `kubectl apply` + `kubectl wait` of the same objects.

For the dev stack and a 3-user x 2-cluster stack, on a throwaway kwok cluster (`tfk8s-bench`,
started and deleted by this script; the `make up` cluster is never touched):
  1. pulumi up from nothing until it returns (it waits for PS, workers, claims, Jupyter and
     TensorBoard itself), then a no-change `pulumi up` and a `pulumi preview`; then destroy;
  2. the same program rendered to YAML (the provider's `render_yaml_to_directory`), applied with
     `kubectl apply --server-side` and waited on with `kubectl wait` for the same conditions;
     then deleted.
Ratios are pulumi / kubectl. The pulumi side is the plain CLI with tfk8s's language host, in the
environment `make env` prints, timed as a user typing `pulumi up` waits. The rendered YAML holds
Secrets in plain text: it lives in a temporary directory that is removed at the end.

    make tools && .venv/bin/python bench/deploy_vs_apply.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "infra"), str(ROOT / "hack")]

import pulumi  # noqa: E402
import pulumi.automation as auto  # noqa: E402
import pulumi_kubernetes as k8s  # noqa: E402

import toolenv  # noqa: E402

KUBECTL = toolenv.KUBECTL
ORDER = [
    "Namespace",
    "StorageClass",
    "PersistentVolume",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "Secret",
    "ConfigMap",
    "PersistentVolumeClaim",
    "Service",
    "Deployment",
    "Job",
    "Node",
]


def big_users() -> list[dict[str, Any]]:
    base = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())["config"]["tfk8s:users"][0]
    users = []
    for u in range(3):
        user = copy.deepcopy(base)
        user["name"] = f"user{u}"
        user["clusters"] = [dict(copy.deepcopy(base["clusters"][0]), name=f"c{c}") for c in range(2)]
        users.append(user)
    return users


def kubectl(*args: str) -> str:
    return subprocess.run(
        [KUBECTL, "--kubeconfig", os.environ["KUBECONFIG"], *args], check=True, capture_output=True, text=True
    ).stdout


def project(users: list[dict[str, Any]] | None) -> Path:
    work = toolenv.project_copy(Path(tempfile.mkdtemp(prefix="tfk8s-bench-")))
    os.environ["PULUMI_BACKEND_URL"] = f"file://{work / 'state'}"
    if users is not None:
        config = yaml.safe_load((work / "stacks" / "Pulumi.dev.yaml").read_text())
        config["config"]["tfk8s:users"] = users
        (work / "stacks" / "Pulumi.dev.yaml").write_text(yaml.safe_dump(config))
    return work


def timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def pulumi_cli(work: Path, *args: str) -> float:
    """Seconds one plain `pulumi` command takes, as a user typing it waits."""
    started = time.perf_counter()
    subprocess.run(
        ["pulumi", *args, "--stack", "dev", "--non-interactive", "--color", "never"], cwd=work, check=True, capture_output=True
    )
    return time.perf_counter() - started


def pulumi_side(users: list[dict[str, Any]] | None) -> dict[str, float]:
    work = project(users)
    subprocess.run(["pulumi", "stack", "init", "dev", "--non-interactive"], cwd=work, check=True, capture_output=True)
    result = {"up": pulumi_cli(work, "up", "--yes", "--skip-preview")}
    ready = subprocess.run(["pulumi", "stack", "output", "ready", "--stack", "dev"], cwd=work, capture_output=True, text=True)
    assert ready.stdout.strip() == "true", ready.stdout + ready.stderr
    result["up (no change)"] = pulumi_cli(work, "up", "--yes", "--skip-preview")
    result["preview"] = pulumi_cli(work, "preview")
    pulumi_cli(work, "destroy", "--yes")
    delete_kept()
    return result


def render(users: list[dict[str, Any]] | None, out: Path) -> None:
    """Run the same program with every Kubernetes resource sent to a rendering provider."""
    from tfk8s import config
    from tfk8s.program import PROJECT_ROOT, build

    def program() -> None:
        renderer = k8s.Provider("render", render_yaml_to_directory=str(out))
        # The program reads the live User Node (user_node.py checks who owns its taints): that
        # read needs the cluster, everything else goes to the renderer.
        live = k8s.Provider("live", kubeconfig=kubeconfig)

        def to_renderer(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
            if args.type_.startswith("kubernetes:"):
                provider = live if args.type_ == "kubernetes:core/v1:Node" else renderer
                return pulumi.ResourceTransformationResult(
                    args.props, pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(provider=provider))
                )
            return None

        pulumi.runtime.register_stack_transformation(to_renderer)
        build(config.load(PROJECT_ROOT, None))  # not main(): its cluster preflight would look at the popped KUBECONFIG

    work = project(users)
    kubeconfig = os.environ.pop("KUBECONFIG")  # a rendering provider must not see a cluster
    stack = auto.create_or_select_stack("render", project_name="tfk8s", program=program, work_dir=str(work))
    stack.set_all_config(
        {
            k: auto.ConfigValue(json.dumps(v) if not isinstance(v, str) else v)
            for k, v in yaml.safe_load((work / "stacks" / "Pulumi.dev.yaml").read_text())["config"].items()
        }
    )
    try:
        stack.up(color="never")
    finally:
        os.environ["KUBECONFIG"] = kubeconfig


def kubectl_side(users: list[dict[str, Any]] | None) -> dict[str, float]:
    out = Path(tempfile.mkdtemp(prefix="tfk8s-render-"))
    try:
        render(users, out)
        docs = [d for f in sorted(out.rglob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
        docs.sort(key=lambda d: ORDER.index(d["kind"]) if d["kind"] in ORDER else len(ORDER))
        manifest = out / "all.yaml"
        manifest.write_text(yaml.safe_dump_all(docs))
        namespaces = sorted({d["metadata"]["namespace"] for d in docs if d["metadata"].get("namespace")})

        jobs = [d for d in docs if d["kind"] == "Job"]

        def apply_and_wait(workers_ready: str) -> None:
            kubectl("apply", "--server-side", "--force-conflicts", "-f", str(manifest))
            for ns in namespaces:
                kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Bound", "pvc", "--all", "--timeout=300s")
                kubectl("wait", "-n", ns, "--for=condition=Available", "deployment", "--all", "--timeout=300s")
                if workers_ready == "pods":
                    kubectl("wait", "-n", ns, "--for=condition=Ready", "pod", "-l", "tfk8s.io/role=worker", "--timeout=300s")
            if workers_ready == "job":
                for job in jobs:
                    ready = f"--for=jsonpath={{.status.ready}}={job['spec']['parallelism']}"
                    kubectl("wait", "-n", job["metadata"]["namespace"], ready, f"job/{job['metadata']['name']}", "--timeout=300s")

        # Two ways to wait for the workers, each from an empty cluster:
        # - "job": the Job's own .status.ready, the condition `pulumi up` awaits (see awaits.py);
        # - "pods": each worker pod's Ready condition; the Job controller batches status updates
        #   (up to 1 s), so this sees the same fact earlier than any wait on the Job can.
        result = {}
        for workers_ready in ("job", "pods"):
            result[f"apply+wait ({workers_ready})"] = timed(lambda: apply_and_wait(workers_ready))  # noqa: B023
            clean_up(out, docs)
        return result
    finally:
        shutil.rmtree(out, ignore_errors=True)


def clean_up(out: Path, docs: list[dict[str, Any]]) -> None:
    # The NodePatch renders as a Node manifest: never delete the node, only undo the patch.
    owned = out / "owned.yaml"
    owned.write_text(yaml.safe_dump_all([d for d in docs if d["kind"] != "Node"]))
    kubectl("delete", "--wait=true", "-f", str(owned), "--ignore-not-found")
    for node in (d for d in docs if d["kind"] == "Node"):
        for key in node["metadata"].get("labels", {}):
            kubectl("label", "node", node["metadata"]["name"], f"{key}-")
        for taint in node.get("spec", {}).get("taints", []):
            kubectl("taint", "node", node["metadata"]["name"], f"{taint['key']}-")
    delete_kept()


def delete_kept() -> None:
    """Both sides start from an empty cluster: drop namespaces and volumes kept on destroy."""
    for ns in json.loads(kubectl("get", "ns", "-o", "json"))["items"]:
        if ns["metadata"]["name"].startswith("tfk8s-"):
            kubectl("delete", "ns", ns["metadata"]["name"], "--wait=true")
    kubectl("delete", "pv", "--all", "--wait=true")
    kubectl("delete", "storageclass", "--all", "--wait=true")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side per stack; medians are reported")
    args = parser.parse_args()
    with toolenv.throwaway_cluster("tfk8s-bench") as kubeconfig:
        os.environ.update(toolenv.exported({"KUBECONFIG": str(kubeconfig)}))
        compare(args.repeat)


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def compare(repeat: int) -> None:
    print(f"medians of {repeat} runs per side, each from an empty cluster, sides alternating")
    print(
        "| stack | pulumi up (s) | apply+wait, Job ready (s) | ratio | apply+wait, pods Ready (s) | ratio "
        "| no-change up (s) | preview (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, users in (("dev (1 user x 1 cluster)", None), ("3 users x 2 clusters", big_users())):
        theirs_runs, ours_runs = [], []
        for _ in range(repeat):
            theirs_runs.append(kubectl_side(users))
            ours_runs.append(pulumi_side(users))
        theirs, ours = medians(theirs_runs), medians(ours_runs)
        job, pods = theirs["apply+wait (job)"], theirs["apply+wait (pods)"]
        print(
            f"| {label} | {ours['up']:.1f} | {job:.1f} | {ours['up'] / job:.2f} | {pods:.1f} | {ours['up'] / pods:.2f} "
            f"| {ours['up (no change)']:.1f} | {ours['preview']:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
