"""The mission on a real node: `pulumi up` of a platform, a tenant and experiments whose PS and
workers run the real trainer in containers (the training image built here), find each other
through cluster DNS and train, on one platform and tenant brought up once for the module.

* A run that loses its parameter server, then its chief, then a worker, then its parameter server's
  container (killed in place) mid-run (issue 56), still reaches its target at the accuracy it
  reaches without faults. Each pod is deleted at once, no grace. The PS's Deployment brings a new
  pod behind the same Service, the workers recreate their sessions and the chief restores the
  newest checkpoint (never step 0). The Job's next pod for the chief's index restores the newest
  checkpoint, one written after the PS came back. The Job's next pod for the worker's index joins
  the run at the step it has reached and trains. The PS's container killed in place comes back in
  the same pod, and the chief restores the newest checkpoint again. Then the node goes down (its
  kubelet stopped, the run's containers killed) until the control plane has evicted every
  pod of the run (its grace, then `run.nodeLostSeconds`); the kubelet back, the run's next pods
  restore the newest checkpoint, and the evictions cost no retry. Then the run ends, the PS
  retire, and readiness says Succeeded. Per fault, the steps lost and the seconds to train again
  are printed. Each fault is injected on the run's own progress (its checkpoints and the chief's
  progress lines in its log on the log volume, read from this machine), never on a timer.
* An in-graph run driven by a chief (ParameterServerStrategy) loses its parameter server's pod (the
  chief exits with 75 and its launcher starts it again in the same pod, from the newest
  checkpoint), then its worker's (the same chief takes the worker's next pod back), then the
  chief's own (the Job's next pod restores the newest checkpoint), then its parameter server's
  container killed in place (the chief starts again in its pod once more), and reaches its target.
* A seed-era script of one's own (examples/seed-era: classic flags, `MonitoredTrainingSession`, its
  checkpoints on the log volume as often as `run.checkpointSeconds` says) loses its parameter
  server's pod mid-run: TensorFlow's own session recovery restores the newest checkpoint, and the
  run reaches its target; the launcher retires the PS the script would serve forever.
* A run whose release changes mid-run (issue 55): the next release's trainer replaces its Job, a
  new run that the preview shows; the new run continues the interrupted one from its newest
  checkpoint (the same lineage) and reaches its target.
* A run to its end: the workers' Job completes, the PS retire themselves through the API from
  inside their pods, and readiness says the run succeeded; `destroy` leaves the tenant's volumes,
  with the run's TensorBoard events on the log volume.

The real node keeps its taint: the experiments place their PS and workers there themselves
(`ps`/`workers` `nodeSelector` and `tolerations`), the tenant's Jupyter and TensorBoard start on
the simulated User Node. The node's firewall (kube-router) enforces the tenant's and the
experiments' NetworkPolicies all along: the runs train through them, their PS reach the API server
through them. Last, the platform team makes the real node the User Node, as it would retire one:
untaint it, point `userNode` at it, `pulumi up`, drain the old one. Jupyter (the Jupyter image
built here) and TensorBoard then run for real: Jupyter answers on its NodePort only with the
tenant's token, and TensorBoard's HTTP API, behind its token gate, lists the finished run from the
log volume. That move comes last: the apps then take the node's cores a run needs.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from drivers import CLUSTER, Cli, Kube
from fault_record import Fault, progress, record, started_again
from realnode_drivers import (
    BRIDGE_ADDRESS,
    MNIST_ON_THE_NODE,
    REAL_NODE_KEY,
    delete_at_once,
    deploy_platform_and_tenant,
    experiment_pods,
    failure_report,
    first_answer,
    give_volumes_to_pods,
    http_get,
    import_image,
    kill_container,
    kubelet_stopped,
    node_of,
    place_on_real_node,
    platform_on_the_node,
    project,
    ps_retired,
    real_cluster,
    task_pod,
    until,
    workers_done,
)
from run_logs import TaskRun, checkpoint_step, last_step, sessions_recreated, task_log, task_runs
from upgrade_env import destructive, kind_in, preview_steps

TENANT, PLATFORM, NAMESPACE = "tenant-alice", "platform-dev", "tfk8s-alice"
STACK = "real-mnist"  # the run to its end
# The run that loses its PS, its chief, a worker, then its node. Its steps: the chief, alone at
# about 40 steps/s while the worker's new pod starts (20-30 s alone, longer in the suite), must not
# reach the target before that pod trains (`_step_before_a_fault`). The node's outage costs no steps:
# its run's containers die with it. (With them training on through the outage, as in the runs until
# 2026-12-02, the run needed 15,000 steps: 90 steps/s on 2026-12-01's machine ended 5,000 within it.)
FAULTS, FAULT_STEPS, CHECKPOINT_STEPS = "real-faults", 8000, 100
# How long its pods wait for a node that stopped answering (run.nodeLostSeconds), after the control
# plane's own grace (kube-controller-manager's --node-monitor-grace-period: 40 s on a local cluster
# with a real node, hack/cluster.sh).
NODE_LOST_SECONDS = 10
CHIEF, WORKER = "worker-0", "worker-1"  # its tasks, as their logs name them
# The in-graph run that loses its PS, and its client's task. Its four faults come by step 700 or so,
# each on a checkpoint after the last recovery (its one worker: training waits out each fault), and
# each must leave 500 steps to go (faults at 211, 347, 528 and 714 of 1,500 on 2026-11-30).
IN_GRAPH, IN_GRAPH_STEPS, IN_GRAPH_CHIEF = "real-in-graph", 1800, "chief-0"
# The seed-era script (examples/seed-era) that loses its PS: 110 steps/s on this machine's loopback
# (less on the node's CPU limits), so mid-run at the fault, with a checkpoint every few seconds.
SEED_ERA, SEED_STEPS, SEED_CHECKPOINT_SECONDS = "real-seed-era", 6000, 5
# The modes, as bench/recovery.py reports them.
BETWEEN_GRAPH, IN_GRAPH_MODE, SEED_MODE = "between-graph", "in-graph, chief", "between-graph, a seed-era script"
# The run an upgrade interrupts: enough steps that it is still training when its Job is replaced
# (the preview and the `up` take 20-40 s, at 40-60 steps/s).
UPGRADED, UPGRADE_STEPS = "real-upgrade", 4000
ROOT = Path(__file__).resolve().parents[2]
OLD_USER_NODE = "tfk8s-user-node"


@dataclass(frozen=True)
class Alice:
    """The module's cluster with the real node, its project, and alice's tenant on platform-dev."""

    cluster: Kube
    cli: Cli
    volumes: Path  # the platform's volumes on this machine (hostPath)
    imported: dict[str, float]  # seconds each image took to import


@pytest.fixture(scope="module")
def alice(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Alice]:
    with real_cluster(f"{CLUSTER}-train") as cluster:
        imported = {}
        images = {}
        for what in ("tensorflow", "jupyter"):
            start = time.monotonic()
            images[what] = import_image(cluster, what)
            imported[what] = time.monotonic() - start
        work = tmp_path_factory.mktemp("real-training")
        volumes = work / "volumes"
        cli = project(cluster, work / "project", "real-node-test")
        # Jupyter and TensorBoard (with its gate) on the real node's 2 cores, once it is the User Node.
        settings = platform_on_the_node(volumes, tensorflow=images["tensorflow"], jupyter=images["jupyter"], app_cpu="500m")
        deploy_platform_and_tenant(cli, settings, platform=PLATFORM, tenant=TENANT)
        yield Alice(cluster, cli, volumes, imported)


def run_directory(volumes: Path, stack: str) -> Path | None:
    """The run's directory on the log volume (`<experiment>/<cluster>/run-<job uid>`), once it exists."""
    found = sorted(volumes.glob(f"**/{stack}/mnist/run-*"))
    return found[-1] if found else None


