"""A lost task on real pods (issue 56): a between-graph run of the built-in trainer on the real node
loses its parameter server mid-run (its pod deleted at once, no grace) and still reaches its
target: the PS Deployment brings a new pod behind the same Service, the workers recreate their
sessions, the chief restores the newest checkpoint (never step 0), the run ends, the PS retire, and
readiness says Succeeded. The seconds from the fault to the chief's new session, and to training
past the step the run had reached, are printed: what `bench/recovery.py` will tabulate for every
mode and fault.

The fault is injected while the run trains, on its own progress (the run's checkpoint and the
chief's progress file on the log volume, read from this machine), never on a timer.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drivers import CLUSTER, Kube
from real_node import (
    MNIST_ON_THE_NODE,
    failure_report,
    give_volumes_to_pods,
    import_image,
    place_on_real_node,
    platform_settings,
    project,
    real_cluster,
    until,
)

TENANT, STACK, NAMESPACE = "tenant-alice", "real-faults", "tfk8s-alice"
STEPS, CHECKPOINT_STEPS = 1500, 100


@pytest.fixture(scope="module")
def cluster() -> Iterator[Kube]:
    with real_cluster(f"{CLUSTER}-faults") as kube:
        yield kube


def run_directory(volumes: Path) -> Path | None:
    """The run's directory on the log volume (`<experiment>/<cluster>/run-<job uid>`), once it exists."""
    found = sorted(volumes.glob(f"**/{STACK}/mnist/run-*"))
    return found[-1] if found else None


def checkpoint_step(run: Path) -> int:
    """The newest checkpoint's global step (-1: none yet)."""
    state = run / "checkpoints" / "checkpoint"
    if not state.is_file():
        return -1
    first = state.read_text().splitlines()[0]  # model_checkpoint_path: ".../model.ckpt-<step>"
    return int(first.rstrip('"').rsplit("-", 1)[1])


def chief_step(run: Path) -> int:
    """The chief's global step in its progress file (rewritten every 5 s; -1: none yet)."""
    progress = run / ".tfk8s" / "progress" / "worker-0.json"
    try:
        return int(json.loads(progress.read_text()).get("step") or -1)
    except (FileNotFoundError, json.JSONDecodeError):
        return -1


def session_recreated(run: Path) -> tuple[int, int] | None:
    """(step resumed at, step seen before) from the chief's log line, once it recreated its session."""
    log = run / "logs" / "worker-0.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    found = re.search(r"session recreated at global step (\d+) \(had seen (\d+)", text)
    return (int(found[1]), int(found[2])) if found else None


def test_a_ps_lost_mid_run_costs_a_resume_from_the_checkpoint_not_the_run(cluster: Kube, tmp_path: Path) -> None:
    image = import_image(cluster, "tensorflow")
    volumes = tmp_path / "volumes"
    cli = project(cluster, tmp_path / "project", "real-faults-test")
    platform = "platform-dev"
    cli("stack", "select", "--create", platform)
    for path, value in {**platform_settings(volumes), "tfk8s:platform.images.tensorflow": image}.items():
        cli("config", "set", "--stack", platform, "--path", path, value)
    cli("up", "--stack", platform, "--yes", "--skip-preview")
    cli("stack", "select", "--create", TENANT)
    cli("up", "--stack", TENANT, "--yes", "--skip-preview")
    give_volumes_to_pods(cluster, [f"{STACK}/mnist"])
    cli.init_experiment(
        STACK,
        tenant=TENANT,
        settings=MNIST_ON_THE_NODE,
    )
    place_on_real_node(cli, STACK, 0)
    cli.set_value(STACK, "tfk8s:clusters[0].args[0]", f"--steps={STEPS}")
    cli.set_value(STACK, "tfk8s:clusters[0].args[1]", f"--checkpoint-steps={CHECKPOINT_STEPS}")
    done = cli("up", "--stack", STACK, "--yes", "--skip-preview", check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr + _logs(cluster)

    run = until("the run's directory on the log volume", 300, lambda: run_directory(volumes))
    saved = until(
        f"a checkpoint at step {2 * CHECKPOINT_STEPS} or later, mid-run",
        600,
        lambda: checkpoint_step(run) if checkpoint_step(run) >= 2 * CHECKPOINT_STEPS else None,
    )
    (ps,) = [p for p in _pods(cluster) if p["metadata"]["labels"].get("app.kubernetes.io/component") == "ps"]
    assert chief_step(run) < STEPS, f"the run ended before the fault (step {chief_step(run)}): give it more steps"
    faulted = time.monotonic()
    cluster.run("delete", "pod", "-n", NAMESPACE, ps["metadata"]["name"], "--grace-period=0", "--force", "--wait=false")

    # The chief says when it recreated its session, at which step, after seeing which: the step the
    # run had reached (its progress file lags by up to 5 s, so it cannot tell that).
    recreated = until("the chief recreates its session after the fault", 300, lambda: session_recreated(run))
    resumed, seen = recreated
    recreated_after = time.monotonic() - faulted
    try:
        until(f"the chief past step {seen} again", 300, lambda: chief_step(run) if chief_step(run) > seen else None)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{_logs(cluster)}") from None
    again_after = time.monotonic() - faulted
    assert 0 < saved <= resumed <= seen, (saved, resumed, seen)  # the newest checkpoint, never step 0

    def job_done() -> dict[str, Any] | None:
        (job,) = [j for j in cluster.get("jobs", NAMESPACE) if j["metadata"]["labels"].get("tfk8s.io/stack") == STACK]
        status = job.get("status", {})
        failed = [c for c in status.get("conditions", []) if c["type"] == "Failed" and c["status"] == "True"]
        assert not failed, f"{failed}\n{_logs(cluster)}"
        return job if status.get("succeeded") == 2 else None

    until("the workers' Job completes after the fault", 900, job_done)

    def ps_retired() -> bool:
        deployments = [d for d in cluster.get("deployments", NAMESPACE) if d["metadata"]["labels"].get("tfk8s.io/stack") == STACK]
        return bool(deployments) and all(d["spec"]["replicas"] == 0 for d in deployments)

    until("the PS scale their own Deployment to zero", 120, ps_retired)
    cli("up", "--stack", STACK, "--yes", "--skip-preview", "--refresh")
    assert cli.outputs(STACK)["readiness"]["clusters"]["mnist"]["phase"] == "Succeeded"

    chief = json.loads((run / "results" / "worker-0.json").read_text())
    assert chief["global_step"] >= STEPS, chief
    recoveries = chief.get("recoveries") or []
    assert recoveries, f"the chief recreated no session after its PS was lost: {chief}"
    restored = recoveries[-1]["checkpoint"]
    assert restored and int(restored.rsplit("-", 1)[1]) == resumed, recoveries  # resumed from that checkpoint
    print(
        f"\n[real node faults] between-graph, PS pod deleted at step {seen}: resumed from checkpoint {resumed} "
        f"({seen - resumed} steps lost); session recreated {recreated_after:.1f} s after the fault, training past "
        f"step {seen} again within {again_after:.1f} s (progress files: 5 s resolution); "
        f"test accuracy {chief.get('test_accuracy')}"
    )
    cli("destroy", "--stack", STACK, "--yes")


def _pods(kube: Kube) -> list[dict[str, Any]]:
    return [p for p in kube.get("pods", NAMESPACE) if p["metadata"]["labels"].get("tfk8s.io/stack") == STACK]


def _logs(kube: Kube) -> str:
    return failure_report(kube, NAMESPACE)
