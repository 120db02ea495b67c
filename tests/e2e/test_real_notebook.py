"""In-graph training driven from the tenant's notebook, on real pods (issue 56): alice opens
`master_client.ipynb` in her Jupyter on the real node, with her token, as her browser would (a
session through Jupyter's REST API, each cell over the kernel's WebSocket: jupyter_driver), and
runs it against the parameter server and two workers of her experiment (`replication: in-graph`,
`inGraphClient: notebook`), which run on the same node, behind the platform's NetworkPolicies,
which kube-router enforces.

While the training cell runs, its parameter server's pod is deleted at once. TensorFlow's
coordinator cannot go on without it, and nothing may exit: the kernel is alice's. The cell waits
until the PS's next pod answers at its Service, builds a new strategy in the same kernel and
restores the newest checkpoint (never step 0). Then worker 1's pod is deleted: the coordinator runs
its steps on worker 0, and takes the Job's next pod back. The notebook runs to its last cell in
the one kernel, the run reaches its target at the accuracy of a run without faults, its done
marker retires the PS and the workers, and readiness says Succeeded. Each fault is injected on the
run's own progress (its checkpoints on the log volume, the cell's progress lines), never on a timer.

Her Jupyter's own pod lost mid-run is not tried here: in two trials on 2026-12-02 the notebook run
again in the next pod restored the newest checkpoint and trained again in 37.5 and 35.7 s, but in the
second the new kernel's steps then failed on worker 1 with `INTERNAL: Unable to parse request`
(the worker's protobuf parser found invalid UTF-8 in an eager operation's device name the client
sent), which TensorFlow's coordinator does not take as a worker's failure. Not a test for CI
until that is understood (issue 56).

The real node is the User Node and the training node at once (platform.userNode.sharedWithTraining,
a cluster of one node): Jupyter runs on the User Node, where training pods go nowhere else.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from drivers import CLUSTER, Cli, Kube
from fault_record import Fault, record, started_again
from jupyter_driver import Kernel
from realnode_drivers import (
    MNIST_ON_THE_NODE,
    delete_at_once,
    deploy_platform_and_tenant,
    failure_report,
    first_answer,
    give_volumes_to_pods,
    import_image,
    node_of,
    place_on_real_node,
    platform_on_the_node,
    project,
    ps_retired,
    real_cluster,
    shared_user_node,
    task_pod,
    untaint,
    until,
    workers_done,
)
from run_logs import START, checkpoint_of, checkpoint_step, task_log

PLATFORM, TENANT, NAMESPACE = "platform-dev", "tenant-alice", "tfk8s-alice"
STACK = "real-notebook"
NOTEBOOK = "work/tfk8s/master_client.ipynb"  # where the platform ships it in Jupyter's home
# The run's steps: its PS fault at a checkpoint of step 200 or later, then its worker's on a
# checkpoint 200 steps after the restore, each with room left: the worker's next pod waits the
# Job's 10 s backoff and a TensorFlow import while worker 0 trains on alone (about 30 steps/s on
# the node's 2 cores, 2026-12-02: 3,000 steps leave a minute and a half after the worker's fault).
STEPS, FIRST_FAULT_AT, ROOM = 3000, 200, 1500
MODE = "in-graph, a notebook"  # as bench/recovery.py reports it
# Each cell's wait: the training cell's is the run's (the kernel's TensorFlow import, a PS's next pod).
CELL_SECONDS, TRAINING_SECONDS = 300, 1200
PROGRESS = re.compile(r"tfk8s-progress task=chief-0 step=(\d+) ")
# alice's Jupyter and TensorBoard (with its gate), one PS and two workers on the node's 2 cores;
# the kernel, the in-graph client, runs in Jupyter's container with its TensorFlow.
APP_CPU, APP_MEMORY = "400m", "2Gi"
CLUSTER_SIZES = {"ps.cpu": "250m", "workers.cpu": "300m", "workers.memory": "1Gi"}


@dataclass(frozen=True)
class Notebook:
    """The module's cluster with the real node as its User Node, alice's tenant, and her Jupyter."""

    cluster: Kube
    cli: Cli
    volumes: Path  # the platform's volumes on this machine (hostPath)
    jupyter: str  # her Jupyter's URL on the node's NodePort
    token: str  # her Jupyter token


@pytest.fixture(scope="module")
def alice(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Notebook]:
    with real_cluster(f"{CLUSTER}-notebook") as cluster:
        tensorflow, jupyter = import_image(cluster, "tensorflow"), import_image(cluster, "jupyter")
        work = tmp_path_factory.mktemp("real-notebook")
        cli = project(cluster, work / "project", "real-notebook-test")
        untaint(cluster)
        settings = {
            **platform_on_the_node(
                work / "volumes", tensorflow=tensorflow, jupyter=jupyter, app_cpu=APP_CPU, app_memory=APP_MEMORY
            ),
            **shared_user_node(node_of(cluster)),
        }
        deploy_platform_and_tenant(cli, settings, platform=PLATFORM, tenant=TENANT)
        url = cli.outputs(TENANT)["readiness"]["jupyter"]["url"]
        token = base64.b64decode(cluster.get("secret", NAMESPACE, "tfk8s-jupyter-token")["data"]["token"]).decode()
        assert first_answer(f"{url}api/status", token, seconds=120).status == 200
        yield Notebook(cluster, cli, work / "volumes", url, token)


def test_a_notebook_that_loses_its_ps_and_a_worker_on_real_pods_resumes_in_its_kernel(alice: Notebook) -> None:
    cluster = alice.cluster
    _experiment_up(alice)
    pool = ThreadPoolExecutor(1)  # the training cell runs there while the faults are injected here
    opened = _open(alice)
    kernel = opened.kernel
    try:
        run = until("the run's directory on the log volume", 60, lambda: _run_directory(alice.volumes))
        trained = pool.submit(kernel.run, opened.training, TRAINING_SECONDS)
        lost_ps = _lose_the_ps(cluster, kernel, run, trained)
        lost_worker = _lose_a_worker(cluster, kernel, run, lost_ps.restored, trained)
        printed = trained.result(TRAINING_SECONDS)
        kernel.run(opened.done_marker, CELL_SECONDS)  # the same kernel: `cfg` from the cells before
    finally:
        kernel.close()  # a cell still running ends with its kernel
        pool.shutdown()
    assert "chief-0 lost a parameter server" in printed and "waiting for every PS to answer" in printed, printed[-3000:]

    result = json.loads((run / "results" / "chief-0.json").read_text())
    [recovery] = result["recoveries"]  # the PS's loss alone: the worker's costs no new start
    assert recovery["resumed_at"] == lost_ps.restored == result["first_step"] > 0, (recovery, result)
    assert recovery["seen"] >= lost_ps.restored and recovery["lost_at"] >= lost_ps.fault.wall, (recovery, lost_ps)
    assert result["global_step"] >= STEPS and result["test_accuracy"] >= 0.90, result
    assert task_log(run, "worker-1").count(" serving at ") == 2, task_log(run, "worker-1")[-3000:]

    # The done marker retires every server: the PS scale their Deployment to zero, the workers' Job
    # completes, and readiness, from live status, says the run succeeded.
    retired, done = (lambda: ps_retired(cluster, NAMESPACE, STACK)), (lambda: workers_done(cluster, NAMESPACE, STACK))
    until("the PS scale their own Deployment to zero", 120, retired, report=lambda: _logs(cluster))
    until("the workers' Job completes", 120, done, report=lambda: _logs(cluster))
    alice.cli("up", "--stack", STACK, "--yes", "--skip-preview", "--refresh")
    assert alice.cli.outputs(STACK)["readiness"]["clusters"]["mnist"]["phase"] == "Succeeded"
    ps_waited = recovery["ps_back_at"] - recovery["lost_at"]
    print(
        f"\n[real node faults] in-graph from a notebook, {STEPS} steps: {lost_ps.fault.what} at step {lost_ps.fault.at_step}: "
        f"the kernel waited {ps_waited:.1f} s for the PS, restored checkpoint {lost_ps.restored} "
        f"({lost_ps.fault.at_step - lost_ps.restored} steps lost), past step {lost_ps.fault.at_step} again in "
        f"{lost_ps.training_again:.1f} s; {lost_worker.fault.what} at step {lost_worker.fault.at_step}: training went on, "
        f"its next pod served in {lost_worker.served:.1f} s; test accuracy {result['test_accuracy']:.3f}"
    )
    alice.cli("destroy", "--stack", STACK, "--yes")


@dataclass(frozen=True)
class Session:
    """alice's notebook open in a kernel of her Jupyter, its first cells run; the training cell and
    the done marker left to run, each with its source."""

    kernel: Kernel
    training: str
    done_marker: str


def _open(alice: Notebook) -> Session:
    """Opens the notebook in a new kernel and runs what comes before its training cell."""
    kernel = Kernel(alice.jupyter, alice.token, NOTEBOOK)
    # What alice types first: her run's length, and TensorFlow's C++ logs quieter.
    kernel.run(
        f"import os\nos.environ['TFK8S_STEPS'] = '{STEPS}'\nos.environ['TF_CPP_MIN_LOG_LEVEL'] = '2'",
        CELL_SECONDS,
    )
    cells = ["".join(c["source"]) for c in kernel.notebook(NOTEBOOK)["cells"] if c["cell_type"] == "code"]
    setup, config, training, done_marker = cells
    said = kernel.run(setup, CELL_SECONDS)
    assert f"{STACK}-mnist-ps-0" in said, said  # the layout alice's experiment published
    kernel.run(config, CELL_SECONDS)
    return Session(kernel, training, done_marker)


@dataclass(frozen=True)
class LostPs:
    fault: Fault
    restored: int  # the checkpoint's step the kernel restored
    training_again: float  # seconds from the fault to the run past the step it had reached


def _lose_the_ps(cluster: Kube, kernel: Kernel, run: Path, trained: Future[str]) -> LostPs:
    """Deletes the PS's pod at once once the run has a checkpoint at FIRST_FAULT_AT or later; waits
    until the kernel has restored a checkpoint and trains past the step it had reached."""
    saved = _checkpoint_at_least(run, FIRST_FAULT_AT, trained)
    step = _step(kernel.text)
    assert step < STEPS - ROOM, f"the run is at step {step} of {STEPS} before the PS's fault: give it more steps"
    fault = Fault.now("ps-0's pod deleted", step)
    delete_at_once(cluster, task_pod(cluster, NAMESPACE, STACK, "ps-0"))
    restored = until(
        "the kernel restores a checkpoint", 600, lambda: _restored(_after_the_loss(kernel.text)), report=lambda: _logs(cluster)
    )
    assert saved <= restored <= step + 100, (saved, restored, step)  # the newest at the fault, never 0
    until(
        f"the kernel past step {step} again",
        300,
        lambda: _step(_after_the_loss(kernel.text)) > step,
        report=lambda: _logs(cluster),
    )
    again = fault.since()
    start = until(
        "ps-0's progress file after its fault", 60, lambda: started_again(run, "ps-0", fault, phase="tensorflow_imported")
    )
    record(MODE, fault, task="ps-0", start=start, resumed_from=restored, steps_lost=max(0, step - restored), training_again=again)
    return LostPs(fault, restored, again)


@dataclass(frozen=True)
class LostWorker:
    fault: Fault
    served: float  # seconds from the fault to the worker's next pod serving at its address


def _lose_a_worker(cluster: Kube, kernel: Kernel, run: Path, restored: int, trained: Future[str]) -> LostWorker:
    """Deletes worker 1's pod at once, on a checkpoint 200 steps past the restore; waits until its next
    pod serves at the task's address. The run trains on (worker 0 runs its steps): no step is lost."""
    _checkpoint_at_least(run, restored + 200, trained)
    step = _step(kernel.text)
    assert step < STEPS - ROOM, f"the run is at step {step} of {STEPS} before the worker's fault: give it more steps"
    fault = Fault.now("worker-1's pod deleted", step)
    delete_at_once(cluster, task_pod(cluster, NAMESPACE, STACK, "worker-1"))
    until(
        "worker-1's next pod serves",
        300,
        lambda: task_log(run, "worker-1").count(" serving at ") >= 2,
        report=lambda: _logs(cluster),
    )
    served = fault.since()
    assert not trained.done(), f"the run ended before worker-1's next pod served: give it more steps than {STEPS}"
    start = until(
        "worker-1's progress file after its fault", 60, lambda: started_again(run, "worker-1", fault, phase="tensorflow_imported")
    )
    record(MODE, fault, task="worker-1", start=start, resumed_from=step, steps_lost=0, training_again=served)
    return LostWorker(fault, served)


