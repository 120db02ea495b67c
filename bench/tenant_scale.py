"""Scale of tenants: adding the Nth tenant to a platform that has N-1, for N = 10 and N = 100.

The goal (the open issue): neither a new tenant's `pulumi preview`/`up` nor a no-change
`pulumi preview`/`up` of the platform grows with N (ratio N=100 / N=10 <= 1.2). A tenant stack
reads only its platform stack's outputs, its own objects, the Tenant count (a list of one item,
`?limit=1`) and the User Node; other tenants' state files are separate files in the file backend.
What could still grow is what the cluster holds, so every existing tenant here is real.

On a throwaway kwok cluster (`tfk8s-bench-tenants`, started and deleted here, with the state):
  * platform-dev is deployed once, its User Node given room for every tenant's Jupyter and
    TensorBoard: pods beyond the 110 of hack/kwok/nodes.yaml (or tfk8s refuses the tenant), and
    CPU and memory beyond its 16 cores and 64Gi (or the 9th tenant's apps never schedule);
  * the platform grows to N-1 tenants by a real `pulumi up` of a real tenant stack each (one user,
    1Gi volumes, the default quota), --parallel of them at a time: the same objects and the same
    state a platform team's fleet has, not a rendering;
  * once the machine is quiet again (`settle`: the cluster's controllers work on after a growth),
    for each N, for the new tenant N: `pulumi preview` before it exists (median of --repeat), its
    first `pulumi up --yes --skip-preview` (once: the preview is timed apart), and a no-change
    `pulumi preview` of it (median); and a no-change `pulumi preview` and `pulumi up --yes
    --skip-preview` of the platform (medians);
  * with `--baseline REV[,REV...]`, the new tenant's three rows also for the program as of each git
    revision (deploy_vs_apply.revision_project: its own project copy, hack/env.sh and language
    host, on the same cluster, backend and platform), each its own new tenant, right after this
    tree's: before and after side by side on the same populated platform.
Every command is the plain CLI in the environment `make env` prints, timed as a user typing it
waits. A table puts N side by side with the ratios (last N / first N), the resource counts, the
throughput of the parallel growth, and what 1,000 tenants would cost from these measurements.

    make tools && .venv/bin/python bench/tenant_scale.py [--sizes 10,100] [--repeat 3] [--parallel 3] [--baseline REV[,REV...]]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "infra"), str(ROOT / "lab"), str(ROOT / "bench")]

from deploy_vs_apply import revision_project  # noqa: E402
from tfk8s.components.user_env import USER_NODE_PODS_PER_USER  # noqa: E402
from tfk8s.settings.platform import ContainerDefaults  # noqa: E402
from tfk8s.specs.quota import apps_requests  # noqa: E402

import toolenv  # noqa: E402

CLUSTER = "tfk8s-bench-tenants"
PLATFORM = "platform-dev"
USER_NODE = "tfk8s-user-node"  # stacks/Pulumi.platform-dev.yaml's platform.userNode.name
FLEET = 1000  # the size the estimate is for
# What the cluster holds for its tenants (and everything else), counted in each row.
OBJECTS = ",".join(
    ["all", "configmaps", "secrets", "persistentvolumeclaims", "persistentvolumes", "serviceaccounts", "roles"]
    + ["rolebindings", "resourcequotas", "limitranges"]
)


def kubectl(*args: str) -> str:
    argv = [toolenv.KUBECTL, "--kubeconfig", os.environ["KUBECONFIG"], *args]
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def make_room_on_user_node(tenants: int) -> None:
    """Room on the User Node for every tenant's user-facing pods: the pods (kubelet --max-pods; the
    110 of hack/kwok/nodes.yaml hold 55 tenants, and tfk8s refuses a tenant beyond them) and their
    CPU and memory: Jupyter and TensorBoard at platform.containerDefaults (1 CPU, 2Gi) and
    TensorBoard's token gate (100m, 128Mi), `quota.apps_requests`: the node's 16 CPUs hold 7
    tenants, and tfk8s refuses the 8th (tfk8s.checks.user_node.check_room). Counting the pods'
    defaults without the gate left 4 CPUs short at 220 tenants: the last two tenants of
    bench/fleet.py's N=100 P=4 run timed out (2026-11-27), before tfk8s counted CPU and memory."""
    pods = tenants * USER_NODE_PODS_PER_USER
    each = apps_requests(ContainerDefaults(), gated=True)
    room = {
        "pods": str(pods + 10),
        "cpu": str(math.ceil(tenants * each["cpu"]) + 16),
        "memory": str(math.ceil(tenants * each["memory"]) + 64 * 2**30),
    }
    patch = {"status": {"capacity": room, "allocatable": room}}
    kubectl("patch", "node", USER_NODE, "--subresource=status", "--type=merge", "-p", json.dumps(patch))


def tenant_stack(number: int) -> str:
    return f"tenant-bench-{number:04d}"


