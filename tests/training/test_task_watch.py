"""What a task's launcher keeps and serves of its child: the output on the log volume (rotated,
bounded), the progress file (from the trainer's lines, or an unmodified script's TensorBoard
events), and Prometheus metrics while it runs.

The launcher is the real file, run by the oldest Python the pods have and by this one; the
children are tiny programs (one writes real event files with TensorFlow).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_launch import SPEC, _launch
from tfk8s_train import launch
from tfk8s_train.task_progress import progress_dir

RUN = "run"


def run_dir(tmp_path: Path) -> Path:
    return Path(launch.run_log_dir(tmp_path, RUN))


def progress(tmp_path: Path, task: str) -> dict[str, Any]:
    return json.loads((Path(progress_dir(str(run_dir(tmp_path)))) / f"{task}.json").read_text())


def trainer_lines(steps: int, *, every: float = 0.1, code: int = 0, target: int = 40, first: int = 10) -> str:
    """A child that reports like the built-in trainer, `steps` reports apart by `every` seconds, at
    global steps `first`, `first` + 10, ..., each line timed by the child's own clock."""
    return textwrap.dedent(f"""
        import sys, time
        print(f"tfk8s-phase tensorflow_imported at={{time.time():.3f}}", flush=True)
        print(f"tfk8s-phase cluster_ready at={{time.time():.3f}}", flush=True)
        print("tfk8s-placement ps-0=3 ps-1=2", flush=True)
        for i in range(1, {steps} + 1):
            time.sleep({every})
            fields = f"step={{{first} + (i - 1) * 10}} loss={{1 / i:.4f}} accuracy=0.5 examples_per_sec=640.0 target={target}"
            fields += f" at={{time.time():.3f}}"
            print("tfk8s-progress task=worker-0 " + fields, flush=True)
        sys.exit({code})
    """)


def test_the_output_is_kept_on_the_log_volume_rotated_and_bounded(tmp_path: Path, launcher_python: str) -> None:
    chatty = "import sys\nfor i in range(3000): print(f'line {i:05d} ' + 'x' * 90)\nprint('the end', file=sys.stderr)"
    worker = _launch(tmp_path, "worker", 0, chatty, python=launcher_python, TFK8S_LOG_MAX_BYTES="60000", TFK8S_LOG_BACKUPS="2")
    out, _ = worker.communicate(timeout=60)
    assert worker.returncode == 0
    assert "line 02999" in out and "the end" in out  # the container's log still gets every line
    logs = run_dir(tmp_path) / "logs"
    assert sorted(p.name for p in logs.iterdir()) == ["worker-0.log", "worker-0.log.1", "worker-0.log.2"]
    assert all(p.stat().st_size <= 60000 for p in logs.iterdir())
    current = (logs / "worker-0.log").read_text()
    # stdout and stderr in one stream, then the launcher's own last word.
    assert "the end" in current and "tfk8s-launch: worker-0: finished" in current
    kept = "".join((logs / name).read_text() for name in ("worker-0.log.2", "worker-0.log.1", "worker-0.log"))
    numbers = [int(line.split()[1]) for line in kept.splitlines() if line.startswith("line ")]
    assert numbers == list(range(numbers[0], 3000)), "the kept lines are the newest, in order, none lost between files"
    assert numbers[0] > 0, "older lines went: the task's log is bounded"


def test_the_progress_file_follows_the_trainer_and_ends_with_the_exit(tmp_path: Path, launcher_python: str) -> None:
    started = time.time()
    worker = _launch(tmp_path, "worker", 0, trainer_lines(6, code=3), python=launcher_python, TFK8S_PROGRESS_SECONDS="0.2")
    assert worker.wait(60) == 3
    report = progress(tmp_path, "worker-0")
    assert (report["state"], report["exit_code"], report["source"]) == ("failed", 3, "trainer")
    assert (report["step"], report["target_steps"], report["loss"]) == (60, 40, pytest.approx(1 / 6, abs=1e-3))
    assert report["examples_per_second"] == 640.0
    # 10 steps every ~0.1 s of the child's clock, over a window that holds them all: about 100 steps/s.
    assert 30 < report["steps_per_second"] < 110, report
    assert started < report["phases"]["child_started_at"] <= report["phases"]["tensorflow_imported_at"]
    assert report["phases"]["cluster_ready_at"] <= report["first_step_at"] < report["updated_at"]
    assert report["placement"] == {"ps-0": 3, "ps-1": 2}
    assert (report["task"], report["run"], report["starts"]) == ("worker-0", RUN, 1)