def _experiment_up(alice: Notebook) -> None:
    """alice's experiment: one in-graph cluster `mnist` her notebook drives, a PS and two workers on
    the real node, which serve until the notebook's done marker."""
    give_volumes_to_pods(alice.cluster, [f"{STACK}/mnist"])
    settings = {"replication": "in-graph", "inGraphClient": "notebook", **CLUSTER_SIZES}
    alice.cli.init_experiment(
        STACK, tenant=TENANT, settings={**MNIST_ON_THE_NODE, **{f"tfk8s:clusters[0].{k}": v for k, v in settings.items()}}
    )
    place_on_real_node(alice.cli, STACK, 0)
    done = alice.cli("up", "--stack", STACK, "--yes", "--skip-preview", check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr + _logs(alice.cluster)


def _run_directory(volumes: Path) -> Path | None:
    found = sorted(volumes.glob(f"**/{STACK}/mnist/run-*"))
    return found[-1] if found else None


def _checkpoint_at_least(run: Path, step: int, trained: Future[str]) -> int:
    """Waits for a checkpoint at `step` or later; fails at once with the cell's error should it end."""

    def saved() -> int | None:
        if trained.done():
            trained.result()  # raises the cell's failure
            raise AssertionError(f"the training cell ended before a checkpoint at step {step}: give the run more steps")
        return checkpoint_step(run) if checkpoint_step(run) >= step else None

    return until(f"a checkpoint at step {step} or later", 600, saved)


def _step(text: str) -> int:
    """The global step of the last progress line in `text` (-1: none)."""
    found = PROGRESS.findall(text)
    return int(found[-1]) if found else -1


def _after_the_loss(text: str) -> str:
    """What the cell printed since it last lost its PS ("" before it has)."""
    _, lost, after = text.rpartition("lost a parameter server")
    return after if lost else ""


def _restored(text: str) -> int | None:
    """The checkpoint's step the client's first start in `text` restored, once it says so."""
    starts = [START.match(line) for line in text.splitlines()]
    found = [s for s in starts if s and s[1] == "chief-0" and s[3]]
    return checkpoint_of(found[0][3]) if found else None


def _logs(cluster: Kube) -> str:
    return failure_report(cluster, NAMESPACE)
