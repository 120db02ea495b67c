"""A preempted run resumes from its checkpoint, for real (issue 38): on a local cluster with this
machine's real node and Kueue and JobSet beside it, the queueing platform's capacity holds one
training cluster at a time. Alice's long run `slow` trains (the real trainer in the TensorFlow image
built here) and checkpoints; her `urgent` run, at the platform's priority class `urgent`, makes
Kueue preempt it: its pods go, the urgent one trains to its end, and `slow` is admitted again as
the same JobSet, so in its own run directory, where its chief finds the checkpoint and goes on
from its step, not from zero. Readiness says each state on `pulumi up --refresh`. Then (issue 56)
the admitted JobSet loses its parameter server's pod, a worker's and the chief's, each deleted at
once, then its parameter server's container, killed in place: each replicated Job starts its own
task again, the chief restores the newest checkpoint, and the JobSet neither restarts nor leaves
the queue.

Prints the run's timeline (seconds since `slow`'s `pulumi up`) for the issue's closing note.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drivers import CLUSTER, Kube
from fault_record import Fault, record, started_again
from queueing_env import pods_of
from realnode_drivers import (
    delete_at_once,
    give_volumes_to_pods,
    import_image,
    kill_container,
    place_on_real_node,
    platform_on_the_node,
    project,
    real_cluster,
    until,
)
from run_logs import TaskRun, checkpoint_step, last_step, sessions_recreated, task_runs

from queue_stacks import edit_stack

TENANT, NAMESPACE = "tenant-alice", "tfk8s-alice"
# One cluster at a time: `slow` asks 1.25 CPUs (a 250m PS, two 500m workers), `urgent` 0.75.
CAPACITY = {"cpu": "1500m", "memory": "6Gi"}
CLUSTER_SETTINGS = {
    "tfk8s:clusters[0].name": "mnist",
    "tfk8s:clusters[0].ps.cpu": "250m",
    "tfk8s:clusters[0].ps.memory": "1Gi",
    "tfk8s:clusters[0].workers.cpu": "500m",
    "tfk8s:clusters[0].workers.memory": "1500Mi",
}
CHECKPOINT_STEPS = 20
CHIEF, WORKER = "worker-0", "worker-1"
# Its mode, as bench/recovery.py reports it: between-graph, the built-in trainer, as one JobSet.
QUEUED_MODE = "between-graph, queued (a JobSet)"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Kube]:
    with real_cluster(f"{CLUSTER}-rq", queueing=True) as kube:
        yield kube


def run_dir(volumes: Path, experiment: str, uid: str) -> Path | None:
    found = [p for p in volumes.rglob(f"run-{uid}") if p.is_dir() and f"/{experiment}/mnist/" in str(p)]
    return found[0] if found else None


def task_pod(kube: Kube, role: str, index: int) -> dict[str, Any]:
    """The running pod of slow's task `<role>-<index>` (its Job's completion index)."""
    (pod,) = [
        p
        for p in pods_of(kube, NAMESPACE, "slow-mnist")
        if p["metadata"]["labels"].get("app.kubernetes.io/component") == role
        and p["metadata"]["labels"].get("batch.kubernetes.io/job-completion-index") == str(index)
        and p["status"].get("phase") == "Running"
    ]
    return pod


def checkpointed(run: Path) -> int | None:
    """The step of the run's newest checkpoint, once there is one."""
    step = checkpoint_step(run)
    return step if step >= 0 else None


def _trained_after(run: Path, task: str, starts: int) -> TaskRun | None:
    """`task`'s first start after its first `starts`, once it has trained a step."""
    runs = task_runs(run, task)[starts:]
    return runs[0] if runs and runs[0].steps else None


