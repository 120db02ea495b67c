"""Real clusters: 2 PS x 2 workers (plus a chief in-graph) of real TensorFlow processes on loopback.

Each test starts every task through the launcher with the same env contract as a pod, and
checks what a user would: accuracy on held-out digits, every process exiting 0 by itself, the
done markers, where the variables live, and the files a chief leaves behind.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from checkpoints import latest_checkpoint_step
from tfk8s_train.cluster import LocalCluster, make_spec
from tfk8s_train.launch import done_dir
from tfk8s_train.task_progress import read_progress

pytestmark = pytest.mark.training
TESTS_DIR = Path(__file__).resolve().parent
# How long a cluster may take to end by itself: a guard against a hang, never a speed check. The
# suite's load slows a run two to three times (a cold CI: 151 s for a run of about 60 s alone).
RUN_TIMEOUT = 480


def train_command(mode: str, *extra: str, steps: int = 300) -> list[str]:
    return [sys.executable, "-m", "tfk8s_train", "train", "--mode", mode, "--steps", str(steps), *extra]


def run_cluster(
    log_dir: Path,
    data_dir: Path,
    command: list[str],
    *,
    num_ps: int = 2,
    num_workers: int = 2,
    chief: bool = False,
    timeout: float = RUN_TIMEOUT,
    extra_env: dict[str, str] | None = None,
) -> tuple[LocalCluster, dict[str, int | None]]:
    cluster = LocalCluster(
        spec=make_spec(num_ps, num_workers, chief),
        command=command,
        log_dir=str(log_dir),
        data_dir=str(data_dir),
        extra_env=extra_env,
    )
    with cluster:
        codes = cluster.wait(timeout)
    return cluster, codes


def result(cluster: LocalCluster, task: str) -> dict[str, Any]:
    return json.loads((cluster.run_log_dir / "results" / f"{task}.json").read_text())


def assert_clean_finish(cluster: LocalCluster, codes: dict[str, int | None], clients: list[str]) -> None:
    """Every process exited 0, every client left a done marker, every server retired itself."""
    assert codes == dict.fromkeys(cluster.tasks, 0), codes
    markers = {p.name for p in done_dir(cluster.run_log_dir).iterdir()}
    assert set(clients) <= markers
    for name, task in cluster.tasks.items():
        if name not in clients:  # a server: stopped by its own launcher, not by the runner
            assert any("are done; retiring" in line for line in task.lines), f"{name} did not retire itself"


def assert_on_ps(devices: dict[str, str], num_ps: int) -> None:
    used = {re.search(r"/job:ps/(?:replica:0/)?task:(\d+)", d)[1] for d in devices.values()}  # type: ignore[index]
    assert used == {str(i) for i in range(num_ps)}, devices


@pytest.fixture(scope="module")
def async_run(tmp_path_factory: pytest.TempPathFactory, digits_tfrecords: Path) -> tuple[LocalCluster, dict]:
    log_dir = tmp_path_factory.mktemp("async-log")
    return run_cluster(log_dir, digits_tfrecords, train_command("between-graph"))


def test_between_graph_async_trains_to_90_percent_and_everyone_exits(async_run: tuple[LocalCluster, dict]) -> None:
    cluster, codes = async_run
    assert_clean_finish(cluster, codes, clients=["worker-0", "worker-1"])
    chief, other = result(cluster, "worker-0"), result(cluster, "worker-1")
    assert chief["test_accuracy"] >= 0.90
    assert chief["data"].startswith("tfrecords")
    assert min(chief["global_step"], other["global_step"]) >= 300
    assert chief["local_steps"] > 0 and other["local_steps"] > 0  # async: both trained, neither waited
    assert chief["local_steps"] + other["local_steps"] >= 300
    assert_on_ps(chief["variable_devices"], num_ps=2)
    assert (cluster.run_log_dir / "checkpoints" / "checkpoint").is_file()


def test_each_launcher_kept_its_tasks_progress_and_output_beside_the_run(async_run: tuple[LocalCluster, dict]) -> None:
    cluster, _ = async_run
    progress = {t: read_progress(str(cluster.run_log_dir / ".tfk8s" / "progress" / f"{t}.json")) for t in cluster.tasks}
    for worker in ("worker-0", "worker-1"):
        report = progress[worker]
        assert (report["state"], report["exit_code"], report["source"]) == ("succeeded", 0, "trainer"), report
        # The trainer's last report is the step it stopped at, not the last multiple of its interval.
        assert report["step"] >= report["target_steps"] == 300, report
        phases = report["phases"]
        started, imported, formed = (phases[f"{p}_at"] for p in ("child_started", "tensorflow_imported", "cluster_ready"))
        assert started < imported < formed <= report["first_step_at"], report
        assert report["last_checkpoint"] and report["last_checkpoint"]["step"] >= 300, report
    placed = progress["worker-0"]["placement"]
    assert set(placed) == {"ps-0", "ps-1"} and sum(placed.values()) == len(result(cluster, "worker-0")["variable_devices"])
    for ps in ("ps-0", "ps-1"):
        assert progress[ps]["state"] == "retired", progress[ps]
        log = (cluster.run_log_dir / "logs" / f"{ps}.log").read_text()
        assert "are done; retiring" in log, log[-2000:]


def test_exported_saved_model_classifies_held_out_digits(async_run: tuple[LocalCluster, dict], digits_tfrecords: Path) -> None:
    import numpy as np
    import tensorflow as tf
    from tfk8s_train.pipeline import load_training_data

    cluster, _ = async_run
    data = load_training_data(str(digits_tfrecords))
    serve = tf.saved_model.load(str(cluster.run_log_dir / "saved_model")).signatures["serving_default"]
    classes = serve(tf.constant(data.x_test[..., 0]))["classes"].numpy()
    assert np.mean(classes == data.y_test) >= 0.90


def test_between_graph_sync_trains_to_90_percent(tmp_path: Path, digits_tfrecords: Path) -> None:
    cluster, codes = run_cluster(tmp_path, digits_tfrecords, train_command("between-graph", "--sync"))
    assert_clean_finish(cluster, codes, clients=["worker-0", "worker-1"])
    chief, other = result(cluster, "worker-0"), result(cluster, "worker-1")
    assert chief["sync"] and chief["test_accuracy"] >= 0.90
    # Sync never overshoots: one update per aggregated step, every worker stops at the same step.
    assert chief["global_step"] == other["global_step"] == 300


def test_in_graph_sync_averages_one_gradient_per_worker_into_each_update(tmp_path: Path, digits_tfrecords: Path) -> None:
    cluster, codes = run_cluster(tmp_path, digits_tfrecords, train_command("in-graph", "--sync"), chief=True)
    assert_clean_finish(cluster, codes, clients=["chief-0"])
    chief = result(cluster, "chief-0")
    assert chief["mode"] == "in-graph" and chief["sync"]
    assert chief["first_step"] == 0 and chief["global_step"] == 300  # one update per synchronous step
    assert chief["test_accuracy"] >= 0.90
    assert_on_ps(chief["variable_devices"], num_ps=2)


def test_in_graph_cnn_trains_to_90_percent_from_the_chief(tmp_path: Path, digits_tfrecords: Path) -> None:
    command = train_command("in-graph", "--model", "cnn", "--checkpoint-steps", "100")
    cluster, codes = run_cluster(tmp_path, digits_tfrecords, command, chief=True)
    assert_clean_finish(cluster, codes, clients=["chief-0"])
    chief = result(cluster, "chief-0")
    assert chief["mode"] == "in-graph" and chief["global_step"] == 300
    assert chief["test_accuracy"] >= 0.90
    assert_on_ps(chief["variable_devices"], num_ps=2)
    assert (cluster.run_log_dir / "saved_model" / "saved_model.pb").is_file()
    for name in ("ps-0", "ps-1", "worker-0", "worker-1"):  # pure servers: no client code ran there
        assert not (cluster.run_log_dir / "results" / f"{name}.json").exists()


def test_unmodified_classic_flag_script_runs_under_the_runner(tmp_path: Path, training_env: dict[str, str]) -> None:
    script = TESTS_DIR / "fixtures" / "mnist_replica.py"
    runner = subprocess.run(
        [
            sys.executable,
            "-m",
            "tfk8s_train.runner",
            "--ps",
            "1",
            "--workers",
            "2",
            "--data-dir",
            str(tmp_path / "data"),
            "--log-dir",
            str(tmp_path / "log"),
            "--timeout",
            "120",
            "--",
            sys.executable,
            str(script),
            "--train_steps",
            "200",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=training_env,
    )
    out = runner.stdout
    assert runner.returncode == 0, out[-4000:]
    for worker in (0, 1):
        assert re.search(rf"^\[worker-{worker}\] Worker {worker}: training done .* test accuracy", out, re.M), out[-3000:]
    assert "[ps-0] tfk8s-launch: ps-0: all of ['worker-0', 'worker-1'] are done; retiring" in out
    assert "all tasks finished" in out
    # The launcher learnt the script's target from its own flag, and kept its output.
    (run,) = (tmp_path / "log").glob("run-*")
    report = read_progress(str(run / ".tfk8s" / "progress" / "worker-0.json"))
    assert (report["target_steps"], report["state"]) == (200, "succeeded"), report
    assert "Worker 0: training done" in (run / "logs" / "worker-0.log").read_text()


def test_the_same_run_twice_on_the_same_log_dir_trains_twice(
    tmp_path: Path, digits_tfrecords: Path, training_env: dict[str, str]
) -> None:
    """An experiment destroyed and brought up again (or a Job re-created after its TTL clean-up)
    runs the same settings on the same log volume: the second run's PS must serve and its workers
    train from step 0, not find the first run's done markers or its final checkpoint."""
    argv = [sys.executable, "-m", "tfk8s_train.runner", "--ps", "1", "--workers", "2", "--mode", "between-graph"]
    argv += ["--steps", "100", "--data-dir", str(digits_tfrecords), "--log-dir", str(tmp_path), "--timeout", "120"]
    outputs = []
    for _ in range(2):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=training_env)
        assert done.returncode == 0, done.stdout[-4000:]
        assert "already done" not in done.stdout
        assert "ps-0: all of ['worker-0', 'worker-1'] are done; retiring" in done.stdout
        outputs.append(done.stdout)
    runs = sorted(p for p in tmp_path.iterdir() if p.name.startswith("run-"))
    assert len(runs) == 2, runs
    for run in runs:  # each trained on its own: its own checkpoint, events, results and markers
        results = [json.loads((run / "results" / f"worker-{i}.json").read_text()) for i in (0, 1)]
        # Asynchronous workers: whichever trains first reads step 0 (the chief may start a few steps
        # late), so a fresh run has a 0 among its first steps; a resumed one would start at >= 100.
        assert min(r["first_step"] for r in results) == 0, [r["first_step"] for r in results]
        assert max(r["global_step"] for r in results) >= 100
        assert (run / "tensorboard" / "worker-0").is_dir()  # TensorBoard shows two runs, not one merged stream
        assert {p.name for p in done_dir(run).iterdir()} == {"worker-0", "worker-1"}