def chief_step(run: Path) -> int:
    """The global step of the chief's last progress line (-1: none yet)."""
    return last_step(run, CHIEF)


def _delete_pod(cluster: Kube, run: Path, task: str) -> Fault:
    """Deletes the running pod of the FAULTS run's `task` at once, no grace."""
    pod, step = task_pod(cluster, NAMESPACE, FAULTS, task), _step_before_a_fault(run)
    fault = Fault.now(f"{task}'s pod deleted", step)
    delete_at_once(cluster, pod)
    return fault


def _kill_container(cluster: Kube, run: Path, task: str) -> tuple[Fault, dict[str, Any]]:
    """Kills the container of the FAULTS run's `task` in place (its processes, not its pod); the
    fault and the pod as it was."""
    pod, step = task_pod(cluster, NAMESPACE, FAULTS, task), _step_before_a_fault(run)
    fault = Fault.now(f"{task}'s container killed in place", step)
    kill_container(cluster, pod)
    return fault, pod


def _step_before_a_fault(run: Path) -> int:
    step = chief_step(run)
    assert step < FAULT_STEPS - 500, f"the run is at step {step} of {FAULT_STEPS} before a fault: give it more steps"
    return step


def _checkpoint_at_least(run: Path, step: int) -> int:
    """Waits for a checkpoint of the run at `step` or later; its step."""
    return until(
        f"a checkpoint at step {step} or later", 600, lambda: checkpoint_step(run) if checkpoint_step(run) >= step else None
    )


def _past(cluster: Kube, run: Path, step: int) -> None:
    """Waits for the chief's progress past `step`."""
    try:
        until(f"the chief past step {step}", 300, lambda: chief_step(run) if chief_step(run) > step else None)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{_logs(cluster)}") from None


