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
the queue. And an in-graph run driven by a chief (ParameterServerStrategy), queued as a JobSet the
same way, loses its parameter server's pod: its chief says so and exits with 75, its launcher starts
it again in the same pod (its Job spends no retry, the JobSet does not restart), and it restores the
newest checkpoint once the PS's next pod serves; then its worker's pod (the same chief trains on),
its chief's pod (the chief Job's next pod restores the newest checkpoint) and its PS's container
killed in place (the chief starts again in its pod once more), and the run reaches its target.

Prints the run's timeline (seconds since `slow`'s `pulumi up`) for the issue's closing note.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from drivers import CLUSTER, Cli, Kube
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
from run_logs import TaskRun, checkpoint_step, last_step, sessions_recreated, task_log, task_runs

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
# The in-graph run: its client is a chief Job of the JobSet, beside one PS and one worker.
IN_GRAPH, IN_GRAPH_CHIEF, IN_GRAPH_STEPS = "ingraph", "chief-0", 1800
# Steps a fault must leave the in-graph run: its recovery (~30 s) trains no step, and the next
# fault waits for a checkpoint past this one.
IN_GRAPH_ROOM = 500
IN_GRAPH_MODE = "in-graph, chief, queued (a JobSet)"


@dataclass(frozen=True)
class Alice:
    """The module's cluster (the real node, Kueue and JobSet), the queueing platform and alice's tenant."""

    cluster: Kube
    cli: Cli
    volumes: Path  # the platform's volumes on this machine (hostPath)


@pytest.fixture(scope="module")
def alice(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Alice]:
    with real_cluster(f"{CLUSTER}-rq", queueing=True) as cluster:
        image = import_image(cluster, "tensorflow")
        work = tmp_path_factory.mktemp("real-queueing")
        volumes = work / "volumes"
        cli = project(cluster, work / "project", "real-queueing-test")
        cli("stack", "select", "--create", "platform-dev")
        for path, value in platform_on_the_node(volumes, tensorflow=image).items():
            cli("config", "set", "--stack", "platform-dev", "--path", path, value)

        def queueing(config: dict[str, Any]) -> None:
            config["tfk8s:platform"]["queueing"] = {"enabled": True, "capacity": CAPACITY, "priorityClasses": {"urgent": 1000}}

        edit_stack(cli.cwd, "platform-dev", queueing)
        cli("up", "--stack", "platform-dev", "--yes", "--skip-preview")
        cli("stack", "select", "--create", TENANT)
        cli("up", "--stack", TENANT, "--yes", "--skip-preview")
        yield Alice(cluster, cli, volumes)


def run_dir(volumes: Path, experiment: str, uid: str) -> Path | None:
    found = [p for p in volumes.rglob(f"run-{uid}") if p.is_dir() and f"/{experiment}/mnist/" in str(p)]
    return found[0] if found else None


def task_pod(kube: Kube, role: str, index: int, jobset: str = "slow-mnist") -> dict[str, Any]:
    """The running pod of `jobset`'s task `<role>-<index>` (its Job's completion index)."""
    (pod,) = [
        p
        for p in pods_of(kube, NAMESPACE, jobset)
        if p["metadata"]["labels"].get("app.kubernetes.io/component") == role
        and p["metadata"]["labels"].get("batch.kubernetes.io/job-completion-index") == str(index)
        and p["status"].get("phase") == "Running"
    ]
    return pod


def checkpointed(run: Path) -> int | None:
    """The step of the run's newest checkpoint, once there is one."""
    step = checkpoint_step(run)
    return step if step >= 0 else None


def step_before_a_fault(run: Path) -> int:
    """The in-graph chief's step, with room left for a fault's recovery before the run ends."""
    step = last_step(run, IN_GRAPH_CHIEF)
    assert step < IN_GRAPH_STEPS - IN_GRAPH_ROOM, (
        f"the run is at step {step} of {IN_GRAPH_STEPS} before a fault: give it more steps"
    )
    return step


def _trained_after(run: Path, task: str, starts: int) -> TaskRun | None:
    """`task`'s first start after its first `starts`, once it has trained a step."""
    runs = task_runs(run, task)[starts:]
    return runs[0] if runs and runs[0].steps else None


def test_a_preempted_run_resumes_from_its_checkpoint_on_the_real_node(alice: Alice) -> None:
    cluster, cli, volumes = alice.cluster, alice.cli, alice.volumes
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


