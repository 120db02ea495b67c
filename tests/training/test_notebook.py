"""master_client.ipynb, executed by nbclient as the client of a real in-graph cluster."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

import nbformat
import pytest
from checkpoints import latest_checkpoint_step
from nbclient import NotebookClient
from tfk8s_train.cluster import LocalCluster, make_spec

pytestmark = pytest.mark.training
TRAINING_DIR = Path(__file__).resolve().parents[2] / "training"


def test_notebook_trains_against_servers_started_by_the_runner(
    tmp_path: Path, digits_tfrecords: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_dir = tmp_path / "log"
    log_dir.mkdir()
    runner_log = (tmp_path / "runner.log").open("w")
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tfk8s_train.runner",
            "--mode",
            "in-graph",
            "--ps",
            "1",
            "--workers",
            "2",
            "--no-client",
            "--data-dir",
            str(digits_tfrecords),
            "--log-dir",
            str(log_dir),
            "--timeout",
            "400",
        ],
        stdout=runner_log,
        stderr=subprocess.STDOUT,
        cwd=TRAINING_DIR,
    )
    try:
        deadline = time.monotonic() + 60
        while not (log_dir / "cluster.json").is_file():
            assert runner.poll() is None and time.monotonic() < deadline, (tmp_path / "runner.log").read_text()
            time.sleep(0.2)
        client_env = json.loads((log_dir / "cluster.json").read_text())["client_env"]
        for key, value in client_env.items():
            monkeypatch.setenv(key, value)
        # The kernel sees the log directory at a path of its own, which the servers do not have, as a
        # Jupyter pod sees the log volume where the PS pods do not (/logs/<experiment>/<cluster>, the
        # pods /log): the client reads and writes the checkpoints itself.
        kernel_home = tmp_path / "jupyter"
        kernel_home.mkdir()
        (kernel_home / "logs").symlink_to(log_dir)
        notebook_view = Path("logs", Path(client_env["TFK8S_LOG_DIR"]).name)
        assert not (TRAINING_DIR / notebook_view).exists()  # the servers' directory: no such path there
        monkeypatch.setenv("TFK8S_LOG_DIR", str(notebook_view))
        monkeypatch.setenv("TFK8S_STEPS", "300")
        monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")

        notebook = nbformat.read(TRAINING_DIR / "master_client.ipynb", as_version=4)
        NotebookClient(notebook, timeout=400, kernel_name="python3", resources={"metadata": {"path": str(kernel_home)}}).execute()

        text = "".join(out.get("text", "") for cell in notebook.cells for out in cell.get("outputs", []))
        assert "tfk8s-progress task=chief-0 step=300" in text
        run_dir = Path(client_env["TFK8S_LOG_DIR"])  # the run's own directory under the log dir
        assert run_dir.parent == log_dir and run_dir.name == f"run-{client_env['TFK8S_RUN_UID']}"
        result = json.loads((run_dir / "results" / "chief-0.json").read_text())
        assert result["mode"] == "in-graph" and result["test_accuracy"] >= 0.90
        assert latest_checkpoint_step(run_dir / "checkpoints") == 300  # saved by the kernel, at its path
        # The notebook's done marker retires every server: the runner exits 0 on its own.
        assert runner.wait(60) == 0, (tmp_path / "runner.log").read_text()[-3000:]
        assert (tmp_path / "runner.log").read_text().count("are done; retiring") == 3
    finally:
        if runner.poll() is None:
            runner.terminate()  # the runner stops every process group it started
            runner.wait(30)
        runner_log.close()


class LostMidRun(NamedTuple):
    """A notebook-driven run that lost a task: its servers, their exit codes, the notebook as executed,
    the newest checkpoint when the task was lost and when (time.time())."""

    cluster: LocalCluster
    codes: dict[str, int | None]
    notebook: nbformat.NotebookNode
    checkpoint: int
    at: float


def run_notebook_losing(
    task: str, steps: int, tmp_path: Path, digits_tfrecords: Path, monkeypatch: pytest.MonkeyPatch
) -> LostMidRun:
    """The notebook as the in-graph client of 1 PS x 2 workers started as pods would be; `task` killed
    once the run has a checkpoint at step 200 or later, and started again at its address 2 s later,
    as its Deployment's or Job's next pod would be."""
    from tfk8s_train.runner import client_env, trainer_command

    servers_log = (tmp_path / "servers.log").open("w")
    cluster = LocalCluster(
        spec=make_spec(1, 2, True),
        command=trainer_command("in-graph", "mlp", steps),  # PS and workers only serve
        log_dir=str(tmp_path / "log"),
        data_dir=str(digits_tfrecords),
        jobs=["ps", "worker"],
        output=servers_log,
    )
    checkpoints = cluster.run_log_dir / "checkpoints"
    fault: dict[str, float] = {}

    def lose_the_task() -> None:
        deadline = time.monotonic() + 240
        while latest_checkpoint_step(checkpoints) < 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        fault["checkpoint"] = latest_checkpoint_step(checkpoints)
        fault["at"] = time.time()
        cluster.signal_task(task, signal.SIGKILL)
        time.sleep(2)
        cluster.start_task(task)

    with cluster:
        for key, value in client_env(cluster).items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("TFK8S_STEPS", str(steps))
        monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
        killer = threading.Thread(target=lose_the_task, daemon=True)
        killer.start()
        notebook = nbformat.read(TRAINING_DIR / "master_client.ipynb", as_version=4)
        NotebookClient(
            notebook, timeout=480, kernel_name="python3", resources={"metadata": {"path": str(TRAINING_DIR)}}
        ).execute()  # raises CellExecutionError should a cell fail, DeadKernelError should the kernel exit
        killer.join(5)
        codes = cluster.wait(60)
    servers_log.close()
    assert 200 <= fault.get("checkpoint", -1) < steps, f"{task} was never lost mid-run: {fault}"
    return LostMidRun(cluster, codes, notebook, int(fault["checkpoint"]), fault["at"])


def test_notebook_whose_ps_is_lost_mid_run_keeps_its_kernel_and_resumes_from_the_checkpoint(
    tmp_path: Path, digits_tfrecords: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notebook as the in-graph client, its PS killed mid-run (every variable gone with it) and
    started again. The kernel is the user's: it must not exit (the chief's client does, for its
    launcher to start it again). The training cell waits for the PS, restores the newest checkpoint
    in the same kernel, and the notebook runs to its last cell: the run at its target and an
    uninterrupted run's accuracy, one recovery in the result, the servers retired by the done marker."""
    steps = 1000
    run = run_notebook_losing("ps-0", steps, tmp_path, digits_tfrecords, monkeypatch)
    text = "".join(out.get("text", "") for cell in run.notebook.cells for out in cell.get("outputs", []))
    assert "chief-0 lost a parameter server" in text and "waiting for every PS to answer" in text, text[-3000:]
    result = json.loads((run.cluster.run_log_dir / "results" / "chief-0.json").read_text())
    [recovery] = result["recoveries"]
    restored = int(recovery["checkpoint"].rsplit("-", 1)[1])
    assert restored >= run.checkpoint, (recovery, run.checkpoint)  # the newest checkpoint, not an older one
    assert recovery["resumed_at"] == restored == result["first_step"] > 0, (recovery, result)
    assert recovery["seen"] >= restored and recovery["lost_at"] >= run.at, (recovery, run.at)
    assert result["global_step"] >= steps and result["test_accuracy"] >= 0.90, result
    assert run.codes == {"ps-0": 0, "worker-0": 0, "worker-1": 0}, (tmp_path / "servers.log").read_text()[-3000:]
    waited, lost = recovery["ps_back_at"] - recovery["lost_at"], recovery["seen"] - restored
    print(
        f"\n[notebook] PS lost at checkpoint {run.checkpoint}; the kernel waited {waited:.1f} s for it, "
        f"restored step {restored}, lost {lost} steps, finished {result['finished_at'] - run.at:.1f} s after the fault"
    )


def test_notebook_whose_worker_is_lost_mid_run_goes_on_in_the_same_kernel_without_a_restart(
    tmp_path: Path, digits_tfrecords: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notebook as the in-graph client, worker-1 killed mid-run and started again. TensorFlow's
    coordinator runs the lost worker's steps on worker-0: nothing to restore, so the result counts no
    recovery and the run starts at step 0; the kernel lives, the run reaches its target with an
    uninterrupted run's accuracy, and every server (worker-1's second process too) retires on the
    done marker."""
    steps = 2000
    run = run_notebook_losing("worker-1", steps, tmp_path, digits_tfrecords, monkeypatch)
    assert run.cluster.tasks["worker-1"].starts == 2
    result = json.loads((run.cluster.run_log_dir / "results" / "chief-0.json").read_text())
    assert result["recoveries"] == [] and result["first_step"] == 0, result
    assert result["global_step"] >= steps and result["test_accuracy"] >= 0.90, result
    assert run.codes == {"ps-0": 0, "worker-0": 0, "worker-1": 0}, (tmp_path / "servers.log").read_text()[-3000:]