def test_a_preempted_run_resumes_from_its_checkpoint_on_the_real_node(cluster: Kube, tmp_path: Path) -> None:
    image = import_image(cluster, "tensorflow")
    volumes = tmp_path / "volumes"
    cli = project(cluster, tmp_path / "project", "real-queueing-test")
    cli("stack", "select", "--create", "platform-dev")
    for path, value in platform_on_the_node(volumes, tensorflow=image).items():
        cli("config", "set", "--stack", "platform-dev", "--path", path, value)

    def queueing(config: dict[str, Any]) -> None:
        config["tfk8s:platform"]["queueing"] = {"enabled": True, "capacity": CAPACITY, "priorityClasses": {"urgent": 1000}}

    edit_stack(cli.cwd, "platform-dev", queueing)
    cli("up", "--stack", "platform-dev", "--yes", "--skip-preview")
    cli("stack", "select", "--create", TENANT)
    cli("up", "--stack", TENANT, "--yes", "--skip-preview")
    give_volumes_to_pods(cluster, ["slow/mnist", "urgent/mnist"])

    started = time.monotonic()
    timeline: list[str] = []

    def mark(event: str) -> None:
        timeline.append(f"{time.monotonic() - started:7.1f} s  {event}")

    def submit(stack: str, args: list[str], **settings: str) -> None:
        cli.init_experiment(stack, tenant=TENANT, settings={**CLUSTER_SETTINGS, **settings})
        place_on_real_node(cli, stack, 0)
        for i, arg in enumerate(args):
            cli.set_value(stack, f"tfk8s:clusters[0].args[{i}]", arg)
        cli("up", "--stack", stack, "--yes", "--skip-preview")
        mark(f"pulumi up {stack} returned")

    def readiness(stack: str) -> dict[str, Any]:
        cli("up", "--stack", stack, "--refresh", "--yes", "--skip-preview")
        return dict(cli.outputs(stack)["readiness"]["clusters"]["mnist"])

    try:
        submit("slow", ["--steps=100000", f"--checkpoint-steps={CHECKPOINT_STEPS}"])
        uid = cluster.get("jobsets.jobset.x-k8s.io", NAMESPACE, "slow-mnist")["metadata"]["uid"]
        run = until("slow's run directory", 300, lambda: run_dir(volumes, "slow", uid))
        before = until("slow's first checkpoint", 600, lambda: checkpointed(run))
        mark(f"slow trains and checkpointed step {before}")
        # Admitted until every task is ready: its chief trains (asynchronous) while the other
        # worker may still be importing TensorFlow.
        until("slow's readiness to say Running", 180, lambda: readiness("slow")["queue"]["state"] == "Running")
        mark("slow's readiness: Running")

        submit(
            "urgent",
            ["--steps=60"],
            **{"tfk8s:clusters[0].workers.count": "1", "tfk8s:clusters[0].run.priority": "urgent"},
        )
        until("slow's pods to go (preempted)", 120, lambda: not pods_of(cluster, NAMESPACE, "slow-mnist"))
        preempted_at = checkpointed(run) or before
        mark(f"slow preempted by urgent (its last checkpoint: step {preempted_at})")
        report = readiness("slow")
        assert report["queue"]["state"] == "Preempted", report
        # By a higher priority of her own queue, not by another tenant's fair share.
        assert report["queue"]["reason"].startswith("InClusterQueue: Preempted"), report["queue"]

        def urgent_done() -> bool:
            return readiness("urgent")["phase"] == "Succeeded"

        until("urgent's run to succeed", 600, urgent_done)
        mark("urgent succeeded; its PS gone with it")
        assert not [p for p in pods_of(cluster, NAMESPACE, "urgent-mnist") if p["status"].get("phase") == "Running"]

        def resumed() -> TaskRun | None:
            again = task_runs(run, CHIEF)[1:]
            return again[0] if again and again[0].steps else None

        chief = until("slow's chief to report steps again", 600, resumed)
        mark(f"slow admitted again and trains from step {chief.started_at}")
        assert cluster.get("jobsets.jobset.x-k8s.io", NAMESPACE, "slow-mnist")["metadata"]["uid"] == uid
        assert chief.started_at >= preempted_at, (chief, preempted_at)  # from its checkpoint, not from zero
        until("slow's readiness to say Running again", 180, lambda: readiness("slow")["queue"]["state"] == "Running")
        mark("slow's readiness: Running")

        # Faults on the admitted JobSet (issue 56): its PS's pod, then a worker's, then the chief's,
        # deleted at once, then the PS's container killed in place.
        # Each replicated Job starts its own task again (the PS Job's next pod behind the same
        # Service, its retries as good as endless; the workers' Job's next pod for the index, one of
        # its retries spent); the JobSet itself never restarts (failurePolicy.maxRestarts 0) and
        # stays admitted, and the chief restores the newest checkpoint once the PS is back.
        def cost(fault: Fault, task: str, seen: int, resumed_from: int, how: str) -> None:
            """The fault on the timeline, and what it cost for bench/recovery.py: `task` started again
            (a PS only serves: until TensorFlow is imported; a worker: until its cluster formed)."""
            again = fault.since()
            mark(f"{fault.what} at step {seen}: {how}, training again in {again:.1f} s")
            phase = "tensorflow_imported" if task.startswith("ps-") else "cluster_ready"
            start = until(f"{task}'s progress file after {fault.what}", 60, lambda: started_again(run, task, fault, phase=phase))
            lost = max(0, seen - resumed_from)  # a worker that joins loses none
            record(QUEUED_MODE, fault, task=task, start=start, resumed_from=resumed_from, steps_lost=lost, training_again=again)

        seen, recreated = last_step(run, CHIEF), len(sessions_recreated(run, CHIEF))
        fault = Fault.now("ps-0's pod deleted", seen)
        delete_at_once(cluster, task_pod(cluster, "ps", 0))
        restored_after_ps = until(
            "slow's chief recreates its session after the PS's fault", 300, lambda: sessions_recreated(run, CHIEF)[recreated:]
        )[0][2]
        until(f"slow's chief past step {seen}", 300, lambda: last_step(run, CHIEF) > seen)
        cost(fault, "ps-0", seen, restored_after_ps, f"checkpoint {restored_after_ps} restored")
        # At least the checkpoint it was admitted again from; its chief may have saved one past its
        # last progress line (1218 restored after step 1203 printed: 2026-11-30).
        assert 0 < preempted_at <= restored_after_ps, (preempted_at, restored_after_ps, seen)

        seen, starts = last_step(run, CHIEF), len(task_runs(run, WORKER))
        fault = Fault.now(f"{WORKER}'s pod deleted", seen)
        delete_at_once(cluster, task_pod(cluster, "worker", 1))
        joined = until(f"slow's {WORKER} trains again", 300, lambda: _trained_after(run, WORKER, starts))
        cost(fault, WORKER, seen, joined.started_at, f"its next pod joined at step {joined.started_at}")

        # The chief's pod: the workers' Job's next pod for index 0 restores the newest checkpoint.
        seen, starts, newest = last_step(run, CHIEF), len(task_runs(run, CHIEF)), checkpointed(run) or 0
        fault = Fault.now(f"{CHIEF}'s pod deleted", seen)
        delete_at_once(cluster, task_pod(cluster, "worker", 0))
        chief = until(f"slow's {CHIEF} trains again", 300, lambda: _trained_after(run, CHIEF, starts))
        assert chief.restored is not None and newest <= chief.restored <= chief.started_at, (chief, newest)
        until(f"slow's chief past step {seen}", 300, lambda: last_step(run, CHIEF) > seen)
        cost(fault, CHIEF, seen, chief.restored, f"its next pod restored checkpoint {chief.restored}")

        # The PS's container killed in place: its Job restarts it in the same pod (OnFailure), at the
        # same address, its variables gone; the chief recreates its session from the newest checkpoint.
        ps = task_pod(cluster, "ps", 0)
        seen, recreated, newest = last_step(run, CHIEF), len(sessions_recreated(run, CHIEF)), checkpointed(run) or 0
        fault = Fault.now("ps-0's container killed in place", seen)
        kill_container(cluster, ps)
        restored = until(
            "slow's chief recreates its session after the PS's container restarted",
            300,
            lambda: sessions_recreated(run, CHIEF)[recreated:],
        )[0][2]
        until(f"slow's chief past step {seen}", 300, lambda: last_step(run, CHIEF) > seen)
        cost(fault, "ps-0", seen, restored, f"checkpoint {restored} restored")
        assert 0 < newest <= restored, (newest, restored, seen)
        again = cluster.get("pod", NAMESPACE, ps["metadata"]["name"])
        assert again["metadata"]["uid"] == ps["metadata"]["uid"], "the PS's container came back in a new pod"
        restarts = [p["status"]["containerStatuses"][0]["restartCount"] for p in (ps, again)]
        assert restarts[1] == restarts[0] + 1, restarts

        jobset = cluster.get("jobsets.jobset.x-k8s.io", NAMESPACE, "slow-mnist")
        assert jobset["metadata"]["uid"] == uid and jobset["status"].get("restarts", 0) == 0, jobset["status"]
        # Running again once the worker's next pod is ready (the kubelet probes its port every few seconds).
        until("slow's readiness to say Running after the faults", 180, lambda: readiness("slow")["queue"]["state"] == "Running")
    finally:
        print("\n[real node, queueing]\n" + "\n".join(timeline))
        for stack in ("urgent", "slow"):
            cli("destroy", "--stack", stack, "--yes", "--skip-preview", check=False)
