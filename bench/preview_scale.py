"""What a no-change `pulumi preview` costs per resource, against `kubectl diff --server-side` of the
same live objects: experiments of 1, 10 and 30 clusters (9 resources each, plus the trainer).

On a throwaway kwok cluster (`tfk8s-bench-preview`, started and deleted here, with its state)
platform-dev and tenant-alice (its quota raised so that 30 clusters fit) are deployed once; then,
for each size, an experiment stack of that many small clusters (1 PS and 1 worker of 100m each)
is created by `pulumi up`, and, alternating, --repeat times each:
  * a no-change `pulumi preview` of it (the plain CLI in the environment `make env` prints);
  * `kubectl diff --server-side` of exactly the objects the stack holds (taken from its state's
    outputs, without what the server writes: status, uid, resourceVersion, managedFields), which
    dry-runs each object against the API server as the provider's preview does.
The per-resource cost is the slope between the smallest and the largest size: what one more
resource adds, with each side's fixed cost (CLI, engine, provider and program start; kubectl's
start and discovery) left out. The experiment is destroyed before the next size.

With `--baseline REV[,REV...]` the program as of each git revision previews an experiment of the
same size beside this tree's (deploy_vs_apply.baseline: its own project copy and the environment
its own `make env` prints; every program's stack shares tenant-alice's salt, which moves the fixed
cost, not the slope), the programs' previews alternating with kubectl's: a before-and-after of the
per-resource cost in one run. kubectl diffs this tree's objects.

    make tools && .venv/bin/python bench/preview_scale.py [--sizes 1,10,30] [--repeat 3] [--baseline REV[,REV...]]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "lab"), str(ROOT / "bench")]

from deploy_vs_apply import Program, baseline, init, pulumi_cli  # noqa: E402

import toolenv  # noqa: E402

CLUSTER = "tfk8s-bench-preview"
BASE = ("platform-dev", "tenant-alice")
SMALL = {"cpu": "100m", "memory": "128Mi"}
# Room for 30 clusters of 2 pods and 3 Services each, per program (tenant-alice's own quota, over
# the platform's default): this tree and two baselines.
QUOTA = {"cpu": "64", "memory": "256Gi", "pods": 400, "services": 400}
SERVER_FIELDS = ("uid", "resourceVersion", "managedFields", "creationTimestamp", "generation")


def experiment(clusters: int, tree: Path) -> dict[str, Any]:
    """tenant-alice's experiment of `clusters` clusters, for the program in `tree`: a revision from
    before tenant contracts (tfk8s.stack_kinds.tenant_contract) names the tenant stack, not its namespace."""
    tenant = (
        {"tfk8s:namespace": "tfk8s-alice"}
        if any(
            (tree / "infra" / "tfk8s" / path).exists()
            for path in ("tenant_contract.py", "stacks/tenant_contract.py", "stack_kinds/tenant_contract.py")
        )
        else {"tfk8s:tenantStack": "tenant-alice"}
    )
    return {
        "config": {
            "tfk8s:kind": "experiment",
            **tenant,
            "tfk8s:clusters": [
                {"name": f"c{i}", "ps": {"count": 1, **SMALL}, "workers": {"count": 1, **SMALL}} for i in range(clusters)
            ],
        }
    }


def live_objects(work: Path, stack: str) -> list[dict[str, Any]]:
    """The Kubernetes objects the stack holds, as its state's outputs have them, without the server's fields."""
    exported = subprocess.run(
        ["pulumi", "stack", "export", "--stack", stack], cwd=work, check=True, capture_output=True, text=True
    ).stdout
    objects = []
    for resource in json.loads(exported)["deployment"]["resources"]:
        outputs = resource.get("outputs") or {}
        if not resource.get("custom") or not resource["type"].startswith("kubernetes:") or "kind" not in outputs:
            continue
        if resource["type"].endswith("Patch"):  # its object, a PS Deployment, is in the list as that resource
            continue
        # Not the provider's own bookkeeping (`__inputs`, `__fieldManager`, ...), not what the server writes.
        document = {k: v for k, v in outputs.items() if not k.startswith("__") and k != "status"}
        document["metadata"] = {k: v for k, v in document["metadata"].items() if k not in SERVER_FIELDS}
        objects.append(document)
    return objects


def kubectl_diff(manifest: Path) -> float:
    argv = [
        toolenv.KUBECTL,
        "--kubeconfig",
        os.environ["KUBECONFIG"],
        "diff",
        "--server-side",
        "--force-conflicts",
        "-f",
        str(manifest),
    ]
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 1: differences (fields only the server sets), not a failure
        raise SystemExit(f"kubectl diff failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - started


def measure(programs: list[Program], clusters: int, repeat: int, salt: str) -> dict[str, float]:
    """Each program's experiment of `clusters` clusters, deployed; their no-change previews and
    kubectl's diff of this tree's objects (the last program), alternating; then destroyed."""
    stacks = {}
    for program in programs:
        # Stack names are experiment names: one per program, all in tenant-alice's namespace at once.
        stack = stacks[program.label] = f"scale-{clusters}" + ("" if program is programs[-1] else f"-{program.label}")
        (program.work / "stacks" / f"Pulumi.{stack}.yaml").write_text(
            f"encryptionsalt: {salt}\n" + yaml.safe_dump(experiment(clusters, program.work))
        )
        init(program.work, stack, program.env)
        pulumi_cli(program.work, "up", "--yes", "--skip-preview", stack=stack, env=program.env)
    ours = programs[-1]
    objects = live_objects(ours.work, stacks[ours.label])
    manifest = ours.work / f"{stacks[ours.label]}.yaml"
    manifest.write_text(yaml.safe_dump_all(objects))
    previews: dict[str, list[float]] = {p.label: [] for p in programs}
    diffs = []
    for _ in range(repeat):
        for program in programs:
            previews[program.label].append(pulumi_cli(program.work, "preview", stack=stacks[program.label], env=program.env))
        diffs.append(kubectl_diff(manifest))
    for program in programs:
        pulumi_cli(program.work, "destroy", "--yes", stack=stacks[program.label], env=program.env)
    row = {"objects": float(len(objects)), "kubectl diff": statistics.median(diffs)}
    row.update({f"preview: {label}": statistics.median(runs) for label, runs in previews.items()})
    return row


def report(rows: dict[int, dict[str, float]], labels: list[str]) -> None:
    print("| clusters | Kubernetes objects | " + " | ".join(f"no-change `pulumi preview`, {label} (s)" for label in labels)
          + " | `kubectl diff --server-side` (s) | ratio, this tree |")  # fmt: skip
    print("|---:|---:|" + "---:|" * len(labels) + "---:|---:|")
    for clusters, row in rows.items():
        previews = " | ".join(f"{row[f'preview: {label}']:.2f}" for label in labels)
        ratio = row[f"preview: {labels[-1]}"] / row["kubectl diff"]
        print(f"| {clusters} | {row['objects']:.0f} | {previews} | {row['kubectl diff']:.2f} | {ratio:.2f} |")
    first, last = rows[min(rows)], rows[max(rows)]
    added = last["objects"] - first["objects"]
    theirs = (last["kubectl diff"] - first["kubectl diff"]) / added * 1000
    print(f"\nper added object: kubectl diff {theirs:.1f} ms")
    for label in labels:
        ours = (last[f"preview: {label}"] - first[f"preview: {label}"]) / added * 1000
        print(f"per added object: pulumi preview, {label}: {ours:.1f} ms, ratio {ours / theirs:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,10,30", help="clusters per experiment, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side per size; medians are reported")
    parser.add_argument("--baseline", default="", help="git revisions, comma-separated, whose programs preview beside this one's")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    toolenv.time_as_a_user()
    with toolenv.throwaway_cluster(CLUSTER) as kubeconfig:
        ours = toolenv.exported({"KUBECONFIG": str(kubeconfig)})
        os.environ.update(ours)
        scratch = Path(tempfile.mkdtemp(prefix="tfk8s-bench-preview-"))
        work = toolenv.project_copy(scratch / "after")
        os.environ["PULUMI_BACKEND_URL"] = f"file://{work / 'state'}"
        tenant = work / "stacks" / "Pulumi.tenant-alice.yaml"
        config = yaml.safe_load(tenant.read_text())
        config["config"]["tfk8s:tenant"]["quota"] = QUOTA
        tenant.write_text(yaml.safe_dump(config))
        for stack in BASE:
            toolenv.share_salt(work / "stacks" / f"Pulumi.{stack}.yaml")  # as `make up` creates stacks
            init(work, stack)
            pulumi_cli(work, "up", "--yes", "--skip-preview", stack=stack)
        salt = yaml.safe_load(tenant.read_text())["encryptionsalt"]
        revisions = [r for r in args.baseline.split(",") if r]
        programs = [baseline(r, scratch / r, ours, salt) for r in revisions]
        programs.append(Program("this tree", work, "dev", dict(os.environ)))
        rows = {clusters: measure(programs, clusters, args.repeat, salt) for clusters in sizes}
        print(f"no-change preview vs kubectl diff of the same live objects; medians of {args.repeat}, alternating")
        report(rows, [p.label for p in programs])
        for stack in reversed(BASE):
            pulumi_cli(work, "destroy", "--yes", stack=stack)


if __name__ == "__main__":
    main()
