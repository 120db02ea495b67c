"""A preempted run resumes from its checkpoint, for real (issue 38): on a local cluster with this
machine's real node and Kueue and JobSet beside it, the queueing platform's capacity holds one
training cluster at a time. Alice's long run `slow` trains (the real trainer in the TensorFlow image
built here) and checkpoints; her `urgent` run, at the platform's priority class `urgent`, makes
Kueue preempt it: its pods go, the urgent one trains to its end, and `slow` is admitted again as
the same JobSet, so in its own run directory, where its chief finds the checkpoint and goes on
from its step, not from zero. Readiness says each state on `pulumi up --refresh`.

Prints the run's timeline (seconds since `slow`'s `pulumi up`) for the issue's closing note.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drivers import CLUSTER, Kube
from queueing_env import pods_of
from real_node import (
    give_volumes_to_pods,
    import_image,
    place_on_real_node,
    platform_settings,
    project,
    real_cluster,
    until,
)

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
STEP = re.compile(r"tfk8s-progress task=worker-0 step=(\d+)")
START = re.compile(r"=== tfk8s-launch: worker-0 start (\d+) ")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Kube]:
    with real_cluster(f"{CLUSTER}-rq", queueing=True) as kube:
        yield kube


def run_dir(volumes: Path, experiment: str, uid: str) -> Path | None:
    found = [p for p in volumes.rglob(f"run-{uid}") if p.is_dir() and f"/{experiment}/mnist/" in str(p)]
    return found[0] if found else None


def checkpointed_step(run: Path) -> int | None:
    """The step of the run's latest checkpoint (TensorFlow's `checkpoint` index file), if any."""
    index = run / "checkpoints" / "checkpoint"
    if not index.exists():
        return None
    found = re.search(r'model_checkpoint_path: ".*?-(\d+)"', index.read_text())
    return int(found.group(1)) if found else None


def sessions(log: Path) -> list[list[int]]:
    """The steps worker-0 reported, per start of its launcher."""
    found: list[list[int]] = []
    for line in log.read_text(errors="replace").splitlines():
        if START.search(line):
            found.append([])
        elif (step := STEP.search(line)) and found:
            found[-1].append(int(step.group(1)))
    return found


def test_a_preempted_run_resumes_from_its_checkpoint_on_the_real_node(cluster: Kube, tmp_path: Path) -> None:
    image = import_image(cluster, "tensorflow")
    volumes = tmp_path / "volumes"
    cli = project(cluster, tmp_path / "project", "real-queueing-test")
    cli("stack", "select", "--create", "platform-dev")
    for path, value in {**platform_settings(volumes), "tfk8s:platform.images.tensorflow": image}.items():
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
        before = until("slow's first checkpoint", 600, lambda: checkpointed_step(run))
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
        preempted_at = checkpointed_step(run) or before
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

        log = run / "logs" / "worker-0.log"

        def resumed() -> list[int] | None:
            found = sessions(log) if log.exists() else []
            return found[1] if len(found) >= 2 and found[1] else None

        steps = until("slow's chief to report steps again", 600, resumed)
        mark(f"slow admitted again and trains from step {steps[0]}")
        assert cluster.get("jobsets.jobset.x-k8s.io", NAMESPACE, "slow-mnist")["metadata"]["uid"] == uid
        assert steps[0] >= preempted_at, (steps, preempted_at)  # from its checkpoint, not from zero
        until("slow's readiness to say Running again", 180, lambda: readiness("slow")["queue"]["state"] == "Running")
        mark("slow's readiness: Running")
    finally:
        print("\n[real node, queueing]\n" + "\n".join(timeline))
        for stack in ("urgent", "slow"):
            cli("destroy", "--stack", stack, "--yes", "--skip-preview", check=False)