def checkpointed_mid_run(cluster: LocalCluster, step: int, timeout: float = 240) -> int:
    """Wait, with every task still running, until a checkpoint at `step` or later exists; its step."""
    checkpoints = cluster.run_log_dir / "checkpoints"
    deadline = time.monotonic() + timeout
    while latest_checkpoint_step(checkpoints) < step:
        assert time.monotonic() < deadline, f"no checkpoint at step {step} within {timeout:.0f} s"
        assert all(code is None for code in cluster.returncodes().values()), cluster.returncodes()
        time.sleep(0.1)
    return latest_checkpoint_step(checkpoints)


def chief_step_reached(cluster: LocalCluster, step: int, timeout: float = 240) -> int:
    """Wait until the chief's progress lines pass `step`, with the chief still running; its step."""
    deadline = time.monotonic() + timeout
    while True:
        lines = list(cluster.tasks["chief-0"].lines)
        reached = [int(m[1]) for line in lines if (m := re.search(r"tfk8s-progress task=chief-0 step=(\d+)", line))]
        if reached and reached[-1] >= step:
            return reached[-1]
        assert time.monotonic() < deadline, f"the chief did not pass step {step} within {timeout:.0f} s"
        assert cluster.returncodes()["chief-0"] is None, cluster.returncodes()
        time.sleep(0.1)