def test_a_run_that_loses_its_ps_its_chief_and_a_worker_resumes_each_time_and_reaches_its_target(alice: Alice) -> None:
    cluster, cli, volumes = alice.cluster, alice.cli, alice.volumes
    # Its two workers and PS need 1.25 of the node's 2 cores: the apps are not there yet.
    assert _still_tainted(cluster), "the real node is the User Node already: run this module's tests in file order"
    # A progress line every 5 of a task's steps, not 25: the step a fault struck at, to 10 or so.
    _mnist_up(
        alice,
        FAULTS,
        f"--steps={FAULT_STEPS}",
        f"--checkpoint-steps={CHECKPOINT_STEPS}",
        "--log-every=5",
        settings={"tfk8s:clusters[0].run.nodeLostSeconds": str(NODE_LOST_SECONDS)},
    )
    run = until("the run's directory on the log volume", 300, lambda: run_directory(volumes, FAULTS))
    report = [f"between-graph, {FAULT_STEPS} steps, a checkpoint every {CHECKPOINT_STEPS}"]

    # The PS: its Deployment brings a new pod behind the same Service; the workers recreate their
    # sessions and the chief restores the newest checkpoint, never step 0.
    saved = _checkpoint_at_least(run, 2 * CHECKPOINT_STEPS)
    fault = _delete_pod(cluster, run, "ps-0")
    first = until("the chief recreates its session after the PS's fault", 300, lambda: sessions_recreated(run, CHIEF))
    resumed, seen, restored = first[0]
    back = fault.since()
    _past(cluster, run, seen)
    # Restored from the newest checkpoint at the fault (at least the one seen before it). The chief
    # reads the global step once its new session is up, and by then the other worker, training
    # asynchronously, may have gone past the checkpoint (203 restored, 211 read: a warm run). Not
    # `resumed <= seen` either: the step seen is the chief's last progress line, and its saver may
    # have written one more checkpoint after it (302 restored, 303 resumed after 301 seen: CI on
    # 2026-12-01).
    assert 0 < saved <= restored <= resumed, (saved, restored, resumed, seen)
    lost = max(0, seen - restored)
    _record(BETWEEN_GRAPH, fault, run, "ps-0", resumed_from=restored, steps_lost=lost, training_again=fault.since())
    report.append(
        f"{fault.what} at step {seen}: checkpoint {restored} restored ({lost} steps lost); "
        f"the chief's new session in {back:.1f} s, past step {seen} again in {fault.since():.1f} s"
    )

    # The chief: the Job's next pod for index 0 restores the newest checkpoint, one written after the
    # PS came back, and trains past the step the run had reached.
    newer = _checkpoint_at_least(run, seen + 1)
    fault = _delete_pod(cluster, run, CHIEF)
    chief = until(f"{CHIEF} starts again", 300, lambda: task_runs(run, CHIEF)[1:])[0]
    back = fault.since()
    _past(cluster, run, fault.at_step)
    again = fault.since()
    # The newest checkpoint at the fault: at least the one seen before it (the chief may have saved
    # one more after its last progress line).
    assert chief.restored is not None and newer <= chief.restored <= chief.started_at, (chief, newer, fault)
    # What `tfk8s status` shows of it, from the task's progress file (written every 5 s).
    cost = until(f"{CHIEF}'s progress file says where it resumed", 60, lambda: _resumed(run, CHIEF))
    # The step it had reached is its last report, up to 5 s before the fault.
    assert cost["after_step"] > 0 and cost["at_step"] >= chief.restored and 0 < cost["seconds"] < 300, cost
    lost = max(0, fault.at_step - chief.restored)  # it may have saved one past its last progress line
    _record(BETWEEN_GRAPH, fault, run, CHIEF, resumed_from=chief.restored, steps_lost=lost, training_again=again)
    report.append(
        f"{fault.what} at step {fault.at_step}: its next pod restored checkpoint {chief.restored} "
        f"(about {lost} steps lost) in {back:.1f} s, "
        f"past step {fault.at_step} again in {again:.1f} s"
    )

    # A worker, not the chief: the Job's next pod for its index joins the run where it is, and trains.
    fault = _delete_pod(cluster, run, WORKER)
    joined = until(f"{WORKER} trains again", 300, lambda: _trained_again(run, WORKER))
    again = fault.since()
    assert joined.started_at > fault.at_step, (joined, fault)
    cost = until(f"{WORKER}'s progress file says where it resumed", 60, lambda: _resumed(run, WORKER))
    assert cost["at_step"] >= joined.started_at and cost["steps_lost"] == 0 and 0 < cost["seconds"] < 300, cost
    _record(BETWEEN_GRAPH, fault, run, WORKER, resumed_from=joined.started_at, steps_lost=0, training_again=again)
    report.append(
        f"{fault.what} at step {fault.at_step}: its next pod joined at step {joined.started_at}, training in {again:.1f} s"
    )

    # The PS again, its container killed in place: the kubelet restarts it in the same pod, at the
    # same address; the chief recreates its session once more and restores the newest checkpoint.
    newest, recreated = checkpoint_step(run), len(sessions_recreated(run, CHIEF))
    fault, pod = _kill_container(cluster, run, "ps-0")
    resumed, seen, restored = until(
        "the chief recreates its session after the PS's container restarted",
        300,
        lambda: sessions_recreated(run, CHIEF)[recreated:],
    )[0]
    back = fault.since()
    _past(cluster, run, seen)
    # Not `restored <= seen`: the chief's last step seen comes before its saver's hook reads the
    # global step, which the other worker, training asynchronously, may have moved on (1117 restored
    # after 1116 seen: the run on 2026-11-30).
    assert 0 < newest <= restored <= resumed, (newest, restored, resumed, seen)
    restarted = cluster.get("pod", NAMESPACE, pod["metadata"]["name"])  # the same pod, not a new one
    assert restarted["metadata"]["uid"] == pod["metadata"]["uid"]
    restarts = [p["status"]["containerStatuses"][0]["restartCount"] for p in (pod, restarted)]
    assert restarts[1] == restarts[0] + 1, restarts
    lost = max(0, seen - restored)
    _record(BETWEEN_GRAPH, fault, run, "ps-0", resumed_from=restored, steps_lost=lost, training_again=fault.since())
    report.append(
        f"{fault.what} at step {seen}: checkpoint {restored} restored ({lost} steps lost); "
        f"the chief's new session in {back:.1f} s, past step {seen} again in {fault.since():.1f} s"
    )

    # The node itself goes down: its kubelet stopped and the run's containers killed with it (a node
    # that crashes, or is powered off, and comes back). The control plane marks the node NotReady
    # after its grace and evicts the run's pods NODE_LOST_SECONDS later; nothing can end them while
    # the kubelet is away, and a Job starts a task's next pod only once the last has ended. The
    # kubelet back, it ends the evicted pods; the PS's Deployment and the Job start new ones, and the
    # chief restores the newest checkpoint. An eviction is the cluster's doing (DisruptionTarget): it
    # costs no retry.
    (job,) = _jobs(cluster, FAULTS)
    failed = job["status"].get("failed", 0)
    down = _running(cluster, FAULTS)
    before = {p["metadata"]["uid"] for p in down}
    starts, step = len(task_runs(run, CHIEF)), _step_before_a_fault(run)
    fault = Fault.now("the node down past run.nodeLostSeconds", step)
    with kubelet_stopped(cluster):
        for pod in down:  # the kubelet, stopped, restarts none of them
            kill_container(cluster, pod)
        newest = checkpoint_step(run)  # nothing trains from here to the kubelet's return
        until(
            "the node NotReady and every pod of the run evicted",
            300,
            lambda: all("deletionTimestamp" in p["metadata"] for p in _pods(cluster, FAULTS) if p["metadata"]["uid"] in before),
        )
        evicted = fault.since()
    # A guard against a hang, not a speed check (the bench times recovery): the cold CI of a7f3e5f,
    # its Go builds holding both cores, saw no new start within 300 s.
    runs = until(
        f"{CHIEF} starts again on the node back",
        600,
        lambda: task_runs(run, CHIEF)[starts:] and task_runs(run, CHIEF),
        report=lambda: failure_report(cluster, NAMESPACE),
    )
    chief, reached = runs[starts], max(runs[starts - 1].steps, default=step)  # and where its evicted pod stopped
    assert chief.restored is not None and newest <= chief.restored <= chief.started_at, (chief, newest)
    _past(cluster, run, reached)
    lost_node, lost_steps = fault.since(), max(0, reached - chief.restored)
    (job,) = _jobs(cluster, FAULTS)
    assert job["status"].get("failed", 0) == failed, job["status"]  # evictions spent no retry
    assert not before & {p["metadata"]["uid"] for p in _pods(cluster, FAULTS)}, "an evicted pod is still there"
    _record(BETWEEN_GRAPH, fault, run, CHIEF, resumed_from=chief.restored, steps_lost=lost_steps, training_again=lost_node)
    report.append(
        f"{fault.what} at step {step}: the run's pods evicted {evicted:.1f} s later (the node's grace and "
        f"{NODE_LOST_SECONDS} s), the kubelet started again; the chief, stopped at step {reached}, restored checkpoint "
        f"{chief.restored} in its next pod ({lost_steps} steps lost), past step {reached} {lost_node:.1f} s after the "
        "kubelet stopped"
    )

    until("the workers' Job completes after the faults", 900, lambda: workers_done(cluster, NAMESPACE, FAULTS))
    until("the PS scale their own Deployment to zero", 120, lambda: ps_retired(cluster, NAMESPACE, FAULTS))
    cli("up", "--stack", FAULTS, "--yes", "--skip-preview", "--refresh")
    assert cli.outputs(FAULTS)["readiness"]["clusters"]["mnist"]["phase"] == "Succeeded"
    result = json.loads((run / "results" / f"{CHIEF}.json").read_text())  # the last chief's
    assert result["global_step"] >= FAULT_STEPS and result["first_step"] == chief.started_at, result
    assert result["test_accuracy"] >= 0.9, result  # without faults the run reaches 0.97-0.98
    report.append(f"test accuracy {result['test_accuracy']:.3f}")
    print("\n[real node faults] " + "\n  ".join(report))
    cli("destroy", "--stack", FAULTS, "--yes")