def test_a_queued_in_graph_run_that_loses_its_ps_its_worker_and_its_chief_resumes_each_time(alice: Alice) -> None:
    """In-graph from a chief (ParameterServerStrategy, ClusterCoordinator), one PS and one worker,
    queued as one JobSet, loses in turn (each fault once the run trains again after the last):
    - its PS's pod, deleted at once: the chief exits with tfk8s_train.in_graph.PS_LOST_EXIT and its
      launcher starts it again in the same pod (the chief's Job spends no retry), and it restores the
      newest checkpoint with the PS Job's next pod;
    - its worker's pod: the coordinator takes the worker Job's next pod back, the same chief trains on;
    - its chief's pod: the chief Job's next pod restores the newest checkpoint;
    - its PS's container, killed in place: the PS Job restarts it in its pod, the chief starts again
      in its own.
    The JobSet neither restarts nor leaves the queue; the run reaches its target with the accuracy of
    a run without faults, readiness says Succeeded, and nothing of it runs on."""
    cluster, cli = alice.cluster, alice.cli
    give_volumes_to_pods(cluster, [f"{IN_GRAPH}/mnist"])
    timeline: list[str] = []

    def chief_back(run: Path, fault: Fault, seen: int, chief: TaskRun) -> None:
        """The chief, started again from checkpoint `chief.restored`, trains past `seen`: what the fault
        cost, on the timeline and for bench/recovery.py."""
        until(f"{IN_GRAPH_CHIEF} past step {seen}", 300, lambda: last_step(run, IN_GRAPH_CHIEF) > seen)
        again = fault.since()
        start = until(
            f"{IN_GRAPH_CHIEF}'s progress file after {fault.what}",
            60,
            lambda: started_again(run, IN_GRAPH_CHIEF, fault, phase="cluster_ready"),
        )
        assert chief.restored is not None
        lost = max(0, seen - chief.restored)
        record(
            IN_GRAPH_MODE,
            fault,
            task=IN_GRAPH_CHIEF,
            start=start,
            resumed_from=chief.restored,
            steps_lost=lost,
            training_again=again,
        )
        timeline.append(f"{fault.what} at step {seen}: checkpoint {chief.restored} restored, training again in {again:.1f} s")

    settings = {
        **CLUSTER_SETTINGS,
        "tfk8s:clusters[0].replication": "in-graph",
        "tfk8s:clusters[0].inGraphClient": "chief",
        "tfk8s:clusters[0].workers.count": "1",
    }
    cli.init_experiment(IN_GRAPH, tenant=TENANT, settings=settings)
    place_on_real_node(cli, IN_GRAPH, 0)
    for i, arg in enumerate([f"--steps={IN_GRAPH_STEPS}", f"--checkpoint-steps={CHECKPOINT_STEPS}", "--log-every=5"]):
        cli.set_value(IN_GRAPH, f"tfk8s:clusters[0].args[{i}]", arg)
    try:
        cli("up", "--stack", IN_GRAPH, "--yes", "--skip-preview")
        jobset = f"{IN_GRAPH}-mnist"
        uid = cluster.get("jobsets.jobset.x-k8s.io", NAMESPACE, jobset)["metadata"]["uid"]
        run = until("the in-graph run's directory", 300, lambda: run_dir(alice.volumes, IN_GRAPH, uid))
        saved = until("its second checkpoint", 600, lambda: (c := checkpointed(run)) and c >= 2 * CHECKPOINT_STEPS and c)
        seen = step_before_a_fault(run)
        chief_pod = task_pod(cluster, "chief", 0, jobset)
        fault = Fault.now("ps-0's pod deleted", seen)
        delete_at_once(cluster, task_pod(cluster, "ps", 0, jobset))

        chief = until(f"{IN_GRAPH_CHIEF} trains again", 300, lambda: _trained_after(run, IN_GRAPH_CHIEF, 1))
        said = [line for line in task_log(run, IN_GRAPH_CHIEF).splitlines() if "lost a parameter server" in line]
        assert said and "exiting with 75" in said[0], task_log(run, IN_GRAPH_CHIEF)[-3000:]
        # The newest checkpoint at the fault, or one the chief saved after its last progress line.
        assert chief.restored is not None and saved <= chief.restored, (chief, saved)
        chief_back(run, fault, seen, chief)
        # Started again by its launcher: the same pod, and its Job counts no failure.
        same = cluster.get("pod", NAMESPACE, chief_pod["metadata"]["name"])
        assert same["metadata"]["uid"] == chief_pod["metadata"]["uid"] and "deletionTimestamp" not in same["metadata"]
        (job,) = [j for j in cluster.get("jobs", NAMESPACE) if j["metadata"]["name"] == f"{jobset}-chief-0"]
        assert job["status"].get("failed", 0) == 0, job["status"]
        found = cluster.get("jobsets.jobset.x-k8s.io", NAMESPACE, jobset)
        assert found["metadata"]["uid"] == uid and found["status"].get("restarts", 0) == 0, found["status"]

        # Its worker: the coordinator holds the worker's closures until the worker Job's next pod
        # serves at the task's address, and retries them there; the chief is not started again.
        seen, serving = step_before_a_fault(run), task_log(run, "worker-0").count(" serving at ")
        fault = Fault.now("worker-0's pod deleted", seen)
        delete_at_once(cluster, task_pod(cluster, "worker", 0, jobset))
        until("worker-0's next pod serves", 300, lambda: task_log(run, "worker-0").count(" serving at ") > serving)
        at = last_step(run, IN_GRAPH_CHIEF)
        until(f"{IN_GRAPH_CHIEF} trains again", 300, lambda: last_step(run, IN_GRAPH_CHIEF) > at)
        again = fault.since()
        assert len(task_runs(run, IN_GRAPH_CHIEF)) == 2, "the chief started again over a lost worker"
        start = until("worker-0's progress file", 60, lambda: started_again(run, "worker-0", fault, phase="tensorflow_imported"))
        record(IN_GRAPH_MODE, fault, task="worker-0", start=start, resumed_from=at, steps_lost=0, training_again=again)
        timeline.append(f"{fault.what} at step {seen}: its next pod served, the same chief training again in {again:.1f} s")

        # The chief's own pod: the chief Job's next pod (a retry spent) restores the newest checkpoint
        # and drives the same PS and worker on.
        saved = until("a checkpoint after the worker's", 600, lambda: (c := checkpointed(run)) and c > at and c)
        seen, client = step_before_a_fault(run), task_pod(cluster, "chief", 0, jobset)
        fault = Fault.now(f"{IN_GRAPH_CHIEF}'s pod deleted", seen)
        delete_at_once(cluster, client)
        third = until(f"{IN_GRAPH_CHIEF} trains a third time", 300, lambda: _trained_after(run, IN_GRAPH_CHIEF, 2))
        assert third.restored is not None and saved <= third.restored <= third.started_at, (third, saved)
        chief_back(run, fault, seen, third)

        # The PS's container killed in place: its Job restarts it in the same pod (OnFailure), at the
        # same address, its variables gone; the chief starts again in its own pod, as for the PS's pod.
        saved = until("a checkpoint after the chief's", 600, lambda: (c := checkpointed(run)) and c > seen and c)
        seen, ps = step_before_a_fault(run), task_pod(cluster, "ps", 0, jobset)
        client = task_pod(cluster, "chief", 0, jobset)
        fault = Fault.now("ps-0's container killed in place", seen)
        kill_container(cluster, ps)
        fourth = until(f"{IN_GRAPH_CHIEF} trains a fourth time", 300, lambda: _trained_after(run, IN_GRAPH_CHIEF, 3))
        assert fourth.restored is not None and saved <= fourth.restored <= fourth.started_at, (fourth, saved)
        chief_back(run, fault, seen, fourth)
        ps_now, client_now = (cluster.get("pod", NAMESPACE, p["metadata"]["name"]) for p in (ps, client))
        for before, now in ((ps, ps_now), (client, client_now)):  # the same pods, neither deleted
            assert now["metadata"]["uid"] == before["metadata"]["uid"] and "deletionTimestamp" not in now["metadata"], now
        restarts = [p["status"]["containerStatuses"][0]["restartCount"] for p in (ps, ps_now)]
        assert restarts[1] == restarts[0] + 1, restarts
        found = cluster.get("jobsets.jobset.x-k8s.io", NAMESPACE, jobset)
        assert found["metadata"]["uid"] == uid and found["status"].get("restarts", 0) == 0, found["status"]

        def completed() -> bool:
            status = cluster.get("jobsets.jobset.x-k8s.io", NAMESPACE, jobset).get("status") or {}
            ended = {c["type"]: c["status"] for c in status.get("conditions") or [] if c["type"] in ("Completed", "Failed")}
            assert ended.get("Failed") != "True", status
            return ended.get("Completed") == "True"

        until("the in-graph run's JobSet to complete", 600, completed)
        cli("up", "--stack", IN_GRAPH, "--refresh", "--yes", "--skip-preview")
        report = cli.outputs(IN_GRAPH)["readiness"]["clusters"]["mnist"]
        assert report["phase"] == "Succeeded", report
        result = json.loads((run / "results" / f"{IN_GRAPH_CHIEF}.json").read_text())
        assert result["first_step"] == fourth.started_at and result["global_step"] >= IN_GRAPH_STEPS, result
        assert result["test_accuracy"] >= 0.9, result

        # The PS go with the run (JobSet deletes its still-active Jobs): nothing of it runs on.
        def running() -> list[str]:
            return [p["metadata"]["name"] for p in pods_of(cluster, NAMESPACE, jobset) if p["status"].get("phase") == "Running"]

        until("no pod of the run to run on", 120, lambda: not running() or None, report=lambda: f"still running: {running()}")
    finally:
        print("\n[real node, queueing] in-graph from a chief:\n" + "\n".join(timeline))  # as far as it got
        cli("destroy", "--stack", IN_GRAPH, "--yes", "--skip-preview", check=False)
