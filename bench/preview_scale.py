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

    make tools && .venv/bin/python bench/preview_scale.py [--sizes 1,10,30] [--repeat 3]
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
sys.path[:0] = [str(ROOT / "hack")]

import toolenv  # noqa: E402

CLUSTER = "tfk8s-bench-preview"
BASE = ("platform-dev", "tenant-alice")
SMALL = {"cpu": "100m", "memory": "128Mi"}
# Room for 30 clusters of 2 pods and 3 Services each (tenant-alice's own quota, over the platform's default).
QUOTA = {"cpu": "64", "memory": "256Gi", "pods": 200, "services": 200}
SERVER_FIELDS = ("uid", "resourceVersion", "managedFields", "creationTimestamp", "generation")


def pulumi(work: Path, *args: str, stack: str) -> float:
    argv = ["pulumi", *args, "--stack", stack, "--non-interactive", "--color", "never"]
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=work, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return time.perf_counter() - started


def init(work: Path, stack: str) -> None:
    toolenv.share_salt(work / "stacks" / f"Pulumi.{stack}.yaml")  # as `make up` creates stacks
    subprocess.run(["pulumi", "stack", "init", stack, "--non-interactive"], cwd=work, check=True, capture_output=True)


def experiment(clusters: int) -> dict[str, Any]:
    return {
        "config": {
            "tfk8s:kind": "experiment",
            "tfk8s:tenantStack": "tenant-alice",
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


def measure(work: Path, clusters: int, repeat: int) -> dict[str, float]:
    stack = f"scale-{clusters}"
    (work / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(experiment(clusters)))
    init(work, stack)
    pulumi(work, "up", "--yes", "--skip-preview", stack=stack)
    objects = live_objects(work, stack)
    manifest = work / f"{stack}.yaml"
    manifest.write_text(yaml.safe_dump_all(objects))
    previews, diffs = [], []
    for _ in range(repeat):
        previews.append(pulumi(work, "preview", stack=stack))
        diffs.append(kubectl_diff(manifest))
    pulumi(work, "destroy", "--yes", stack=stack)
    return {"objects": len(objects), "preview": statistics.median(previews), "kubectl diff": statistics.median(diffs)}


def report(rows: dict[int, dict[str, float]]) -> None:
    print("| clusters | Kubernetes objects | no-change `pulumi preview` (s) | `kubectl diff --server-side` (s) | ratio |")
    print("|---:|---:|---:|---:|---:|")
    for clusters, row in rows.items():
        ratio = row["preview"] / row["kubectl diff"]
        print(f"| {clusters} | {row['objects']:.0f} | {row['preview']:.2f} | {row['kubectl diff']:.2f} | {ratio:.2f} |")
    first, last = rows[min(rows)], rows[max(rows)]
    added = last["objects"] - first["objects"]
    ours = (last["preview"] - first["preview"]) / added * 1000
    theirs = (last["kubectl diff"] - first["kubectl diff"]) / added * 1000
    print(f"\nper added object: pulumi preview {ours:.1f} ms, kubectl diff {theirs:.1f} ms, ratio {ours / theirs:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,10,30", help="clusters per experiment, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side per size; medians are reported")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    toolenv.time_as_a_user()
    with toolenv.throwaway_cluster(CLUSTER) as kubeconfig:
        os.environ.update(toolenv.exported({"KUBECONFIG": str(kubeconfig)}))
        work = toolenv.project_copy(Path(tempfile.mkdtemp(prefix="tfk8s-bench-preview-")))
        os.environ["PULUMI_BACKEND_URL"] = f"file://{work / 'state'}"
        tenant = work / "stacks" / "Pulumi.tenant-alice.yaml"
        config = yaml.safe_load(tenant.read_text())
        config["config"]["tfk8s:tenant"]["quota"] = QUOTA
        tenant.write_text(yaml.safe_dump(config))
        for stack in BASE:
            init(work, stack)
            pulumi(work, "up", "--yes", "--skip-preview", stack=stack)
        rows = {clusters: measure(work, clusters, args.repeat) for clusters in sizes}
        print(f"no-change preview vs kubectl diff of the same live objects; medians of {args.repeat}, alternating")
        report(rows)
        for stack in reversed(BASE):
            pulumi(work, "destroy", "--yes", stack=stack)


if __name__ == "__main__":
    main()