def tenant_config(number: int) -> dict[str, Any]:
    name = f"t{number:04d}"
    return {
        "tfk8s:kind": "tenant",
        "tfk8s:platformStack": PLATFORM,
        "tfk8s:tenant": {"name": name, "identities": {"users": [name]}, "volumes": {"dataSize": "1Gi", "logSize": "1Gi"}},
    }


@dataclass(frozen=True, kw_only=True)
class Project:
    """A project copy with its own file backend, and the plain `pulumi` CLI run in it: in `env` (a
    baseline revision's own environment), else this process's."""

    work: Path
    label: str = "this tree"
    env: dict[str, str] | None = None

    def pulumi(self, *args: str, stack: str) -> float:
        """Seconds one `pulumi` command takes; fails with its output's tail."""
        argv = ["pulumi", *args, "--stack", stack, "--non-interactive", "--color", "never"]
        started = time.perf_counter()
        done = subprocess.run(argv, cwd=self.work, capture_output=True, text=True, env=self.env)
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return elapsed

    def init(self, stack: str, config: dict[str, Any] | None = None) -> None:
        if config is not None:
            (self.work / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": config}))
        argv = ["pulumi", "stack", "init", stack, "--non-interactive"]
        subprocess.run(argv, cwd=self.work, check=True, capture_output=True, env=self.env)

    def resources(self, stack: str) -> int:
        argv = ["pulumi", "stack", "export", "--stack", stack]
        exported = subprocess.run(argv, cwd=self.work, check=True, capture_output=True, text=True).stdout
        return len(json.loads(exported)["deployment"]["resources"])

    def tenant_up(self, number: int) -> float:
        """A new tenant stack, as a platform team adds a user: its file, `stack init`, `up`."""
        self.init(tenant_stack(number), tenant_config(number))
        return self.pulumi("up", "--yes", "--skip-preview", stack=tenant_stack(number))


def grow(project: Project, first: int, last: int, parallel: int) -> float:
    """Tenants first..last (inclusive) by `pulumi up`, `parallel` at a time; the wall seconds."""
    started = time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(project.tenant_up, range(first, last + 1)))
    return time.perf_counter() - started


def busy(seconds: float = 5.0) -> float:
    """The machine's CPU busy fraction over `seconds` (/proc/stat's first line)."""

    def sample() -> tuple[int, int]:
        ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return ticks[3] + ticks[4], sum(ticks)  # idle + iowait, all

    idle, total = sample()
    time.sleep(seconds)
    idle_after, total_after = sample()
    return 1 - (idle_after - idle) / max(total_after - total, 1)


def settle(limit: float = 300.0, quiet: float = 0.25) -> tuple[float, float]:
    """Wait until the cluster has digested a growth (its controllers work for a while after the last
    `up`), so that N's row measures what a tenant reads, not the growth's tail: until the machine
    is busy less than `quiet` over 5 s, at most `limit` seconds. The seconds waited and the last
    busy fraction."""
    started = time.perf_counter()
    while (fraction := busy()) >= quiet and time.perf_counter() - started < limit:
        pass
    return time.perf_counter() - started, fraction


def median(project: Project, repeat: int, *args: str, stack: str) -> float:
    return statistics.median(project.pulumi(*args, stack=stack) for _ in range(repeat))


def new_tenant(project: Project, number: int, repeat: int) -> dict[str, float]:
    """A new tenant's stack as a platform team adds it: its preview before it exists, its first
    `up`, and its no-change preview."""
    new = tenant_stack(number)
    project.init(new, tenant_config(number))
    row = {"preview, new tenant (before up)": median(project, repeat, "preview", stack=new)}
    row["up, new tenant (first)"] = project.pulumi("up", "--yes", "--skip-preview", stack=new)
    row["preview, new tenant (no change)"] = median(project, repeat, "preview", stack=new)
    return row


def baseline_number(n: int, index: int) -> int:
    """The number of baseline `index`'s new tenant in N's row: beyond every number the growth uses."""
    return (index + 1) * 10_000 + n


def measure(project: Project, baselines: list[Project], n: int, repeat: int, tenant_kind: str) -> dict[str, float]:
    """The row of N: the new tenant N on a platform of N-1 tenants (and each baseline's new tenant
    right after it), and the platform unchanged."""
    row = new_tenant(project, n, repeat)
    for index, other in enumerate(baselines):
        row |= {f"{key}, {other.label}": value for key, value in new_tenant(other, baseline_number(n, index), repeat).items()}
    row["preview, platform (no change)"] = median(project, repeat, "preview", stack=PLATFORM)
    row["up, platform (no change)"] = median(project, repeat, "up", "--yes", "--skip-preview", stack=PLATFORM)
    row["resources in state, new tenant"] = project.resources(tenant_stack(n))
    row["resources in state, platform"] = project.resources(PLATFORM)
    row["Tenants in the cluster"] = len(kubectl("get", tenant_kind, "-o", "name").split())
    row["objects in the cluster"] = len(kubectl("get", OBJECTS, "-A", "-o", "name").split())
    row["load average (1 min)"] = os.getloadavg()[0]
    return row


