"""Time to the first training step of a new experiment on the real node: `pulumi up` vs `kubectl
apply` of the same objects, split into phases.

On a throwaway local cluster with this machine's real node (`tfk8s-bench-first-step`,
lab/realnode.py; started and deleted by this script, whatever happens: the `make up` cluster is
never touched), the TensorFlow image built here (lab/images.py) is imported, and platform-dev and
tenant-alice are deployed once (not timed) with their volumes on this machine, as
tests/e2e/test_real_training.py does. The experiment `first-step` has one cluster `mnist`: 1 PS
(250m, 1Gi) and 2 workers (500m, 1500Mi) on the real node, the built-in trainer, asynchronous
between-graph training. Then `--repeat` times each, the sides alternating (which goes first swaps
every round), each from no pod of the experiment:
  - pulumi: `pulumi up --yes --skip-preview` of the experiment stack (the plain CLI with tfk8s's
    language host, in the environment `make env` prints), until the cluster's first step; then
    `pulumi destroy`;
  - kubectl: the same experiment rendered to YAML once (bench/rendering.py) and applied with
    `kubectl apply --server-side` (RenderedExperiment: everything but the Layout, then the Job's
    uid into the Layout and the PS owner patches), until the first step; then deleted. Each apply
    makes a new Job, so a new run with a run directory of its own on the log volume.

Timestamps, all epoch seconds of this one machine (the node is this machine, so containers share
its clock): the command's start; objects and pods as `kubectl get --watch` of each kind of the
experiment's objects, started before the command, sees them arrive (milliseconds; the API
server's creationTimestamp and conditions have 1 s resolution and are only the fallback); each
task's launcher progress file on the log volume, `<log volume>/<experiment>/<cluster>/run-<Job
uid>/.tfk8s/progress/<task>.json` (training/tfk8s_train/task_progress.py: `started_at`, when the
launcher started, which for a PS is after it read its run's Job uid from the API; `phases`; and
`first_step_at`, from the trainer's lines, each timed by when the trainer printed it). Which task ends each phase:
bench/first_step_phases.py. Medians of the runs; ratios are pulumi / kubectl.

    make tools real-node-deps && .venv/bin/python bench/first_step.py [--repeat 3] [--raw FILE] [--set PATH=VALUE ...]

Needs root (a real kubelet and containerd; `lab/realnode.sh check` says why not).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "infra"), str(ROOT / "lab"), str(ROOT / "bench")]

from first_step_phases import PodSeen, TaskTimes, api_time, phase_ends, table, task_table, task_times  # noqa: E402
from kube_watch import Watch  # noqa: E402
from rendering import RenderedExperiment, render_experiment  # noqa: E402

import realnode  # noqa: E402
import toolenv  # noqa: E402

CLUSTER = "tfk8s-bench-first-step"
PLATFORM, TENANT, EXPERIMENT = "platform-dev", "tenant-alice", "first-step"
# The experiment: test_real_training.py's, on the real node's 2 cores.
SETTINGS = {
    "tfk8s:kind": "experiment",
    "tfk8s:namespace": "tfk8s-alice",
    **realnode.MNIST_ON_THE_NODE,
    # Enough steps that the run still trains when it is measured and removed.
    "tfk8s:clusters[0].args[0]": "--steps=500",
}
START_TIMEOUT = 420.0  # seconds from the command to the first step before a start fails
JOBS = "Job.v1.batch"  # the kind of the run's Job, as kubectl names it (RenderedExperiment.kinds)
AFTER_FIRST_STEP = 15.0  # how long to wait for every task's progress file to catch up (rewritten every 5 s)


def pulumi(work: Path, *args: str) -> str:
    """The plain `pulumi` CLI in the project copy, as a user types it (this process's environment)."""
    done = subprocess.run(["pulumi", *args], cwd=work, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"pulumi {' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def kubectl(*args: str) -> str:
    return subprocess.run(
        [toolenv.KUBECTL, "--kubeconfig", os.environ["KUBECONFIG"], *args], check=True, capture_output=True, text=True
    ).stdout


@dataclasses.dataclass(frozen=True)
class Cluster:
    """What the benchmark reads of the experiment's one training cluster, from its rendered objects."""

    namespace: str
    job: str  # the workers' Job: its uid is the run
    tasks: list[str]
    sync: bool
    log_claim: str
    log_sub_path: str  # <experiment>/<cluster> on the log volume

    @classmethod
    def of(cls, rendered: RenderedExperiment) -> Cluster:
        (job,) = [d for d in rendered.jobs if d["metadata"]["name"].endswith("-worker")]
        deployments = [d for d in rendered.docs if d["kind"] == "Deployment"]
        spec = job["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        (mount,) = [m for m in container["volumeMounts"] if m["name"] == "log"]
        (volume,) = [v for v in spec["volumes"] if v["name"] == "log"]
        return cls(
            namespace=job["metadata"]["namespace"],
            job=job["metadata"]["name"],
            tasks=[f"ps-{i}" for i in range(len(deployments))] + [f"worker-{i}" for i in range(job["spec"]["completions"])],
            sync=env.get("TFK8S_TRAINING") == "sync",
            log_claim=volume["persistentVolumeClaim"]["claimName"],
            log_sub_path=mount["subPath"],
        )

    def log_volume(self) -> Path:
        """Where the tenant's log volume lies on this machine (a hostPath volume of the platform's)."""
        name = kubectl("get", "pvc", self.log_claim, "-n", self.namespace, "-o", "jsonpath={.spec.volumeName}").strip()
        return Path(kubectl("get", "pv", name, "-o", "jsonpath={.spec.hostPath.path}").strip())


def read_progress(run_dir: Path, tasks: list[str]) -> dict[str, dict[str, Any]]:
    found = {}
    for task in tasks:
        try:
            found[task] = json.loads((run_dir / ".tfk8s" / "progress" / f"{task}.json").read_text())
        except (OSError, ValueError):  # not written yet, or being replaced
            continue
    return found


def caught_up(progress: dict[str, dict[str, Any]], tasks: list[str]) -> bool:
    """Every task's file has the points of its start (a PS reports no cluster formation)."""
    for task in tasks:
        doc = progress.get(task) or {}
        phases = doc.get("phases") or {}
        needed = ["tensorflow_imported_at"] + ([] if task.startswith("ps-") else ["cluster_ready_at"])
        if doc.get("started_at") is None or any(phases.get(n) is None for n in needed):
            return False
    return True


def one_start(
    side: str, cluster: Cluster, kinds: list[str], launch: Callable[[list[float]], None], log_volume: Path
) -> dict[str, Any]:
    """One start: the watches up, `launch(returned)` (which appends when its command returned, at
    once or from a thread), then the timestamps until the first step and every task's progress file
    caught up."""
    selector = f"tfk8s.io/experiment={EXPERIMENT}"
    kubeconfig = os.environ["KUBECONFIG"]
    watches = {kind: Watch(kubeconfig, kind, cluster.namespace, selector) for kind in [*kinds, "pods"]}
    try:
        for watch in watches.values():
            if not watch.ready.wait(30):
                raise RuntimeError(f"kubectl's watch of {watch.kind} did not start within 30 s")
        start = time.time()
        returned: list[float] = []
        launch(returned)
        progress: dict[str, dict[str, Any]] = {}
        stepped_at = None
        while True:
            now = time.time()
            jobs = [o for _, t, o in watches[JOBS].events if t == "ADDED" and o["metadata"]["name"] == cluster.job]
            if jobs:
                run_dir = log_volume / cluster.log_sub_path / f"run-{jobs[0]['metadata']['uid']}"
                progress = read_progress(run_dir, cluster.tasks)
            if stepped_at is None and any(p.get("first_step_at") for p in progress.values()):
                stepped_at = now
            if stepped_at is not None and (caught_up(progress, cluster.tasks) or now - stepped_at > AFTER_FIRST_STEP):
                break
            if now - start > START_TIMEOUT:
                seen = sorted(str(f.relative_to(log_volume)) for f in (log_volume / cluster.log_sub_path).rglob("*.json"))
                raise RuntimeError(
                    f"{side}: no first step within {START_TIMEOUT:.0f} s (Job {[j['metadata']['uid'] for j in jobs]}; "
                    f"progress files on the log volume: {seen})\n{pods_report(cluster)}"
                )
            time.sleep(0.5)
        deadline = time.time() + START_TIMEOUT
        while not returned and time.time() < deadline:  # `pulumi up` waits for readiness: mostly done by now
            time.sleep(0.2)
    finally:
        for watch in watches.values():
            watch.stop()
    objects = [o for kind, w in watches.items() if kind != "pods" for _, t, o in w.events if t == "ADDED"]
    first_object = min((at for kind, w in watches.items() if kind != "pods" for at in [w.first_added()] if at), default=None)
    tasks = task_times(watches["pods"].pods(), progress)
    return {
        "diagnostics": diagnostics(cluster, watches["pods"].pods()),
        "side": side,
        "start": start,
        "returned": returned[0] - start if returned else None,
        "first_object": first_object,
        # The same from the API server's clock, to the second: a check of the watch's.
        "first_object_api": min((api_time(o["metadata"].get("creationTimestamp")) or 0.0 for o in objects), default=None),
        "tasks": {name: dataclasses.asdict(t) for name, t in tasks.items()},
        "ends": phase_ends(start, first_object, tasks, cluster.sync),
    }


def diagnostics(cluster: Cluster, pods: list[PodSeen]) -> dict[str, Any]:
    """For the raw output: each pod's restarts and its launcher's first lines (`kubectl logs
    --timestamps`: what the launcher did before its progress file began, e.g. reading its run's Job)."""
    found = {}
    for seen in pods:
        name = seen.pod["metadata"]["name"]
        statuses = seen.pod.get("status", {}).get("containerStatuses") or []
        try:
            log = kubectl("logs", "-n", cluster.namespace, name, "--timestamps", "--all-containers")
        except subprocess.CalledProcessError as error:
            log = f"(no logs: {error.stderr})"
        found[name] = {
            "restarts": sum(s.get("restartCount", 0) for s in statuses),
            "launcher": [line for line in log.splitlines() if "tfk8s-launch" in line or "no logs" in line][:12],
        }
    return found


def pods_report(cluster: Cluster) -> str:
    return kubectl("get", "pods", "-n", cluster.namespace, "-l", f"tfk8s.io/experiment={EXPERIMENT}", "-o", "wide")


def no_pods_left(cluster: Cluster, seconds: float = 300) -> None:
    deadline = time.time() + seconds
    selector = f"tfk8s.io/experiment={EXPERIMENT}"
    while kubectl("get", "pods", "-n", cluster.namespace, "-l", selector, "-o", "name").strip():
        if time.time() > deadline:
            raise RuntimeError(f"the experiment's pods are still there after {seconds:.0f} s\n{pods_report(cluster)}")
        time.sleep(1)


def pulumi_start(work: Path, cluster: Cluster, kinds: list[str], log_volume: Path, logs: Path) -> dict[str, Any]:
    output = logs / f"pulumi-up-{time.time():.0f}.log"
    up: list[subprocess.Popen[bytes]] = []

    def launch(returned: list[float]) -> None:
        with output.open("w") as sink:
            argv = ["pulumi", "up", "--stack", EXPERIMENT, "--yes", "--skip-preview", "--non-interactive", "--color", "never"]
            up.append(subprocess.Popen(argv, cwd=work, stdout=sink, stderr=subprocess.STDOUT))

        def wait() -> None:
            up[0].wait()
            returned.append(time.time())

        threading.Thread(target=wait, daemon=True).start()

    try:
        run = one_start("pulumi", cluster, kinds, launch, log_volume)
    except BaseException:
        # Cancelled as a user's Ctrl-C cancels it; the cluster goes with what it created.
        if up and up[0].poll() is None:
            up[0].send_signal(signal.SIGINT)
            try:
                up[0].wait(60)
            except subprocess.TimeoutExpired:
                up[0].kill()
        raise
    if up[0].poll() != 0:
        raise RuntimeError(f"`pulumi up` failed ({up[0].poll()}):\n{output.read_text()[-3000:]}")
    pulumi(work, "destroy", "--stack", EXPERIMENT, "--yes", "--skip-preview", "--non-interactive", "--color", "never")
    no_pods_left(cluster)
    return run


def kubectl_start(rendered: RenderedExperiment, cluster: Cluster, log_volume: Path) -> dict[str, Any]:
    def launch(returned: list[float]) -> None:
        rendered.apply(kubectl)
        returned.append(time.time())

    try:
        return one_start("kubectl", cluster, rendered.kinds, launch, log_volume)
    finally:
        rendered.delete(kubectl)
        no_pods_left(cluster)


def deploy_base(work: Path, volumes: Path, image: str, settings: dict[str, str]) -> None:
    """platform-dev and tenant-alice on the real node's cluster (not timed), and the experiment's
    stack with `settings`, its PS and workers placed on the real node."""
    os.environ["PULUMI_BACKEND_URL"] = f"file://{work / 'state'}"
    flags = ["--non-interactive", "--color", "never"]
    # test_real_training.py's platform, its apps sized as there.
    platform = realnode.platform_on_the_node(volumes, tensorflow=image, app_cpu="500m")
    toolenv.share_salt(work / "stacks" / f"Pulumi.{TENANT}.yaml")
    realnode.deploy_platform_and_tenant(lambda *args: pulumi(work, *args, *flags), platform, platform=PLATFORM, tenant=TENANT)
    pulumi(work, "stack", "init", EXPERIMENT, *flags)
    for path, value in settings.items():
        pulumi(work, "config", "set", "--stack", EXPERIMENT, "--path", "--", path, value)
    for args in realnode.placement(0):
        pulumi(work, "config", "set", "--stack", EXPERIMENT, *args)


def compare(repeat: int, scratch: Path, settings: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    """The platform, the tenant and the experiment's stack; then `repeat` starts of each side."""
    started = time.monotonic()
    image = realnode.import_image(CLUSTER, "tensorflow")
    work = toolenv.project_copy(scratch / "project")
    deploy_base(work, scratch / "volumes", image, settings)
    print(f"{image} imported, {PLATFORM} and {TENANT} deployed in {time.monotonic() - started:.0f} s", flush=True)
    out = scratch / "rendered"
    render_experiment(work, out, EXPERIMENT)
    rendered = RenderedExperiment.load(out)
    cluster = Cluster.of(rendered)
    realnode.give_volumes_to_pods(Path(os.environ["KUBECONFIG"]), [cluster.log_sub_path])
    log_volume = cluster.log_volume()
    logs = scratch / "logs"
    logs.mkdir()
    runs: dict[str, list[dict[str, Any]]] = {"pulumi": [], "kubectl": []}
    for round_ in range(repeat):
        for side in ("pulumi", "kubectl") if round_ % 2 == 0 else ("kubectl", "pulumi"):
            if side == "pulumi":
                run = pulumi_start(work, cluster, rendered.kinds, log_volume, logs)
            else:
                run = kubectl_start(rendered, cluster, log_volume)
            runs[side].append(run)
            first, back = run["ends"]["first step"], run["returned"]
            print(
                f"round {round_ + 1}, {side}: first step at {first or 0:.2f} s, the command returned at {back or 0:.2f} s",
                flush=True,
            )
    return runs


def report(runs: dict[str, list[dict[str, Any]]], command: str) -> None:
    date = datetime.date.today().isoformat()
    print(f"\nTime to the first step, {date}: medians of {len(runs['pulumi'])} starts per side, sides alternating\n")
    ends = {side: [run["ends"] for run in done] for side, done in runs.items()}
    print(table(ends, {side: [run["returned"] for run in done] for side, done in runs.items()}))
    print("\nWhere the time goes, per task: medians of the seconds from the command's start to each point\n")
    tasks = {
        side: [(run["start"], {n: TaskTimes(**t) for n, t in run["tasks"].items()}) for run in done]
        for side, done in runs.items()
    }
    print(task_table(tasks))
    print(f"\n    {command}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="starts of each side; medians are reported")
    parser.add_argument("--raw", type=Path, help="write every start's timestamps and phases here (JSON)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="PATH=VALUE",
        help="an experiment setting over the bench's own (`pulumi config set --path`), e.g. tfk8s:clusters[0].ps.cpu=500m",
    )
    args = parser.parse_args()
    settings = {**SETTINGS, **dict(item.split("=", 1) for item in args.set)}
    command = " ".join([".venv/bin/python bench/first_step.py", f"--repeat {args.repeat}", *(f"--set '{s}'" for s in args.set)])
    toolenv.time_as_a_user()
    scratch = Path(tempfile.mkdtemp(prefix="tfk8s-bench-first-step-"))
    try:
        with realnode.real_cluster(CLUSTER) as kubeconfig:
            os.environ.update(toolenv.exported({"KUBECONFIG": str(kubeconfig)}))
            runs = compare(args.repeat, scratch, settings)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.raw:
        args.raw.write_text(json.dumps(runs, indent=1))
    report(runs, command)


if __name__ == "__main__":
    main()