def wait_for_lines(cluster: LocalCluster, task: str, text: str, count: int, timeout: float = 240) -> None:
    """Wait until `count` of the task's output lines contain `text`."""
    deadline = time.monotonic() + timeout
    while sum(text in line for line in list(cluster.tasks[task].lines)) < count:
        assert time.monotonic() < deadline, f"{task} did not print {text!r} {count} times within {timeout:.0f} s"
        time.sleep(0.1)


def _kept_checkpoint_steps(checkpoint_dir: Path) -> list[int]:
    state = (checkpoint_dir / "checkpoint").read_text()
    return sorted({int(m) for m in re.findall(r'^all_model_checkpoint_paths: ".*-(\d+)"', state, re.M)})


@pytest.mark.parametrize("mode", ["between-graph", "in-graph"])
def test_the_chief_checkpoints_by_time_when_steps_are_far_apart(tmp_path: Path, digits_tfrecords: Path, mode: str) -> None:
    """--checkpoint-seconds bounds the training a lost task costs whatever a step costs: with a step
    count no run reaches, only the clock can save a checkpoint between the first and the last."""
    steps = 600  # 20 s or more of training: checkpoints every second
    command = train_command(mode, "--checkpoint-steps", "1000000", "--checkpoint-seconds", "1", "--log-every", "25", steps=steps)
    cluster, codes = run_cluster(tmp_path, digits_tfrecords, command, num_ps=1, num_workers=1, chief=mode == "in-graph")
    client = "chief-0" if mode == "in-graph" else "worker-0"
    assert_clean_finish(cluster, codes, clients=[client])
    kept = _kept_checkpoint_steps(cluster.run_log_dir / "checkpoints")
    assert kept[-1] == steps, kept  # the last one, at the end
    between = [step for step in kept if 0 < step < steps]
    assert between, f"no checkpoint between the first and the last: {kept}"