def report(sizes: list[int], rows: dict[int, dict[str, float]], growth: dict[str, float], parallel: int) -> None:
    first, last = sizes[0], sizes[-1]
    print(f"\nthe Nth tenant on a platform of N-1 (kwok, {os.cpu_count()} cores); seconds, medians of the repeats")
    print("| | " + " | ".join(f"N={n}" for n in sizes) + f" | ratio N={last} / N={first} |")
    print("|---|" + "---:|" * (len(sizes) + 1))
    for key in rows[first]:
        values = [rows[n][key] for n in sizes]
        timing = key.startswith(("preview", "up"))
        shown = [f"{v:.2f}" if timing or key.startswith("load") else f"{v:.0f}" for v in values]
        ratio = f"{values[-1] / values[0]:.2f}" if values[0] else "-"
        print(f"| {key} | " + " | ".join(shown) + f" | {ratio} |")
    per_up = rows[last]["up, new tenant (first)"]
    for key in rows[last]:
        if key.startswith("up, new tenant (first), "):
            before, revision = rows[last][key], key.rsplit(", ", 1)[1]
            print(f"\na new tenant's first `up` at N={last}: {per_up:.2f} s; as of {revision}: {before:.2f} s")
    per_preview = rows[last]["preview, new tenant (before up)"]
    wall = growth["seconds"] / growth["tenants"]
    print(
        f"\ngrowth: {growth['tenants']:.0f} tenants by `pulumi up`, {parallel} at a time, in {growth['seconds']:.0f} s "
        f"({wall:.1f} s per tenant of wall time)"
    )
    print(
        f"{FLEET:,} tenants, from these measurements: a fleet's first `up` costs {FLEET:,} x {per_up:.1f} s = "
        f"{FLEET * per_up / 3600:.1f} h one after another ({FLEET * wall / 3600:.1f} h at the growth's "
        f"{wall:.1f} s per tenant, {parallel} at a time on this machine); each change stays one tenant's: "
        f"preview {per_preview:.1f} s, up {per_up:.1f} s, and a no-change platform "
        f"preview {rows[last]['preview, platform (no change)']:.1f} s / up {rows[last]['up, platform (no change)']:.1f} s, "
        f"as long as those stay flat (ratios above). The cluster must hold them: {FLEET * USER_NODE_PODS_PER_USER:,} "
        f"user-facing pods on the User Node, {FLEET * USER_NODE_PODS_PER_USER:,} NodePorts of the default 2,768."
    )


def run(sizes: list[int], repeat: int, parallel: int, revisions: list[str], ours: dict[str, str]) -> None:
    work = Path(tempfile.mkdtemp(prefix="tfk8s-bench-tenants-"))
    try:
        project = Project(work=toolenv.project_copy(work))
        os.environ["PULUMI_BACKEND_URL"] = f"file://{work / 'state'}"
        baselines = [Project(work=work / r, label=r, env=revision_project(r, work / r, ours)) for r in revisions]
        make_room_on_user_node(sizes[-1] + len(sizes) * len(revisions))
        project.init(PLATFORM)
        project.pulumi("up", "--yes", "--skip-preview", stack=PLATFORM)
        facts = json.loads(
            subprocess.run(
                ["pulumi", "stack", "output", "platform", "--json", "--stack", PLATFORM],
                cwd=work, check=True, capture_output=True, text=True,
            ).stdout
        )  # fmt: skip
        tenant_kind = f"{facts['tenants']['plural']}.{facts['tenants']['group']}"
        rows: dict[int, dict[str, float]] = {}
        growth = {"tenants": 0.0, "seconds": 0.0}
        existing = 0
        for n in sizes:
            if n - 1 > existing:
                seconds = grow(project, existing + 1, n - 1, parallel)
                print(f"grew to {n - 1} tenants in {seconds:.0f} s", flush=True)
                growth["tenants"] += n - 1 - existing
                growth["seconds"] += seconds
            waited, fraction = settle()
            print(f"settled in {waited:.0f} s: the machine {fraction:.0%} busy", flush=True)
            rows[n] = {**measure(project, baselines, n, repeat, tenant_kind), "machine busy before the row (%)": 100 * fraction}
            existing = n
            print(f"N={n}: " + json.dumps({k: round(v, 2) for k, v in rows[n].items()}), flush=True)
        report(sizes, rows, growth, parallel)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100", help="the N to measure, ascending, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each preview and no-change up; medians reported")
    parser.add_argument("--parallel", type=int, default=3, help="tenant `pulumi up`s at a time while growing")
    parser.add_argument(
        "--baseline",
        default="",
        help="git revisions, comma-separated, whose new tenant is measured beside ours in each row (with this tree's "
        "tenant settings: a revision whose tenant schema differs refuses them)",
    )
    args = parser.parse_args()
    sizes = sorted(int(n) for n in args.sizes.split(","))
    toolenv.time_as_a_user()
    with toolenv.throwaway_cluster(CLUSTER) as kubeconfig:
        ours = toolenv.exported({"KUBECONFIG": str(kubeconfig)})
        os.environ.update(ours)
        run(sizes, args.repeat, args.parallel, [r for r in args.baseline.split(",") if r], ours)


if __name__ == "__main__":
    main()
