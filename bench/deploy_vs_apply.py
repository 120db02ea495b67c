"""Time to readiness of a new experiment: `pulumi up` vs `kubectl apply` + `kubectl wait` of the same objects.

On a throwaway kwok cluster (`tfk8s-bench`, started and deleted by this script; the `make up`
cluster is never touched) the platform-dev platform and its tenant-alice tenant are deployed
once; then, for the dev experiment of that tenant (1 cluster) and a 3-cluster experiment, alternating:
  1. `pulumi up` of the experiment until it returns (it waits for PS and workers itself), then a
     no-change `pulumi up` and a `pulumi preview`; then destroy;
  2. the same experiment program rendered to YAML (the provider's `render_yaml_to_directory`),
     applied with `kubectl apply --server-side` and waited on with `kubectl wait` for the same
     conditions; then deleted.
Ratios are pulumi / kubectl. The pulumi side is the plain CLI with tfk8s's language host, in the
environment `make env` prints, timed as a user typing `pulumi up` waits. The rendered YAML holds
Secrets in plain text: it lives in a temporary directory that is removed at the end.

    make tools && .venv/bin/python bench/deploy_vs_apply.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import copy
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
sys.path[:0] = [str(ROOT / "infra"), str(ROOT / "hack"), str(ROOT / "bench")]

from rendering import render  # noqa: E402

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


def three_clusters() -> list[dict[str, Any]]:
    base = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())["config"]["tfk8s:clusters"][0]
    return [dict(copy.deepcopy(base), name=f"c{c}") for c in range(3)]


def kubectl(*args: str) -> str:
    return subprocess.run(
        [KUBECTL, "--kubeconfig", os.environ["KUBECONFIG"], *args], check=True, capture_output=True, text=True
    ).stdout


def set_clusters(work: Path, clusters: list[dict[str, Any]] | None) -> None:
    if clusters is not None:
        config = yaml.safe_load((work / "stacks" / "Pulumi.dev.yaml").read_text())
        config["config"]["tfk8s:clusters"] = clusters
        (work / "stacks" / "Pulumi.dev.yaml").write_text(yaml.safe_dump(config))


def timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def pulumi_cli(work: Path, *args: str, stack: str = "dev") -> float:
    """Seconds one plain `pulumi` command takes, as a user typing it waits."""
    started = time.perf_counter()
    subprocess.run(
        ["pulumi", *args, "--stack", stack, "--non-interactive", "--color", "never"], cwd=work, check=True, capture_output=True
    )
    return time.perf_counter() - started


BASE = ("platform-dev", "tenant-alice")  # what the dev experiment builds on, in deploy order


def platform(work: Path) -> None:
    """The running platform and tenant every experiment is measured against (deployed once, not timed)."""
    os.environ["PULUMI_BACKEND_URL"] = f"file://{work / 'state'}"
    for stack in (*BASE, "dev", "render"):
        subprocess.run(["pulumi", "stack", "init", stack, "--non-interactive"], cwd=work, check=True, capture_output=True)
    for stack in BASE:
        pulumi_cli(work, "up", "--yes", "--skip-preview", stack=stack)


def pulumi_side(work: Path) -> dict[str, float]:
    result = {"up": pulumi_cli(work, "up", "--yes", "--skip-preview")}
    ready = subprocess.run(["pulumi", "stack", "output", "ready", "--stack", "dev"], cwd=work, capture_output=True, text=True)
    assert ready.stdout.strip() == "true", ready.stdout + ready.stderr
    result["up (no change)"] = pulumi_cli(work, "up", "--yes", "--skip-preview")
    result["preview"] = pulumi_cli(work, "preview")
    pulumi_cli(work, "destroy", "--yes")
    return result


def render_experiment(work: Path, out: Path) -> None:
    """The dev experiment's objects, as `pulumi up -s dev` would create them."""
    from tfk8s import program
    from tfk8s.schema_experiment import ExperimentStack
    from tfk8s.stack_config import load

    def declare() -> None:
        stack = load()
        assert isinstance(stack, ExperimentStack)
        stack = stack.model_copy(update={"experiment": "dev"})  # the names `pulumi up -s dev` gives
        # No ownership reads (read=None): the rendered objects are applied by kubectl, not adopted.
        program.run_experiment(stack, None, None, os.environ, ROOT)

    render(work, out, yaml.safe_load((work / "stacks" / "Pulumi.dev.yaml").read_text())["config"], declare)