@pytest.mark.parametrize("mode", ["between-graph", "in-graph"])
def test_a_new_run_of_an_interrupted_training_continues_from_its_checkpoint(
    tmp_path: Path, digits_tfrecords: Path, mode: str
) -> None:
    """What an upgrade of tfk8s does to a run in progress: its Job is replaced, a new run (a new
    uid) of the same lineage (TFK8S_LINEAGE, the same settings and code). The first run is stopped
    mid-run, every task at once; the second's chief restores the first's newest checkpoint and
    trains from there to the target."""
    steps = 800
    command = train_command(mode, "--checkpoint-steps", "100", "--log-every", "50", steps=steps)
    lineage, chief = {"TFK8S_LINEAGE": "a1b2c3d4e5f6"}, mode == "in-graph"
    client = "chief-0" if chief else "worker-0"
    first = LocalCluster(
        spec=make_spec(1, 1, chief), command=command, log_dir=str(tmp_path), data_dir=str(digits_tfrecords), extra_env=lineage
    )
    with first:
        saved = checkpointed_mid_run(first, 200)
    second, codes = run_cluster(tmp_path, digits_tfrecords, command, num_ps=1, num_workers=1, chief=chief, extra_env=lineage)
    assert_clean_finish(second, codes, clients=[client])
    assert second.run_uid != first.run_uid and not done_dir(first.run_log_dir).exists()
    said = [line for line in second.tasks[client].lines if "continues run-" in line]
    assert said and f"continues run-{first.run_uid}" in said[0], said
    continued = result(second, client)
    assert saved <= continued["first_step"] < steps <= continued["global_step"], continued
    assert continued["test_accuracy"] >= 0.90