def _record(mode: str, fault: Fault, run: Path, task: str, *, resumed_from: int, steps_lost: int, training_again: float) -> None:
    """What the fault cost, for bench/recovery.py (fault_record.record), with the phases of `task`'s
    start after it: a task that only serves (a PS, an in-graph worker) until TensorFlow is
    imported, a trainer until its cluster formed (a script of one's own: until its launcher started)."""
    serves = task.startswith("ps-") or (mode == IN_GRAPH_MODE and task != IN_GRAPH_CHIEF)  # forms no session of its own
    # A script of one's own says none of the trainer's phases: its launcher's start alone.
    phase = None if mode == SEED_MODE else "tensorflow_imported" if serves else "cluster_ready"
    start = until(f"{task}'s progress file after {fault.what}", 60, lambda: started_again(run, task, fault, phase=phase))
    record(mode, fault, task=task, start=start, resumed_from=resumed_from, steps_lost=steps_lost, training_again=training_again)


SEED_LINE = re.compile(r"job : worker/0 step : (\d+) ")
RESTORING = re.compile(r"Restoring parameters from \S*model\.ckpt-(\d+)")


def _seed_step(run: Path) -> int:
    """The global step of the seed-era chief's last progress line (-1: none yet)."""
    found = SEED_LINE.findall(task_log(run, CHIEF))
    return int(found[-1]) if found else -1


def test_a_seed_era_script_that_loses_its_ps_restores_its_checkpoint_and_reaches_its_target(alice: Alice) -> None:
    """A script of the seeds' era, unchanged but for where and how often it checkpoints
    (examples/seed-era: classic flags, `replica_device_setter`, `MonitoredTrainingSession`), one PS
    and two workers: the PS's pod deleted at once mid-run. TensorFlow's own recovery does the rest:
    the workers' sessions fail, `MonitoredSession` recreates them, and the chief restores the newest
    checkpoint (TensorFlow's log line says which), never a re-initialised model. The run reaches
    its target at the accuracy it reaches without faults, and the launcher retires the PS, which
    the script itself would serve forever."""
    cluster, cli, volumes = alice.cluster, alice.cli, alice.volumes
    assert _still_tainted(cluster), "the real node is the User Node already: run this module's tests in file order"
    settings = {
        "tfk8s:clusters[0].code.path": "examples/seed-era",
        "tfk8s:clusters[0].command[0]": "python",
        "tfk8s:clusters[0].command[1]": "mnist_replica.py",
        "tfk8s:clusters[0].run.checkpointSeconds": str(SEED_CHECKPOINT_SECONDS),
    }
    _mnist_up(alice, SEED_ERA, f"--train_steps={SEED_STEPS}", settings=settings)
    run = until("the run's directory on the log volume", 300, lambda: run_directory(volumes, SEED_ERA))
    saved = _checkpoint_at_least(run, 1)
    seen = _seed_step(run)
    assert seen < SEED_STEPS * 0.7, f"the run is at step {seen} of {SEED_STEPS} before the fault: give it more steps"
    restored_before = len(RESTORING.findall(task_log(run, CHIEF)))
    fault = Fault.now("ps-0's pod deleted", seen)
    delete_at_once(cluster, task_pod(cluster, NAMESPACE, SEED_ERA, "ps-0"))
    restored = until(
        "the seed-era chief restores a checkpoint after the PS's fault",
        300,
        lambda: [int(s) for s in RESTORING.findall(task_log(run, CHIEF))[restored_before:]],
    )[0]
    until(f"the seed-era chief past step {seen}", 300, lambda: _seed_step(run) > seen)
    again = fault.since()
    # The newest checkpoint, not step 0: at least the one there before the fault. The script prints
    # every 50 of its own steps, so its chief may have saved one past its last line (242 restored
    # after step 204 printed, on 2026-11-30): the steps lost are a bound, not a count.
    assert saved <= restored, (saved, restored, seen)
    lost = max(0, seen - restored)
    _record(SEED_MODE, fault, run, "ps-0", resumed_from=restored, steps_lost=lost, training_again=again)

    until("the workers' Job completes after the fault", 900, lambda: workers_done(cluster, NAMESPACE, SEED_ERA))
    until("the launcher retires the PS", 120, lambda: ps_retired(cluster, NAMESPACE, SEED_ERA))
    # Its target: the chief's last checkpoint (the step it prints is the last one it fetched, which
    # the other worker may have moved on: 5998 printed, 6000 saved).
    assert checkpoint_step(run) >= SEED_STEPS, (checkpoint_step(run), task_log(run, CHIEF)[-3000:])
    done = re.search(r"job : worker/0 done at step \d+, test accuracy : ([\d.]+)", task_log(run, CHIEF))
    assert done and float(done[1]) >= 0.9, task_log(run, CHIEF)[-3000:]
    print(
        f"\n[real node faults] a seed-era script, {SEED_STEPS} steps, a checkpoint every {SEED_CHECKPOINT_SECONDS} s: "
        f"{fault.what} at step {seen}: checkpoint {restored} restored (about {lost} steps lost), past step {seen} "
        f"again in {again:.1f} s; test accuracy {float(done[1]):.3f}"
    )
    cli("destroy", "--stack", SEED_ERA, "--yes")