def kubectl_side(work: Path) -> dict[str, float]:
    out = Path(tempfile.mkdtemp(prefix="tfk8s-render-"))
    try:
        render_experiment(work, out)
        docs = [d for f in sorted(out.rglob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
        docs.sort(key=lambda d: ORDER.index(d["kind"]) if d["kind"] in ORDER else len(ORDER))
        manifest = out / "all.yaml"
        manifest.write_text(yaml.safe_dump_all(docs))
        namespaces = sorted({d["metadata"]["namespace"] for d in docs if d["metadata"].get("namespace")})

        jobs = [d for d in docs if d["kind"] == "Job"]
        # A run is its Job's uid (tfk8s.training_cluster): the PS Deployments (owned by the Job,
        # given its uid) and the Layout can only be written once the Job exists, with kubectl as
        # with pulumi. So: everything else first, then read the uid, then those.
        after_job = [d for d in docs if d["kind"] == "Deployment" and d["spec"]["template"]["metadata"]["labels"].get(
            "tfk8s.io/role") == "ps" or d["kind"] == "Layout"]  # fmt: skip
        first = out / "first.yaml"
        first.write_text(yaml.safe_dump_all([d for d in docs if not any(d is a for a in after_job)]))

        def run_job_of(doc: dict[str, Any]) -> str:
            if doc["kind"] == "Deployment":
                return str(doc["metadata"]["ownerReferences"][0]["name"])
            cluster = doc["metadata"]["name"].removesuffix("-layout")
            return f"{cluster}-chief" if any(j["metadata"]["name"] == f"{cluster}-chief" for j in jobs) else f"{cluster}-worker"

        def with_uid(doc: dict[str, Any], uids: dict[str, str]) -> dict[str, Any]:
            doc, uid = copy.deepcopy(doc), uids[run_job_of(doc)]
            if doc["kind"] == "Layout":
                doc["spec"]["runUid"] = uid
                return doc
            for owner in doc["metadata"].get("ownerReferences", []):
                owner["uid"] = uid
            for entry in doc["spec"]["template"]["spec"]["containers"][0]["env"]:
                if entry["name"] == "TFK8S_RUN_UID":
                    entry["value"] = uid
            return doc

        def apply_and_wait(workers_ready: str) -> None:
            kubectl("apply", "--server-side", "--force-conflicts", "-f", str(first))
            uids = {
                j["metadata"]["name"]: kubectl(
                    "get", "job", j["metadata"]["name"], "-n", j["metadata"]["namespace"], "-o", "jsonpath={.metadata.uid}"
                ).strip()
                for j in jobs
            }
            rest = out / "after-job.yaml"
            rest.write_text(yaml.safe_dump_all([with_uid(d, uids) for d in after_job]))
            kubectl("apply", "--server-side", "--force-conflicts", "-f", str(rest))
            for ns in namespaces:
                kubectl("wait", "-n", ns, "--for=condition=Available", "deployment", "-l", "tfk8s.io/role=ps", "--timeout=300s")
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
    owned = out / "owned.yaml"
    owned.write_text(yaml.safe_dump_all(docs))
    kubectl("delete", "--wait=true", "-f", str(owned), "--ignore-not-found")


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
    work = toolenv.project_copy(Path(tempfile.mkdtemp(prefix="tfk8s-bench-")))
    platform(work)
    print(f"a new experiment on a running platform; medians of {repeat} runs per side, sides alternating")
    print(
        "| experiment | pulumi up (s) | apply+wait, Job ready (s) | ratio | apply+wait, pods Ready (s) | ratio "
        "| no-change up (s) | preview (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, clusters in (("dev (1 cluster: 1 PS, 2 workers)", None), ("3 clusters", three_clusters())):
        set_clusters(work, clusters)
        theirs_runs, ours_runs = [], []
        for _ in range(repeat):
            theirs_runs.append(kubectl_side(work))
            ours_runs.append(pulumi_side(work))
        theirs, ours = medians(theirs_runs), medians(ours_runs)
        job, pods = theirs["apply+wait (job)"], theirs["apply+wait (pods)"]
        print(
            f"| {label} | {ours['up']:.1f} | {job:.1f} | {ours['up'] / job:.2f} | {pods:.1f} | {ours['up'] / pods:.2f} "
            f"| {ours['up (no change)']:.1f} | {ours['preview']:.1f} |",
            flush=True,
        )
    for stack in reversed(BASE):
        pulumi_cli(work, "destroy", "--yes", stack=stack)


if __name__ == "__main__":
    main()