def test_killed_ps_restarts_and_training_resumes_from_the_checkpoint(tmp_path: Path, digits_tfrecords: Path) -> None:
    steps, every = 2000, 100
    command = train_command("between-graph", "--checkpoint-steps", str(every), "--log-every", "50", steps=steps)
    cluster = LocalCluster(spec=make_spec(1, 2, False), command=command, log_dir=str(tmp_path), data_dir=str(digits_tfrecords))
    with cluster:
        saved_before_kill = checkpointed_mid_run(cluster, 2 * every)
        cluster.signal_task("ps-0", signal.SIGKILL)  # the PS and all variables on it are gone
        cluster.start_task("ps-0")  # as Kubernetes would restart it, at the same address
        codes = cluster.wait(RUN_TIMEOUT)
    assert_clean_finish(cluster, codes, clients=["worker-0", "worker-1"])
    chief = result(cluster, "worker-0")
    assert chief["global_step"] >= steps and chief["test_accuracy"] >= 0.90
    assert chief["recoveries"], "the chief's session was never recreated: the PS kill went unnoticed"
    recovery = chief["recoveries"][0]
    restored_step = int(recovery["checkpoint"].rsplit("-", 1)[1])
    assert restored_step >= saved_before_kill  # restored the newest checkpoint, not an older one
    assert recovery["resumed_at"] >= restored_step  # the global step never went back past it
    assert result(cluster, "worker-1")["recoveries"], "worker-1 did not survive the PS restart"


@pytest.mark.parametrize("training", ["async", "sync"])
def test_an_in_graph_chief_that_loses_its_ps_starts_again_from_the_checkpoint(
    tmp_path: Path, digits_tfrecords: Path, training: str
) -> None:
    """In-graph from a chief (ParameterServerStrategy, ClusterCoordinator): the PS killed mid-run
    and started again at its address, as its Deployment does. TensorFlow's coordinator cannot go on
    without it: the chief says so and exits with PS_LOST_EXIT, and its launcher starts it again at
    once, itself still running (the same pod: no Job backoff, no retry spent). The new chief
    restores the newest checkpoint (not step 0) and reaches the target at an uninterrupted run's
    accuracy, the workers serving throughout."""
    from tfk8s.specs.run_policy import RESTART_EXIT_CODE
    from tfk8s_train.in_graph import PS_LOST_EXIT
    from tfk8s_train.launch import RESTART_EXIT_CODE as STARTS_AGAIN_IN_PLACE

    assert PS_LOST_EXIT == STARTS_AGAIN_IN_PLACE == RESTART_EXIT_CODE  # what its launcher and its Job make of it
    steps, every = 1200, 100
    flags = ["--checkpoint-steps", str(every), "--log-every", "20", *(["--sync"] if training == "sync" else [])]
    command = train_command("in-graph", *flags, steps=steps)
    cluster = LocalCluster(spec=make_spec(1, 2, True), command=command, log_dir=str(tmp_path), data_dir=str(digits_tfrecords))
    with cluster:
        saved = checkpointed_mid_run(cluster, 2 * every)
        cluster.signal_task("ps-0", signal.SIGKILL)  # every variable is gone with it
        cluster.start_task("ps-0")
        codes = cluster.wait(RUN_TIMEOUT)
    assert_clean_finish(cluster, codes, clients=["chief-0"])
    # One launcher per task: the chief's started its trainer twice.
    assert cluster.tasks["chief-0"].starts == 1 and cluster.tasks["worker-0"].starts == 1
    lines = list(cluster.tasks["chief-0"].lines)
    said = [line for line in lines if "lost a parameter server" in line]
    assert said and f"exiting with {PS_LOST_EXIT}" in said[0], lines[-20:]
    assert any("starting it again in this pod" in line for line in lines), lines[-20:]
    chief = result(cluster, "chief-0")
    assert saved <= chief["first_step"] < steps <= chief["global_step"], chief  # resumed, not from step 0
    assert chief["test_accuracy"] >= 0.90, chief