def _resumed(run: Path, task: str) -> dict[str, Any] | None:
    """The task's progress file's `last_resume` once its latest start trains (task_progress.Resume)."""
    resume = progress(run, task).get("last_resume")
    return resume if resume and resume.get("at_step") is not None else None


def _trained_again(run: Path, task: str) -> TaskRun | None:
    """`task`'s second start, once it has trained a step."""
    again = task_runs(run, task)[1:]
    return again[0] if again and again[0].steps else None


def test_an_in_graph_run_whose_ps_is_lost_starts_its_chief_again_from_the_checkpoint(alice: Alice) -> None:
    """In-graph from a chief (ParameterServerStrategy, ClusterCoordinator), one PS and one worker:
    the PS's pod deleted at once mid-run. TensorFlow's coordinator cannot go on without its PS: the
    chief exits with tfk8s_train.in_graph.PS_LOST_EXIT, and its launcher starts it again at once in
    the same pod (no Job backoff, no retry spent); it restores the newest checkpoint, with the PS's
    new pod. Then its worker's pod deleted: the coordinator takes the Job's next pod back, and the
    same chief trains on. Then the chief's own pod deleted: the Job's next pod restores the newest
    checkpoint. Then the PS's container killed in place (its process, not its pod): the chief starts
    again in its pod once more. The run reaches its target; its PS retire and readiness says Succeeded."""
    cluster, cli, volumes = alice.cluster, alice.cli, alice.volumes
    assert _still_tainted(cluster), "the real node is the User Node already: run this module's tests in file order"
    in_graph = {"replication": "in-graph", "inGraphClient": "chief", "workers.count": "1"}
    _mnist_up(
        alice,
        IN_GRAPH,
        f"--steps={IN_GRAPH_STEPS}",
        f"--checkpoint-steps={CHECKPOINT_STEPS}",
        "--log-every=5",
        settings={f"tfk8s:clusters[0].{key}": value for key, value in in_graph.items()},
    )
    run = until("the run's directory on the log volume", 300, lambda: run_directory(volumes, IN_GRAPH))
    saved = _checkpoint_at_least(run, 2 * CHECKPOINT_STEPS)
    step = last_step(run, IN_GRAPH_CHIEF)
    assert step < IN_GRAPH_STEPS - 500, f"the run is at step {step} of {IN_GRAPH_STEPS} before the fault"
    (ps,) = [p for p in _running(cluster, IN_GRAPH) if p["metadata"]["labels"].get("app.kubernetes.io/component") == "ps"]
    (client,) = [p for p in _running(cluster, IN_GRAPH) if p["metadata"]["labels"].get("app.kubernetes.io/component") == "chief"]
    fault = Fault.now("ps-0's pod deleted", step)
    delete_at_once(cluster, ps)
    chief = until(f"{IN_GRAPH_CHIEF} starts again", 300, lambda: task_runs(run, IN_GRAPH_CHIEF)[1:])[0]
    back = fault.since()
    said = [line for line in task_log(run, IN_GRAPH_CHIEF).splitlines() if "lost a parameter server" in line]
    assert said and "exiting with 75" in said[0], task_log(run, IN_GRAPH_CHIEF)[-3000:]
    # The newest checkpoint at the fault, or one the chief saved after its last progress line.
    assert chief.restored is not None and saved <= chief.restored <= chief.started_at, (chief, saved)
    until(f"{IN_GRAPH_CHIEF} past step {fault.at_step}", 300, lambda: last_step(run, IN_GRAPH_CHIEF) > fault.at_step)
    again = fault.since()
    cost = until(f"{IN_GRAPH_CHIEF}'s progress file says where it resumed", 60, lambda: _resumed(run, IN_GRAPH_CHIEF))
    assert cost["at_step"] >= chief.restored and 0 < cost["seconds"] < 300, cost
    lost_steps = max(0, fault.at_step - chief.restored)
    _record(IN_GRAPH_MODE, fault, run, IN_GRAPH_CHIEF, resumed_from=chief.restored, steps_lost=lost_steps, training_again=again)
    (job,) = [j for j in _jobs(cluster, IN_GRAPH) if j["metadata"]["name"].endswith("-chief")]
    assert job["status"].get("failed", 0) == 0, job["status"]  # the lost PS cost the chief no retry
    restarted = cluster.get("pod", NAMESPACE, client["metadata"]["name"])  # and no new pod: its launcher started it
    assert restarted["metadata"]["uid"] == client["metadata"]["uid"] and "deletionTimestamp" not in restarted["metadata"]

    # Its worker: the coordinator holds the worker's steps until the Job's next pod serves at the
    # task's address, and takes it back; the chief goes on, not started again.
    step = last_step(run, IN_GRAPH_CHIEF)
    assert step < IN_GRAPH_STEPS - 500, f"the run is at step {step} of {IN_GRAPH_STEPS} before the worker's fault"
    (worker,) = [p for p in _running(cluster, IN_GRAPH) if p["metadata"]["labels"].get("app.kubernetes.io/component") == "worker"]
    lost = Fault.now("worker-0's pod deleted", step)
    delete_at_once(cluster, worker)
    until("worker-0's next pod serves", 300, lambda: task_log(run, "worker-0").count(" serving at ") >= 2)
    serving, at = lost.since(), last_step(run, IN_GRAPH_CHIEF)
    until(f"{IN_GRAPH_CHIEF} trains again", 300, lambda: last_step(run, IN_GRAPH_CHIEF) > at)
    trained = lost.since()
    assert len(task_runs(run, IN_GRAPH_CHIEF)) == 2, "the chief started again over a lost worker"
    # Its closures are retried on the new pod: the run loses no step.
    _record(IN_GRAPH_MODE, lost, run, "worker-0", resumed_from=at, steps_lost=0, training_again=trained)

    # The chief itself: the Job's next pod (a retry spent: a pod deleted is the task's failure as far
    # as the Job can tell) restores the newest checkpoint and drives the same PS and worker on.
    saved = _checkpoint_at_least(run, at + CHECKPOINT_STEPS)
    step = last_step(run, IN_GRAPH_CHIEF)
    assert step < IN_GRAPH_STEPS - 500, f"the run is at step {step} of {IN_GRAPH_STEPS} before the chief's fault"
    gone = Fault.now(f"{IN_GRAPH_CHIEF}'s pod deleted", step)
    delete_at_once(cluster, client)
    third = until(f"{IN_GRAPH_CHIEF} starts a third time", 300, lambda: task_runs(run, IN_GRAPH_CHIEF)[2:])[0]
    assert third.restored is not None and saved <= third.restored <= third.started_at, (third, saved)
    until(f"{IN_GRAPH_CHIEF} past step {gone.at_step}", 300, lambda: last_step(run, IN_GRAPH_CHIEF) > gone.at_step)
    chief_again, chief_lost = gone.since(), max(0, gone.at_step - third.restored)
    _record(
        IN_GRAPH_MODE, gone, run, IN_GRAPH_CHIEF, resumed_from=third.restored, steps_lost=chief_lost, training_again=chief_again
    )

    # The PS once more, its container killed in place: the kubelet starts it again in the same pod,
    # at the same address, its variables gone; the chief starts again in its own pod, as above.
    saved = _checkpoint_at_least(run, gone.at_step + CHECKPOINT_STEPS)
    step = last_step(run, IN_GRAPH_CHIEF)
    assert step < IN_GRAPH_STEPS - 500, f"the run is at step {step} of {IN_GRAPH_STEPS} before the PS's container is killed"
    (ps,) = [p for p in _running(cluster, IN_GRAPH) if p["metadata"]["labels"].get("app.kubernetes.io/component") == "ps"]
    (client,) = [p for p in _running(cluster, IN_GRAPH) if p["metadata"]["labels"].get("app.kubernetes.io/component") == "chief"]
    killed = Fault.now("ps-0's container killed in place", step)
    kill_container(cluster, ps)
    fourth = until(f"{IN_GRAPH_CHIEF} starts a fourth time", 300, lambda: task_runs(run, IN_GRAPH_CHIEF)[3:])[0]
    assert fourth.restored is not None and saved <= fourth.restored <= fourth.started_at, (fourth, saved)
    until(f"{IN_GRAPH_CHIEF} past step {killed.at_step}", 300, lambda: last_step(run, IN_GRAPH_CHIEF) > killed.at_step)
    killed_again, killed_lost = killed.since(), max(0, killed.at_step - fourth.restored)
    _record(
        IN_GRAPH_MODE,
        killed,
        run,
        IN_GRAPH_CHIEF,
        resumed_from=fourth.restored,
        steps_lost=killed_lost,
        training_again=killed_again,
    )
    ps_now, client_now = (cluster.get("pod", NAMESPACE, p["metadata"]["name"]) for p in (ps, client))
    for before, now in ((ps, ps_now), (client, client_now)):  # the same pods, neither deleted
        assert now["metadata"]["uid"] == before["metadata"]["uid"] and "deletionTimestamp" not in now["metadata"], now["metadata"]
    restarts = [p["status"]["containerStatuses"][0]["restartCount"] for p in (ps, ps_now)]
    assert restarts[1] == restarts[0] + 1, restarts

    until("the chief's Job completes", 900, lambda: _chief_done(cluster, job["metadata"]["name"]))
    retries = cluster.get("job", NAMESPACE, job["metadata"]["name"])["status"].get("failed", 0)
    until("the PS scale their own Deployment to zero", 120, lambda: ps_retired(cluster, NAMESPACE, IN_GRAPH))
    cli("up", "--stack", IN_GRAPH, "--yes", "--skip-preview", "--refresh")
    assert cli.outputs(IN_GRAPH)["readiness"]["clusters"]["mnist"]["phase"] == "Succeeded"
    result = json.loads((run / "results" / f"{IN_GRAPH_CHIEF}.json").read_text())
    assert result["first_step"] == fourth.started_at and result["global_step"] >= IN_GRAPH_STEPS, result
    assert result["test_accuracy"] >= 0.9, result
    print(
        f"\n[real node faults] in-graph from a chief, {IN_GRAPH_STEPS} steps: {fault.what} at step {fault.at_step}: "
        f"the chief, started again in its pod, restored checkpoint {chief.restored} ({lost_steps} steps lost) "
        f"in {back:.1f} s, past step {fault.at_step} again in {again:.1f} s; {lost.what} at step {lost.at_step}: its "
        f"next pod served in {serving:.1f} s, the same chief training again in {trained:.1f} s; {gone.what} at step "
        f"{gone.at_step}: its next pod restored checkpoint {third.restored} ({chief_lost} steps lost), past step "
        f"{gone.at_step} again in {chief_again:.1f} s ({retries} retries spent); {killed.what} at step {killed.at_step}: "
        f"the chief, started again in its pod, restored checkpoint {fourth.restored} ({killed_lost} steps lost), past step "
        f"{killed.at_step} again in {killed_again:.1f} s; test accuracy {result['test_accuracy']:.3f}"
    )
    cli("destroy", "--stack", IN_GRAPH, "--yes")