def test_a_restarted_task_counts_its_starts_and_keeps_the_runs_first_step(tmp_path: Path, launcher_python: str) -> None:
    assert _launch(tmp_path, "worker", 0, trainer_lines(2, code=1), python=launcher_python).wait(60) == 1
    first = progress(tmp_path, "worker-0")
    assert first["last_resume"] is None  # a first start resumes nothing
    # The second start trains again from step 15 (a chief's restored checkpoint) after step 20.
    assert _launch(tmp_path, "worker", 0, trainer_lines(2, first=15), python=launcher_python).wait(60) == 0
    second = progress(tmp_path, "worker-0")
    assert (second["starts"], second["state"], second["exit_code"]) == (2, "succeeded", 0)
    assert second["first_step_at"] == first["first_step_at"]
    resume = second["last_resume"]
    assert (resume["after_step"], resume["at_step"], resume["steps_lost"]) == (20, 15, 5), resume
    assert 0 < resume["seconds"] < 60, resume  # from the first start's last write to the second's first step
    log = (run_dir(tmp_path) / "logs" / "worker-0.log").read_text()
    assert "=== tfk8s-launch: worker-0 start 1 at" in log and "=== tfk8s-launch: worker-0 start 2 at" in log


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            return response.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return None


def samples(text: str) -> dict[str, tuple[dict[str, str], float]]:
    """Parsed by Prometheus' own Python client: the exposition must be valid text format."""
    return {s.name: (s.labels, s.value) for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_are_served_while_the_task_runs_labelled_by_whose_task_it_is(tmp_path: Path, launcher_python: str) -> None:
    port = free_port()
    gate = tmp_path / "go"
    code = trainer_lines(3, target=90) + f"\nimport os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.05)\n"
    code = code.replace("sys.exit(0)", "")
    worker = _launch(
        tmp_path,
        "worker",
        0,
        code,
        python=launcher_python,
        TFK8S_METRICS_PORT=str(port),
        TFK8S_TENANT="alice",
        TFK8S_EXPERIMENT="mnist-exp",
        TFK8S_CLUSTER="mnist",
    )
    url = f"http://127.0.0.1:{port}/metrics"
    deadline = time.monotonic() + 30
    while True:
        text = scrape(url)
        if text and "tfk8s_global_step" in text and 'tfk8s_global_step{tenant="alice"' in text and "} 30.0" in text:
            break
        assert time.monotonic() < deadline, text
        time.sleep(0.1)
    found = samples(text)
    labels = {"tenant": "alice", "experiment": "mnist-exp", "cluster": "mnist", "role": "worker", "index": "0"}
    assert found["tfk8s_global_step"] == (labels, 30.0)
    assert found["tfk8s_target_steps"] == (labels, 90.0)
    assert found["tfk8s_task_up"] == (labels, 1.0)
    assert found["tfk8s_task_info"] == ({**labels, "run": RUN}, 1.0)
    assert found["tfk8s_task_starts_total"][1] == 1.0
    assert found["tfk8s_first_step_seconds"][1] > 0
    assert found["tfk8s_task_memory_bytes"][1] > 1_000_000  # the child's resident memory
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
    assert missing.value.code == 404
    gate.touch()
    assert worker.wait(30) == 0
    assert scrape(url) is None, "the endpoint goes with the task"


def test_a_retired_ps_says_so_and_serves_how_many_variables_it_holds(tmp_path: Path, launcher_python: str) -> None:
    port = free_port()
    ps = _launch(
        tmp_path, "ps", 1, "import time\nwhile True: time.sleep(0.05)", python=launcher_python, TFK8S_METRICS_PORT=str(port)
    )
    assert _launch(tmp_path, "worker", 0, trainer_lines(1), python=launcher_python).wait(60) == 0
    text = None
    deadline = time.monotonic() + 30
    while not (text and "tfk8s_ps_variables" in text):
        assert time.monotonic() < deadline, text
        text = scrape(f"http://127.0.0.1:{port}/metrics")
        time.sleep(0.1)
    assert samples(text)["tfk8s_ps_variables"][1] == 2.0  # worker-0's placement: ps-1=2
    assert _launch(tmp_path, "worker", 1, "pass", spec=SPEC, python=launcher_python).wait(30) == 0
    assert ps.wait(30) == 0
    report = progress(tmp_path, "ps-1")
    assert (report["state"], report["exit_code"], report["step"]) == ("retired", 0, None)


EVENT_WRITER = """
import sys, time
import tensorflow as tf
log_dir = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--log_path=")][0]
with tf.Graph().as_default():  # the seed era's graph-mode writer: Summary protos, simple_value
    writer = tf.compat.v1.summary.FileWriter(log_dir + "/train")
    for step in (10, 20, 30):
        summary = tf.compat.v1.Summary(value=[tf.compat.v1.Summary.Value(tag="loss", simple_value=3.0 / step)])
        writer.add_summary(summary, step)
        writer.flush()
        time.sleep(0.3)
    writer.close()
with tf.summary.create_file_writer(log_dir + "/eval").as_default():
    tf.summary.scalar("accuracy", 0.75, step=35)
"""


@pytest.mark.training
def test_an_unmodified_scripts_progress_comes_from_its_tensorboard_events(tmp_path: Path) -> None:
    worker = _launch(
        tmp_path,
        "worker",
        0,
        EVENT_WRITER,
        TFK8S_CLASSIC_FLAGS="true",
        TFK8S_PROGRESS_SECONDS="0.2",
    )
    out, _ = worker.communicate(timeout=120)
    assert worker.returncode == 0, out
    report = progress(tmp_path, "worker-0")
    assert report["source"] == "events", report
    assert report["step"] == 35  # the largest step of any event file, TF2 tensors included
    assert report["loss"] == pytest.approx(0.1)
    assert report["first_step_at"] is not None and report["first_step_at"] <= report["updated_at"]


def test_the_target_comes_from_the_scripts_own_flags(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "print('hi')", "--train_steps", "200"]
    done = subprocess.run(
        [sys.executable, str(Path(launch.__file__)), "--", *command],
        env={
            **os.environ,
            "TFK8S_CLUSTER_SPEC": json.dumps(SPEC),
            "TFK8S_JOB_NAME": "worker",
            "TFK8S_TASK_INDEX": "0",
            "TFK8S_RUN_UID": RUN,
            "TFK8S_LOG_DIR": str(tmp_path),
            "TFK8S_CLASSIC_FLAGS": "false",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert progress(tmp_path, "worker-0")["target_steps"] == 200


@pytest.mark.training
@pytest.mark.parametrize("started", [30, -30], ids=["events-before-the-start", "events-since-the-start"])
def test_a_restart_resumes_at_its_own_first_step_after_its_last_report(tmp_path: Path, started: float) -> None:
    """The run's event files are read first: older ones (the starts before) never count, and newer
    ones (another task's) do not either for a task that reported through the trainer's lines. The
    previous start's last report counts, not its highest step: a chief's restore sent the global
    step back after it."""
    import tensorflow as tf
    from tfk8s_train.task_progress import Tracker, progress_dir

    run = tmp_path / "run"
    with tf.summary.create_file_writer(str(run / "tensorboard" / "worker-0")).as_default():
        for step in range(1, 4):
            tf.summary.scalar("loss", 1.0 / step, step=step)
    start = time.time() + started
    earlier = Path(progress_dir(str(run))) / "worker-0.json"
    earlier.parent.mkdir(parents=True)
    earlier.write_text(json.dumps({"starts": 1, "step": 2407, "last_step": 357, "source": "trainer", "updated_at": start - 30}))
    tracker = Tracker(task="worker-0", run=RUN, run_dir=str(run), target=None, read_events=True, clock=lambda: start)
    tracker.poll()
    # What a start that dies now leaves for the next one's "after": its own steps only, else the last start's.
    assert tracker.snapshot()["last_step"] == (357 if started > 0 else 3)
    tracker.on_line("tfk8s-progress task=worker-0 step=305 loss=0.1 accuracy=0.9 examples_per_sec=10.0 target=4000")
    tracker.on_line("tfk8s-progress task=worker-0 step=311 loss=0.1 accuracy=0.9 examples_per_sec=10.0 target=4000")
    resume = tracker.snapshot()["last_resume"]
    assert (resume["after_step"], resume["at_step"], resume["steps_lost"]) == (357, 305, 52), resume
    assert resume["seconds"] == pytest.approx(30), resume
    assert tracker.snapshot()["last_step"] == 311


@pytest.mark.training
def test_a_workers_first_step_is_its_own_line_not_another_workers_event(tmp_path: Path) -> None:
    """The run's event files hold every task's: worker-0 steps (and writes events) while worker-1
    still forms its cluster. Worker-1's first step is its own first trainer line (CI, 2026-11-30:
    first_step_at came before its cluster_ready)."""
    import tensorflow as tf
    from tfk8s_train.task_progress import Tracker

    run = tmp_path / "run"
    now = [time.time()]
    tracker = Tracker(task="worker-1", run=RUN, run_dir=str(run), target=None, read_events=True, clock=lambda: now[0])
    with tf.summary.create_file_writer(str(run / "tensorboard" / "worker-0")).as_default():
        for step in range(1, 4):
            tf.summary.scalar("loss", 1.0 / step, step=step)
    now[0] += 5
    tracker.poll()
    assert tracker.snapshot()["source"] == "events"
    now[0] += 5
    tracker.on_line("tfk8s-phase cluster_ready")
    now[0] += 1
    tracker.on_line("tfk8s-progress task=worker-1 step=4 loss=0.1 accuracy=0.9 examples_per_sec=10.0 target=300")
    report = tracker.snapshot()
    assert report["source"] == "trainer"
    assert report["phases"]["cluster_ready_at"] < report["first_step_at"] == now[0], report


def test_lines_read_in_one_burst_are_timed_by_when_the_trainer_printed_them(tmp_path: Path) -> None:
    """A busy node schedules the launcher late and it reads a second of lines at once (CI,
    2026-11-30: six lines 0.1 s apart read within 0.5 s, no rate at all). Their `at` times them; a
    line without one is timed by its reading, and an `at` is never later than the reading."""
    from tfk8s_train.task_progress import Tracker

    read_at = time.time()
    tracker = Tracker(task="worker-0", run=RUN, run_dir=str(tmp_path), target=None, read_events=False, clock=lambda: read_at)
    tracker.on_line(f"tfk8s-phase cluster_ready at={read_at - 2.5:.3f}")
    for printed, step in ((read_at - 2.0, 10), (read_at - 1.0, 60), (read_at - 0.0, 110)):
        tracker.on_line(f"tfk8s-progress task=worker-0 step={step} loss=0.1 accuracy=0.9 examples_per_sec=10.0 at={printed:.3f}")
    report = tracker.snapshot()
    assert report["steps_per_second"] == pytest.approx(50, rel=1e-3), report
    assert report["phases"]["cluster_ready_at"] == pytest.approx(read_at - 2.5, abs=1e-3)
    assert report["first_step_at"] == pytest.approx(read_at - 2.0, abs=1e-3)
    tracker.on_line("tfk8s-phase tensorflow_imported")
    tracker.on_line(f"tfk8s-progress task=worker-0 step=120 loss=0.1 accuracy=0.9 examples_per_sec=10.0 at={read_at + 60:.3f}")
    report = tracker.snapshot()
    assert report["phases"]["tensorflow_imported_at"] == read_at
    assert report["steps_per_second"] == pytest.approx(110 / 2.0, rel=1e-3), "the future `at` is the reading's time"


@pytest.mark.training
def test_a_half_written_event_file_is_read_again_from_where_its_last_whole_record_ended(tmp_path: Path) -> None:
    import tensorflow as tf
    from tfk8s_train.event_files import EventFile

    with tf.summary.create_file_writer(str(tmp_path / "written")).as_default():
        for step in range(1, 6):
            tf.summary.scalar("loss", 1.0 / step, step=step)
    (source,) = (tmp_path / "written").iterdir()
    data = source.read_bytes()
    growing = tmp_path / "events.out.tfevents.growing"
    growing.write_bytes(data[:-7])  # the writer is in the middle of the last record
    reader = EventFile(str(growing))
    first = reader.read_new()
    assert [e.step for e in first if e.scalars] == [1, 2, 3, 4]
    growing.write_bytes(data)
    rest = reader.read_new()
    assert [(e.step, round(e.scalars["loss"], 4)) for e in rest] == [(5, 0.2)]
    assert reader.read_new() == []