def test_an_in_graph_cluster_that_loses_a_worker_goes_on_with_the_same_chief(tmp_path: Path, digits_tfrecords: Path) -> None:
    """In-graph from a chief, 1 PS x 2 workers: worker-1 killed mid-run and started again at its
    address, as its Job does. TensorFlow's coordinator runs the lost worker's steps on the other one
    and takes it back once it serves again: the chief never restarts, and the run reaches its target.

    The chief is held (SIGSTOP) while worker-1's next process imports TensorFlow: otherwise, under
    the suite's load, the run can reach its target before worker-1 serves again (CI, 2026-12-01)."""
    steps, every = 1200, 100
    command = train_command("in-graph", "--checkpoint-steps", str(every), "--log-every", "20", steps=steps)
    cluster = LocalCluster(spec=make_spec(1, 2, True), command=command, log_dir=str(tmp_path), data_dir=str(digits_tfrecords))
    with cluster:
        killed_at = checkpointed_mid_run(cluster, 2 * every)
        cluster.signal_task("worker-1", signal.SIGKILL)
        assert chief_step_reached(cluster, killed_at + 100) < steps  # trained on without worker-1
        cluster.signal_task("chief-0", signal.SIGSTOP)
        try:
            cluster.start_task("worker-1")  # its Job's next pod, at the same address
            wait_for_lines(cluster, "worker-1", "serving at", 2)
        finally:
            cluster.signal_task("chief-0", signal.SIGCONT)
        codes = cluster.wait(RUN_TIMEOUT)
    assert_clean_finish(cluster, codes, clients=["chief-0"])
    assert (cluster.tasks["chief-0"].starts, cluster.tasks["worker-1"].starts) == (1, 2)
    assert sum("serving at" in line for line in cluster.tasks["worker-1"].lines) == 2  # it served again
    chief = result(cluster, "chief-0")
    assert chief["first_step"] == 0 and chief["global_step"] >= steps and chief["test_accuracy"] >= 0.90, chief