def _jobs(kube: Kube, stack: str) -> list[dict[str, Any]]:
    return [j for j in kube.get("jobs", NAMESPACE) if j["metadata"]["labels"].get("tfk8s.io/stack") == stack]


def _running(kube: Kube, stack: str) -> list[dict[str, Any]]:
    return [p for p in _pods(kube, stack) if "deletionTimestamp" not in p["metadata"] and p["status"].get("phase") == "Running"]


def _chief_done(kube: Kube, name: str) -> bool:
    """The chief's Job succeeded; fails at once if it failed."""
    status = kube.get("job", NAMESPACE, name).get("status", {})
    failed = [c for c in status.get("conditions", []) if c["type"] == "Failed" and c["status"] == "True"]
    assert not failed, f"{failed}\n{_logs(kube)}"
    return status.get("succeeded") == 1


def test_a_run_whose_release_changes_mid_run_continues_from_its_checkpoint(
    alice: Alice, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """What an upgrade of tfk8s does to a run in progress (issue 55): the next release ships another
    trainer, so the experiment's `preview` shows its Job replaced, a new run. The new run, of the
    same lineage (the same settings), starts from the interrupted run's newest checkpoint, not from
    step 0, and reaches its target; the interrupted run's files stay on the log volume. The next
    release is this tree with one trainer module changed, run from a copy of its own."""
    cluster, cli, volumes = alice.cluster, alice.cli, alice.volumes
    assert _still_tainted(cluster), "the real node is the User Node already: run this module's tests in file order"
    _mnist_up(alice, UPGRADED, f"--steps={UPGRADE_STEPS}", f"--checkpoint-steps={CHECKPOINT_STEPS}", "--log-every=5")
    first = until("the run's directory on the log volume", 300, lambda: run_directory(volumes, UPGRADED))
    saved = _checkpoint_at_least(first, CHECKPOINT_STEPS)
    release = _next_release(tmp_path_factory.mktemp("next-release"))
    program = cli.cwd / "infra"
    program.unlink()
    program.symlink_to(release / "infra")
    try:  # the team's project on the next release from here on, until the experiment is destroyed
        shown = preview_steps(cli, UPGRADED)
        assert destructive(shown) == [], "the upgrade's preview deletes or replaces something stateful"
        assert [kind_in(urn) for op, urn in shown if op == "replace" and kind_in(urn) == "Job"] == ["Job"], shown
        cli("up", "--stack", UPGRADED, "--yes", "--skip-preview")
        second = until("the new run's directory", 300, lambda: next(iter(_other_runs(volumes, UPGRADED, first)), None))
        chief = until(f"{CHIEF} of the new run starts", 300, lambda: task_runs(second, CHIEF))[0]
        # The newest checkpoint when the Job was replaced: the interrupted run trained on meanwhile.
        assert chief.restored is not None and saved <= chief.restored <= chief.started_at, (chief, saved)
        continued = json.loads((second / ".tfk8s" / "continued.json").read_text())
        assert (continued["run"], continued["checkpoint"]) == (first.name, f"model.ckpt-{chief.restored}"), continued
        until("the new run's workers' Job completes", 900, lambda: workers_done(cluster, NAMESPACE, UPGRADED))
        until("the new run's PS scale their own Deployment to zero", 120, lambda: ps_retired(cluster, NAMESPACE, UPGRADED))
        cli("up", "--stack", UPGRADED, "--yes", "--skip-preview", "--refresh")
        assert cli.outputs(UPGRADED)["readiness"]["clusters"]["mnist"]["phase"] == "Succeeded"
        result = json.loads((second / "results" / f"{CHIEF}.json").read_text())
        assert result["first_step"] == chief.started_at and result["global_step"] >= UPGRADE_STEPS, result
        assert result["test_accuracy"] >= 0.9, result
        assert checkpoint_step(first) >= chief.restored  # the interrupted run's checkpoints are still there
        print(
            f"\n[real node upgrade] the run replaced at checkpoint {saved} or later; the new run continued "
            f"{first.name} from checkpoint {chief.restored}, test accuracy {result['test_accuracy']:.3f}"
        )
        cli("destroy", "--stack", UPGRADED, "--yes")
    finally:
        program.unlink()
        program.symlink_to(ROOT / "infra")


def _next_release(where: Path) -> Path:
    """This tree's program and trainer, copied, with one trainer module changed: another trainer
    digest, so every experiment it runs gets a new run id, as a release that changes the trainer."""
    for part in ("infra", "training"):
        shutil.copytree(ROOT / part, where / part, ignore=shutil.ignore_patterns("__pycache__"))
    module = where / "training" / "tfk8s_train" / "__init__.py"
    module.write_text(module.read_text() + "\n# the next release\n")
    return where


def _other_runs(volumes: Path, stack: str, first: Path) -> list[Path]:
    return [d for d in volumes.glob(f"**/{stack}/mnist/run-*") if d != first]


def test_pulumi_up_trains_for_real_and_the_ps_retire_themselves(alice: Alice) -> None:
    cluster, cli, volumes = alice.cluster, alice.cli, alice.volumes
    node = node_of(cluster)
    assert _still_tainted(cluster), "the real node is the User Node already"
    up_started = time.monotonic()
    _mnist_up(alice, STACK, "--steps=60")  # a short run (the trainer's own flag)
    up_seconds = time.monotonic() - up_started
    pods = _pods(cluster, STACK)
    assert pods and all(p["spec"]["nodeName"] == node for p in pods), [
        (p["metadata"]["name"], p["spec"].get("nodeName")) for p in pods
    ]

    job = until("the workers' Job completes", 600, lambda: workers_done(cluster, NAMESPACE, STACK))
    trained = time.monotonic() - up_started

    try:
        until("the PS scale their own Deployment to zero", 120, lambda: ps_retired(cluster, NAMESPACE, STACK))
    except AssertionError as error:
        raise AssertionError(f"{error}\n{_logs(cluster)}") from None
    cli("up", "--stack", STACK, "--yes", "--skip-preview", "--refresh")
    readiness = cli.outputs(STACK)["readiness"]["clusters"]["mnist"]
    assert readiness["phase"] == "Succeeded", readiness
    events = list(volumes.rglob("events.out.tfevents.*"))
    assert events, f"no TensorBoard events under {volumes}"
    print(
        f"\n[real node] image import {alice.imported['tensorflow']:.1f} s (jupyter {alice.imported['jupyter']:.1f} s); "
        f"`pulumi up` {up_seconds:.1f} s; "
        f"up to a finished run {trained:.1f} s (Job {job['metadata']['name']}, {job['status'].get('failed', 0)} pods retried); "
        f"{len(events)} event files"
    )
    cli("destroy", "--stack", STACK, "--yes")
    claims = cluster.get("pvc", NAMESPACE)
    assert claims and all(c["status"]["phase"] == "Bound" for c in claims)

    # The platform team makes the real node the User Node: its own taint off (the platform refuses a
    # node with another manager's taints, and says so), the platform pointed at it, the old one drained.
    cluster.run("taint", "node", node, f"{REAL_NODE_KEY}-")
    cli("config", "set", "--stack", PLATFORM, "--path", "tfk8s:platform.userNode.name", node)
    cli("config", "set", "--stack", PLATFORM, "--path", "tfk8s:platform.userNode.address", BRIDGE_ADDRESS)
    cli("up", "--stack", PLATFORM, "--yes", "--skip-preview")
    cluster.run("drain", OLD_USER_NODE, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s")
    moved = time.monotonic()
    done = cli("up", "--stack", TENANT, "--yes", "--skip-preview", "--refresh", check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr + _logs(cluster)
    apps_seconds = time.monotonic() - moved
    report = cli.outputs(TENANT)["readiness"]
    assert report["ready"], report
    apps = [
        p
        for p in cluster.get("pods", NAMESPACE)
        if p["metadata"]["labels"].get("app.kubernetes.io/name") in ("jupyter", "tensorboard")
        and "deletionTimestamp" not in p["metadata"]
    ]
    assert sorted(p["metadata"]["labels"]["app.kubernetes.io/name"] for p in apps) == ["jupyter", "tensorboard"]
    assert all(p["spec"]["nodeName"] == node for p in apps), [(p["metadata"]["name"], p["spec"].get("nodeName")) for p in apps]
    token = base64.b64decode(cluster.get("secret", NAMESPACE, "tfk8s-jupyter-token")["data"]["token"]).decode()

    jupyter = report["jupyter"]["url"]
    assert jupyter.startswith(f"http://{BRIDGE_ADDRESS}:"), jupyter
    assert first_answer(f"{jupyter}api/status").status == 403
    assert http_get(f"{jupyter}api/status", token="not-" + token).status == 403
    answer = http_get(f"{jupyter}api/contents/work/tfk8s", token=token)
    assert answer.status == 200, answer.body[:500]
    assert "master_client.ipynb" in {f["name"] for f in json.loads(answer.body)["content"]}, answer.body[:500]

    board = report["tensorboard"]["url"]
    assert first_answer(f"{board}data/runs").status == 401

    def runs() -> list[str] | None:
        answer = http_get(f"{board}data/runs", token=token)
        assert answer.status == 200, answer.body[:500]
        found = [r for r in json.loads(answer.body) if r.startswith(f"{STACK}/mnist")]
        return found or None

    listed = until("TensorBoard lists the finished run", 120, runs)
    print(f"[real node] Jupyter and TensorBoard up on the real User Node in {apps_seconds:.1f} s; runs {listed}")


def _mnist_up(alice: Alice, stack: str, *args: str, settings: dict[str, str] | None = None) -> None:
    """`pulumi up` of alice's experiment `stack`: one cluster `mnist` of the built-in trainer with
    `args` (and `settings` over MNIST_ON_THE_NODE), its PS and workers on the real node, which keeps
    its taint (they ask for it)."""
    give_volumes_to_pods(alice.cluster, [f"{stack}/mnist"])
    alice.cli.init_experiment(stack, tenant=TENANT, settings={**MNIST_ON_THE_NODE, **(settings or {})})
    place_on_real_node(alice.cli, stack, 0)
    for position, arg in enumerate(args):
        alice.cli.set_value(stack, f"tfk8s:clusters[0].args[{position}]", arg)
    done = alice.cli("up", "--stack", stack, "--yes", "--skip-preview", check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr + _logs(alice.cluster)


def _pods(kube: Kube, stack: str) -> list[dict[str, Any]]:
    return experiment_pods(kube, NAMESPACE, stack)


def _logs(kube: Kube) -> str:
    return failure_report(kube, NAMESPACE)


def _still_tainted(kube: Kube) -> bool:
    """The real node keeps its own taint: it is not the User Node yet (the last test makes it one)."""
    taints = kube.get("node", name=node_of(kube))["spec"].get("taints") or []
    return any(t["key"] == REAL_NODE_KEY for t in taints)
