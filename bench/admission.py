"""Admission on a queueing platform (issue 38): what queueing adds to an experiment that does not
wait, and the admission latency with N experiments queued ahead.

Two throwaway kwok clusters of their own, started and deleted by this script whatever happens (the
`make up` cluster is never touched): `tfk8s-bench-admission` with Kueue and JobSet (hack/cluster.sh
start --queueing) and `tfk8s-bench-admission-plain` without. On each, platform-dev and tenant-alice
are deployed once, not timed (lab/queue_stacks.py, as the queueing e2e tests do); on the first the
platform has `queueing.enabled` with a capacity of 4 GPUs. Every experiment is one training cluster
`train`: 1 PS (250m) and 2 workers (250m, 2 GPUs each), so exactly one runs at a time there.

1. No wait: `--repeat` rounds, the platforms alternating (which goes first swaps every round). The
   plain `pulumi up` of the experiment `solo` (the CLI as a user types it, in the environment
   `make env` prints), from no pod of it to its 3 pods Running; then `pulumi destroy` and no pod
   left (not timed). On the queueing platform that is a JobSet Kueue admits on an empty queue, and
   `up` returns once it is queued; on the plain one a PS Deployment and a worker Job, and `up`
   waits for them ready.
2. Queued, on the queueing platform: one experiment fills the capacity; then for each N of
   `--queued` (1, 10, 100), N experiments are submitted one after another, each a stack of its own
   and its own timed `pulumi up` (what N users' submissions are: one stack of N clusters would be
   one program, one quota check, one `up`, not N into a growing queue). Then, N times, the running
   cluster is finished as a kubelet would report it (its workers' pods patched Succeeded through
   the status subresource: kwok's pods never end by themselves), and the clock runs from that
   patch to the next admitted cluster's pods all Running; that cluster is the running one for the
   next admission. p50, p95 and max per N.

Times are when `kubectl get --watch` events arrive here (bench/kube_watch.py: milliseconds; the API
server's own timestamps have 1 s resolution), of the JobSets or Deployments and Jobs, the Workloads
and the pods; the arithmetic and the tables are bench/admission_times.py's.

    make tools tools-test && .venv/bin/python bench/admission.py [--repeat 5] [--queued 1,10,100] [--raw FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "lab"), str(ROOT / "bench")]

from admission_times import (  # noqa: E402
    ClusterTimes,
    admission_points,
    admission_table,
    cluster_times,
    median,
    next_admitted,
    solo_points,
    solo_table,
    submission_table,
)
from kube_watch import Watch  # noqa: E402

import queue_stacks  # noqa: E402
import toolenv  # noqa: E402

CLUSTERS = {"queueing": "tfk8s-bench-admission", "plain": "tfk8s-bench-admission-plain"}
TENANT, NAMESPACE = "tenant-alice", "tfk8s-alice"
CAPACITY = {"cpu": "4", "memory": "16Gi", "gpus": 4}  # one experiment's 4 GPUs: one runs at a time
# Room for every queued experiment's objects: the default 50 Services are 16 experiments' (3 each).
TENANT_QUOTA = {
    "services": 1000,
    **dict.fromkeys(("configMaps", "networkPolicies", "jobs", "serviceAccounts", "roles", "roleBindings"), 500),
}
CLUSTER = {
    "name": "train",
    "ps": {"count": 1, "cpu": "250m", "memory": "512Mi"},
    "workers": {"count": 2, "cpu": "250m", "memory": "512Mi", "gpus": 2},
}
PODS = 3  # per cluster
SOLO = "solo"
FILL = "fill"  # the experiment that holds the capacity when the first batch is submitted
TIMEOUT = 180.0  # seconds for any one wait
JOBSETS, WORKLOADS = "jobsets.jobset.x-k8s.io", "workloads.kueue.x-k8s.io"
T = TypeVar("T")


def key(experiment: str) -> str:
    """The cluster `train` of `experiment`: its JobSet's name, its `app.kubernetes.io/instance`."""
    return f"{experiment}-{CLUSTER['name']}"