def written_scalars(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    """(step, value) of one tag as written to a run's event files, read without TensorBoard."""
    import tensorflow as tf

    points = []
    for events in sorted(run_dir.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(events)):
            points += [(event.step, value.simple_value) for value in event.summary.value if value.tag == tag]
    return sorted(points)


def test_tensorboard_serves_every_workers_scalars(async_run: tuple[LocalCluster, dict]) -> None:
    """Start a real TensorBoard on the run's log dir and ask its HTTP API what it can read."""
    import urllib.request

    from tfk8s_train.cluster import free_ports

    cluster, _ = async_run
    [port] = free_ports(1)
    board = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tensorboard.main",
            "--logdir",
            str(cluster.run_log_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--reload_interval",
            "1",
            "--load_fast",
            "false",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/data/plugin/scalars"
    wanted = {"loss", "accuracy", "examples_per_sec"}
    tags: dict[str, dict[str, Any]] = {}
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{base}/tags", timeout=5) as response:
                    tags = json.load(response)
            except OSError:
                tags = {}  # not listening yet
            if all(wanted <= set(tags.get(f"tensorboard/worker-{i}", {})) for i in (0, 1)):
                break
            time.sleep(0.5)
        assert {f"tensorboard/worker-{i}" for i in (0, 1)} <= set(tags), tags
        for run in ("tensorboard/worker-0", "tensorboard/worker-1"):
            assert wanted <= set(tags[run]), tags[run]
        # Per-batch loss under async updates is noisy, so "it went down" would be a coin toss here;
        # learning is asserted by the accuracy tests. This one asserts TensorBoard serves exactly
        # what each worker wrote: the same (step, value) series as its event files on disk. A worker
        # writes a point at its first local step, every log_every and its last: one that got its first
        # step in only as the other ended the run writes one point (the chief at step 301 of 300, CI
        # on 2026-12-02), so the longer of the two series must have several.
        lengths = []
        for worker in ("worker-0", "worker-1"):
            with urllib.request.urlopen(f"{base}/scalars?run=tensorboard/{worker}&tag=loss", timeout=5) as response:
                points = json.load(response)  # [[wall_time, step, value], ...]
            written = written_scalars(cluster.run_log_dir / "tensorboard" / worker, "loss")
            served = [(step, value) for _, step, value in points]
            assert served and [step for step, _ in served] == [step for step, _ in written], (worker, served, written)
            assert [value for _, value in served] == pytest.approx([value for _, value in written])
            assert [step for step, _ in served] == sorted({step for step, _ in served}), "steps repeat or go back"
            lengths.append(len(served))
        assert max(lengths) >= 2, lengths
    finally:
        board.terminate()
        board.wait(10)


def _alive(cluster: LocalCluster) -> list[str]:
    """Tasks whose process group still has a live process (a launcher or its TF child)."""
    import os

    alive = []
    for name, task in cluster.tasks.items():
        if task.process is None:
            continue
        try:
            os.killpg(task.process.pid, 0)
            alive.append(name)
        except ProcessLookupError:
            pass
    return alive


def test_killed_worker_is_retried_and_the_run_ends_as_an_uninterrupted_one(tmp_path: Path, digits_tfrecords: Path) -> None:
    """SIGKILL a worker mid-run and start it again at the same address, as the Indexed Job retries an
    index: training completes, the global step stops at its target once (the retried worker resumes
    from the PS's step, it does not train the run again), accuracy matches an uninterrupted run
    within 2 points, and no process is left."""
    steps, every = 1500, 100
    command = train_command("between-graph", "--checkpoint-steps", str(every), "--log-every", "50", steps=steps)
    baseline, codes = run_cluster(tmp_path / "baseline", digits_tfrecords, command, num_ps=1, num_workers=2)
    assert codes == dict.fromkeys(baseline.tasks, 0), codes
    expected = result(baseline, "worker-0")["test_accuracy"]

    log_dir = tmp_path / "killed"
    cluster = LocalCluster(spec=make_spec(1, 2, False), command=command, log_dir=str(log_dir), data_dir=str(digits_tfrecords))
    with cluster:
        killed_at = checkpointed_mid_run(cluster, 3 * every)
        cluster.signal_task("worker-1", signal.SIGKILL)  # the worker and its launcher die at once
        cluster.start_task("worker-1")  # the Job's retry of index 1: same pod name, same address
        codes = cluster.wait(RUN_TIMEOUT)
    assert_clean_finish(cluster, codes, clients=["worker-0", "worker-1"])
    assert cluster.tasks["worker-1"].starts == 2
    chief, retried = result(cluster, "worker-0"), result(cluster, "worker-1")
    assert retried["first_step"] >= killed_at > 0  # resumed at the shared global step, not from 0
    for finished in (chief, retried):
        assert steps <= finished["global_step"] < steps + 2, finished["global_step"]  # the target, reached once
    # 360 test images: async updates alone move accuracy by a point or so between runs (0.964 vs 0.975
    # seen in CI); a model reset or lost by the kill would fall far further.
    assert abs(chief["test_accuracy"] - expected) <= 0.02, (chief["test_accuracy"], expected)
    assert not _alive(cluster) and not _alive(baseline)