@dataclass(frozen=True)
class Side:
    """One platform: its cluster and its project copy with its own state."""

    name: str
    work: Path
    env: dict[str, str]
    kubeconfig: Path

    def pulumi(self, *args: str) -> float:
        """Seconds the plain `pulumi ARGS` took, as a user typing it waits."""
        started = time.perf_counter()
        argv = ["pulumi", *args, "--non-interactive", "--color", "never"]
        done = subprocess.run(argv, cwd=self.work, env=self.env, capture_output=True, text=True)
        if done.returncode != 0:
            shown = f"{self.name}: pulumi {' '.join(args)} exited {done.returncode}"
            raise RuntimeError(f"{shown}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return time.perf_counter() - started

    def kubectl(self, *args: str) -> str:
        argv = [toolenv.KUBECTL, "--kubeconfig", str(self.kubeconfig), *args]
        return subprocess.run(argv, check=True, capture_output=True, text=True).stdout

    def watches(self, selector: str) -> dict[str, list[Watch]]:
        """Watches, up, of the cluster objects (JobSets; Deployments and Jobs), Workloads and pods."""
        kinds = [JOBSETS] if self.name == "queueing" else ["deployments", "jobs"]
        found = {
            "objects": [Watch(str(self.kubeconfig), kind, NAMESPACE, selector) for kind in kinds],
            "workloads": [Watch(str(self.kubeconfig), WORKLOADS, NAMESPACE)] if self.name == "queueing" else [],
            "pods": [Watch(str(self.kubeconfig), "pods", NAMESPACE, selector)],
        }
        for watch in (w for group in found.values() for w in group):
            if not watch.ready.wait(30):
                raise RuntimeError(f"kubectl's watch of {watch.kind} did not start within 30 s")
        return found


def seen(watches: dict[str, list[Watch]]) -> dict[str, ClusterTimes]:
    events = {group: [e for w in found for e in list(w.events)] for group, found in watches.items()}
    return cluster_times(events["objects"], events["workloads"], events["pods"], PODS)


def pods_running(watches: dict[str, list[Watch]], cluster: str) -> dict[str, ClusterTimes] | None:
    """Every cluster's times, once `cluster`'s pods are all Running."""
    times = seen(watches)
    return times if cluster in times and times[cluster].running else None


def admitted_after(watches: dict[str, list[Watch]], after: float, done: set[str]) -> str | None:
    return next_admitted(seen(watches), after, done)


def stop(watches: dict[str, list[Watch]]) -> None:
    for watch in (w for group in watches.values() for w in group):
        watch.stop()


def wait_for(condition: Callable[[], T | None], what: str) -> T:
    """Polled every 0.2 s: the times come from the watches' events, not from when this looks."""
    deadline = time.monotonic() + TIMEOUT
    while (found := condition()) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {TIMEOUT:.0f} s waiting for {what}")
        time.sleep(0.2)
    return found


def write_experiment(side: Side, stack: str) -> None:
    """The experiment's stack file, as a user writes it, beside the salt `stack init` put there."""
    path = side.work / "stacks" / f"Pulumi.{stack}.yaml"
    document = (yaml.safe_load(path.read_text()) if path.exists() else None) or {}
    document["config"] = {"tfk8s:kind": "experiment", "tfk8s:namespace": NAMESPACE, "tfk8s:clusters": [CLUSTER]}
    path.write_text(yaml.safe_dump(document))


def new_experiment(side: Side, stack: str) -> None:
    side.pulumi("stack", "init", stack)
    write_experiment(side, stack)


def up(side: Side, stack: str) -> float:
    return side.pulumi("up", "--stack", stack, "--yes", "--skip-preview")


def deploy(name: str, kubeconfig: Path, scratch: Path) -> Side:
    """The platform (queueing or not) and the tenant, up; the `solo` experiment's stack (not timed)."""
    work, env = queue_stacks.own_project(scratch / "project", kubeconfig)
    side = Side(name, work, env, kubeconfig)
    side.pulumi("stack", "init", queue_stacks.PLATFORM)
    queueing = {"capacity": CAPACITY} if name == "queueing" else None
    queue_stacks.configure_platform(work, scratch / "volumes", queueing)
    up(side, queue_stacks.PLATFORM)
    side.pulumi("stack", "init", TENANT)
    queue_stacks.configure_tenant_quota(work, TENANT, TENANT_QUOTA)
    up(side, TENANT)
    new_experiment(side, SOLO)
    return side


def no_pods_left(side: Side, selector: str) -> None:
    def gone() -> bool | None:
        return None if side.kubectl("get", "pods", "-n", NAMESPACE, "-l", selector, "-o", "name").strip() else True

    wait_for(gone, f"{side.name}: no pod of {selector} left")


def solo(side: Side) -> dict[str, Any]:
    """One start of `solo` on an empty queue, to its pods Running; then destroyed."""
    selector = f"tfk8s.io/experiment={SOLO}"
    watches = side.watches(selector)
    try:
        start = time.time()
        up(side, SOLO)
        returned = time.time()
        times = wait_for(partial(pods_running, watches, key(SOLO)), f"{side.name}: solo's pods Running")[key(SOLO)]
    finally:
        stop(watches)
    side.pulumi("destroy", "--stack", SOLO, "--yes", "--skip-preview")
    no_pods_left(side, selector)
    return {"side": side.name, "start": start, "points": solo_points(start, returned, times)}


def no_wait(sides: dict[str, Side], repeat: int) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    for round_ in range(repeat):
        for name in ("queueing", "plain") if round_ % 2 == 0 else ("plain", "queueing"):
            run = solo(sides[name])
            runs[name].append(run)
            points = run["points"]
            shown = f"pods Running at {points['running']:.2f} s, `up` returned at {points['returned']:.2f} s"
            print(f"round {round_ + 1}, {name}: {shown}", flush=True)
    return runs


def finish(side: Side, cluster: str) -> float:
    """The cluster's workers reported Succeeded, as a kubelet does when their trainers exit; when the last patch returned."""
    selector = f"app.kubernetes.io/instance={cluster},tfk8s.io/role=worker"
    for name in side.kubectl("get", "pods", "-n", NAMESPACE, "-l", selector, "-o", "name").split():
        patch = json.dumps({"status": {"phase": "Succeeded"}})
        side.kubectl("patch", "-n", NAMESPACE, name, "--subresource=status", "--type=merge", "-p", patch)
    return time.time()


def queued(side: Side, batches: list[int]) -> dict[str, list[dict[str, Any]]]:
    """Fill the capacity, then per batch N: N submissions, then N admissions, each timed."""
    watches = side.watches("tfk8s.io/cluster")
    submissions: list[dict[str, Any]] = []
    admissions: list[dict[str, Any]] = []
    try:
        new_experiment(side, FILL)
        up(side, FILL)
        current = key(FILL)
        wait_for(partial(pods_running, watches, current), "the filler's pods Running")
        done = {current}
        for n in batches:
            for ahead in range(n):
                stack = f"q{n}-{ahead:03d}"
                new_experiment(side, stack)
                submissions.append({"queued": n, "ahead": ahead, "stack": stack, "seconds": up(side, stack)})
            admitted = [s["stack"] for s in submissions[-n:] if seen(watches).get(key(s["stack"]), ClusterTimes()).admitted]
            if admitted:
                raise RuntimeError(f"admitted while the capacity was full: {admitted}")
            print(f"N={n}: submitted, `pulumi up` {median(s['seconds'] for s in submissions[-n:]):.2f} s (median)", flush=True)
            for waiting in range(n, 0, -1):
                freed = finish(side, current)
                following = wait_for(partial(admitted_after, watches, freed, done), f"an admission after {current} finished")
                times = wait_for(partial(pods_running, watches, following), f"{following}'s pods Running")
                points = admission_points(freed, times[current], times[following])
                admissions.append({"queued": n, "waiting": waiting, "freed": current, "admitted": following, "points": points})
                done.add(following)
                current = following
            mine = [a["points"]["running"] for a in admissions if a["queued"] == n]
            shown = f"pods Running {median(mine) or 0:.2f} s (median) after the capacity was freed"
            print(f"N={n}: {len(mine)} admissions, {shown}", flush=True)
    finally:
        stop(watches)
    return {"submissions": submissions, "admissions": admissions}


def report(results: dict[str, Any], command: str) -> None:
    date = datetime.date.today().isoformat()
    runs = results["no_wait"]
    rounds = len(runs["queueing"])
    print(f"\n1. An experiment that does not wait, {date}: medians of {rounds} starts per platform, alternating\n")
    print(solo_table({name: [r["points"] for r in done] for name, done in runs.items()}))
    print("\n2. Admission with N experiments queued: seconds from the running cluster's last worker reported Succeeded\n")
    print(admission_table(results["queued"]["admissions"]))
    print("\n`pulumi up` of a queued experiment, by how many wait ahead of it\n")
    solo_up = median(r["points"]["returned"] for r in runs["queueing"])
    print(submission_table(results["queued"]["submissions"], solo_up))
    print(f"\nThe bench took {results['seconds'] / 60:.1f} min.\n\n    {command}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="starts of the experiment that does not wait, per platform")
    parser.add_argument("--queued", default="1,10,100", help="the N experiments queued, comma-separated")
    parser.add_argument("--raw", type=Path, help="write every start's and admission's times here (JSON)")
    args = parser.parse_args()
    batches = [int(n) for n in args.queued.split(",")]
    command = f".venv/bin/python bench/admission.py --repeat {args.repeat} --queued {args.queued}"
    toolenv.time_as_a_user()
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="tfk8s-bench-admission-"))
    results: dict[str, Any] = {}
    try:
        with toolenv.throwaway_cluster(CLUSTERS["queueing"], queueing=True) as kubeconfig:
            queueing = deploy("queueing", kubeconfig, scratch / "queueing")
            with toolenv.throwaway_cluster(CLUSTERS["plain"]) as plain_kubeconfig:
                plain = deploy("plain", plain_kubeconfig, scratch / "plain")
                print(f"both platforms and tenants deployed after {time.monotonic() - started:.0f} s", flush=True)
                results["no_wait"] = no_wait({"queueing": queueing, "plain": plain}, args.repeat)
            results["queued"] = queued(queueing, batches)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    results["seconds"] = time.monotonic() - started
    if args.raw:
        args.raw.write_text(json.dumps(results, indent=1))
    report(results, command)


if __name__ == "__main__":
    main()
