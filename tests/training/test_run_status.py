"""Where each training cluster is (tfk8s_train.run_status), read from progress files as the launchers
write them: a running cluster with its ETA, a finished one, a failed worker, restarts, stale tasks,
the latest of several runs, and whatever a log volume may hold besides (garbage, partial files,
links out of the root), which is skipped with a note and never raises."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from fabricated_runs import NOW, age, run_dir, settle, write_log, write_progress, write_raw
from tfk8s_train.log_tree import Absent, Concatenation, LogTree
from tfk8s_train.run_status import READ_RUNS, STALE_SECONDS, summarise


def clusters(root: Path, experiment: str = "dev") -> dict[str, Any]:
    return summarise(LogTree(str(root)), NOW, experiment)["experiments"][experiment]["clusters"]


def mnist(root: Path) -> dict[str, Any]:
    return clusters(root)["mnist"]


def test_a_running_cluster_has_the_highest_step_the_freshest_rate_and_an_eta(tmp_path: Path) -> None:
    write_progress(tmp_path, "r1", "ps-0", step=None)
    write_progress(tmp_path, "r1", "worker-0", step=118, target_steps=300, steps_per_second=3.0, updated_at=NOW - 4, loss=0.5)
    write_progress(
        tmp_path,
        "r1",
        "worker-1",
        step=120,
        target_steps=300,
        steps_per_second=4.0,
        examples_per_second=256.0,
        loss=0.31,
        updated_at=NOW - 1,
        first_step_at=NOW - 88,
        last_checkpoint={"step": 100, "at": NOW - 30},
    )
    found = mnist(tmp_path)
    assert found["state"] == "running" and not found["finished"] and not found["stale"]
    assert (found["step"], found["target_steps"], found["fraction"]) == (120, 300, 0.4)
    # The rate, examples and loss of the task that wrote last, among those with a step.
    assert (found["steps_per_second"], found["examples_per_second"], found["loss"]) == (4.0, 256.0, 0.31)
    assert found["eta_seconds"] == pytest.approx((300 - 120) / 4.0)
    assert found["first_step_at"] == NOW - 88 and found["first_step_seconds"] == pytest.approx(12.0)
    assert found["last_checkpoint"] == {"step": 100, "at": NOW - 30}
    assert [t["task"] for t in found["tasks"]] == ["worker-0", "worker-1", "ps-0"]
    assert found["tasks"][1]["age_seconds"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "tasks, state, finished, eta",
    [
        (
            {"chief-0": {"state": "succeeded", "exit_code": 0, "step": 300}, "worker-0": {"state": "retired"}},
            "succeeded",
            True,
            0.0,
        ),
        (
            {"worker-0": {"state": "succeeded", "exit_code": 0}, "worker-1": {"state": "succeeded", "exit_code": 0}},
            "succeeded",
            True,
            0.0,
        ),
        ({"worker-0": {"state": "succeeded"}, "worker-1": {"state": "running"}}, "running", False, None),
        ({"worker-0": {"state": "running"}, "worker-1": {"state": "failed", "exit_code": 1}}, "failed", True, None),
        ({"ps-0": {"state": "retired"}, "worker-0": {"state": "succeeded"}}, "succeeded", True, 0.0),
        ({"ps-0": {"state": "starting"}, "worker-0": {"state": "starting"}}, "starting", False, None),
        ({"worker-0": {"state": "exploded"}}, "unknown", False, None),
    ],
    ids=["chief-succeeded", "every-worker-succeeded", "one-worker-left", "failed-worker", "ps-retired", "starting", "odd-state"],
)
def test_a_clusters_state_follows_its_tasks(
    tmp_path: Path, tasks: dict[str, dict[str, Any]], state: str, finished: bool, eta: float | None
) -> None:
    for task, fields in tasks.items():
        write_progress(tmp_path, "r1", task, **fields)
    found = mnist(tmp_path)
    assert (found["state"], found["finished"], found["eta_seconds"]) == (state, finished, eta)


def test_a_failed_worker_shows_its_exit_code(tmp_path: Path) -> None:
    write_progress(tmp_path, "r1", "worker-0", step=50)
    write_progress(tmp_path, "r1", "worker-1", state="failed", exit_code=137, step=48)
    (failed,) = [t for t in mnist(tmp_path)["tasks"] if t["task"] == "worker-1"]
    assert (failed["state"], failed["exit_code"], failed["step"]) == ("failed", 137, 48)


def test_restarts_are_counted_per_task_and_for_the_cluster(tmp_path: Path) -> None:
    write_progress(tmp_path, "r1", "worker-0", starts=3, step=10)
    write_progress(tmp_path, "r1", "ps-0", starts=2)
    write_progress(tmp_path, "r1", "worker-1")
    found = mnist(tmp_path)
    assert found["restarts"] == 3 and found["state"] == "running"
    assert {t["task"]: t["starts"] for t in found["tasks"]} == {"worker-0": 3, "worker-1": 1, "ps-0": 2}


def test_a_restarted_task_carries_what_its_restart_cost_and_garbage_there_reads_as_none(tmp_path: Path) -> None:
    resume = {"after_step": 1218, "at_step": 1205, "steps_lost": 13, "seconds": 31.2}
    write_progress(tmp_path, "r1", "worker-0", starts=2, step=1230, last_resume=resume)
    write_progress(tmp_path, "r1", "worker-1", starts=2, step=1230, last_resume={"after_step": 1218, "at_step": None})
    write_progress(tmp_path, "r1", "worker-2", starts=2, step=1230, last_resume={"after_step": "1218"})
    write_progress(tmp_path, "r1", "ps-0")
    tasks = {t["task"]: t["resumed"] for t in mnist(tmp_path)["tasks"]}
    assert tasks["worker-0"] == resume
    assert tasks["worker-1"] == {"after_step": 1218, "at_step": None, "steps_lost": None, "seconds": None}
    assert tasks["worker-2"] is None and tasks["ps-0"] is None


def test_a_cluster_whose_tasks_stopped_writing_is_stale(tmp_path: Path) -> None:
    write_progress(tmp_path, "r1", "worker-0", updated_at=NOW - STALE_SECONDS - 1)
    write_progress(tmp_path, "r1", "ps-0", state="retired", updated_at=NOW - 600)
    found = mnist(tmp_path)
    assert found["stale"] and found["state"] == "running"
    write_progress(tmp_path, "r1", "worker-1", updated_at=NOW - 1)
    assert not mnist(tmp_path)["stale"]  # one task still writes


def test_an_unknown_target_or_rate_gives_no_eta(tmp_path: Path) -> None:
    write_progress(tmp_path, "r1", "worker-0", step=10, steps_per_second=2.0)
    found = mnist(tmp_path)
    assert (found["fraction"], found["eta_seconds"], found["target_steps"]) == (None, None, None)
    write_progress(tmp_path, "r1", "worker-0", step=10, target_steps=100, steps_per_second=0.0)
    assert mnist(tmp_path)["eta_seconds"] is None


def test_the_latest_run_is_the_one_written_last(tmp_path: Path) -> None:
    write_progress(tmp_path, "old", "worker-0", state="succeeded", updated_at=NOW - 3600)
    write_progress(tmp_path, "new", "worker-0", step=5, updated_at=NOW - 1)
    age(run_dir(tmp_path, "dev", "mnist", "old"), NOW - 7200)
    age(run_dir(tmp_path, "dev", "mnist", "new"), NOW - 7200)
    age(run_dir(tmp_path, "dev", "mnist", "old") / ".tfk8s" / "progress", NOW - 7200)
    age(run_dir(tmp_path, "dev", "mnist", "new") / ".tfk8s" / "progress", NOW - 7200)
    found = mnist(tmp_path)
    assert (found["run"], found["runs"], found["step"]) == ("new", ["new", "old"], 5)
    # A run just made, whose tasks have written nothing yet, is newer still: by its directory's time.
    fresh = run_dir(tmp_path, "dev", "mnist", "fresh")
    age(fresh, NOW)
    found = mnist(tmp_path)
    assert (found["run"], found["state"], found["tasks"]) == ("fresh", "unknown", [])


def test_only_the_newest_runs_are_read_and_every_run_is_listed(tmp_path: Path) -> None:
    """A volume keeps every run of every experiment: old ones cost a directory's times, not their files."""
    write_raw(tmp_path, "r0", "worker-1.json", "{")  # in the oldest run: never read
    for i in range(READ_RUNS + 2):
        write_progress(tmp_path, f"r{i}", "worker-0", step=i, updated_at=NOW - 1000 + i)
        settle(tmp_path, f"r{i}", NOW - 1000 + i)
    found = summarise(LogTree(str(tmp_path)), NOW, "dev")
    cluster = found["experiments"]["dev"]["clusters"]["mnist"]
    assert (cluster["run"], cluster["step"]) == (f"r{READ_RUNS + 1}", READ_RUNS + 1)
    assert cluster["runs"] == [f"r{i}" for i in reversed(range(READ_RUNS + 2))] and found["notes"] == []


def test_a_done_marker_without_progress_counts_as_succeeded(tmp_path: Path) -> None:
    """A notebook client (in-graph chief) writes its done marker, not progress."""
    write_progress(tmp_path, "r1", "worker-0", state="retired")
    done = run_dir(tmp_path, "dev", "mnist", "r1") / ".tfk8s" / "done"
    done.mkdir(parents=True)
    (done / "chief-0").write_text("{}")
    found = mnist(tmp_path)
    assert found["state"] == "succeeded"
    assert [(t["task"], t["state"], t.get("done_marker")) for t in found["tasks"]] == [
        ("chief-0", "succeeded", True),
        ("worker-0", "retired", None),
    ]


def test_garbage_is_skipped_with_a_note_and_never_raises(tmp_path: Path) -> None:
    write_progress(tmp_path, "r1", "worker-0", step=7, target_steps="300", steps_per_second=True, loss=float("nan"))
    write_raw(tmp_path, "r1", "worker-1.json", '{"state": "running", "step": 1')  # partial
    write_raw(tmp_path, "r1", "worker-2.json", "[1, 2]")
    write_raw(tmp_path, "r1", "worker-3.json", "").write_bytes(b"\xff\xfe not UTF-8")
    write_raw(tmp_path, "r1", "worker-4.json", json.dumps({"x": "y" * 70_000}))
    write_raw(tmp_path, "r1", "notes.txt", "hello")
    write_raw(tmp_path, "r1", ".worker-5.json.tmp123", "{")  # a launcher's file being written: silent
    (run_dir(tmp_path, "dev", "mnist", "r1") / ".tfk8s" / "progress" / "ps-0.json").mkdir()
    (tmp_path / "dev" / "mnist" / "run-bad name").mkdir()
    (tmp_path / "dev" / "odd+name").mkdir()
    (tmp_path / "lost+found").mkdir()
    found = summarise(LogTree(str(tmp_path)), NOW)
    cluster = found["experiments"]["dev"]["clusters"]["mnist"]
    # Fields of the wrong type read as unknown; the task itself counts.
    assert (cluster["step"], cluster["target_steps"], cluster["steps_per_second"], cluster["loss"]) == (7, None, None, None)
    assert [t["task"] for t in cluster["tasks"]] == ["worker-0"]
    notes = "\n".join(found["notes"])
    for name in ("worker-1.json", "worker-2.json", "worker-3.json", "worker-4.json", "notes.txt", "ps-0.json", "odd+name"):
        assert name in notes, (name, notes)
    assert "worker-5" not in notes and "lost+found" not in notes
    assert found["experiments"].keys() == {"dev"}


@pytest.mark.parametrize("where", ["experiment", "cluster", "run", "progress-dir", "progress-file"])
def test_links_are_never_followed_out_of_the_root(tmp_path: Path, where: str) -> None:
    root, outside = tmp_path / "logs", tmp_path / "elsewhere"
    secret = write_progress(outside, "r1", "worker-0", step=424242)  # elsewhere/dev/mnist/run-r1/...
    write_progress(root, "r0", "worker-0", step=1, experiment="real")
    links = {
        "experiment": (root / "dev", outside / "dev"),
        "cluster": (root / "dev" / "mnist", outside / "dev" / "mnist"),
        "run": (root / "dev" / "mnist" / "run-r1", secret.parents[2]),
        "progress-dir": (root / "dev" / "mnist" / "run-r1" / ".tfk8s" / "progress", secret.parent),
        "progress-file": (root / "dev" / "mnist" / "run-r1" / ".tfk8s" / "progress" / "worker-0.json", secret),
    }
    link, target = links[where]
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    found = summarise(LogTree(str(root)), NOW)
    assert "424242" not in json.dumps(found)
    assert found["experiments"]["real"]["clusters"]["mnist"]["step"] == 1


def test_a_missing_or_unreadable_root_is_no_experiment(tmp_path: Path) -> None:
    assert summarise(LogTree(str(tmp_path / "absent")), NOW) == {"schema": 1, "now": NOW, "experiments": {}, "notes": []}
    assert summarise(LogTree(str(tmp_path)), NOW, "dev")["experiments"] == {}


def test_a_tree_opens_nothing_through_a_link_or_above_its_root(tmp_path: Path) -> None:
    (tmp_path / "root" / "a").mkdir(parents=True)
    (tmp_path / "outside").write_text("secret")
    (tmp_path / "root" / "a" / "link").symlink_to(tmp_path / "outside")
    os.mkfifo(tmp_path / "root" / "a" / "fifo")
    tree = LogTree(str(tmp_path / "root"))
    for parts in [("a", "link"), ("a", "fifo"), ("a", "missing")]:
        with pytest.raises(Absent):
            tree.open(*parts)
    for parts in [("..", "outside"), ("a", "..", "..", "outside"), ("/etc", "passwd"), ("a/../..", "outside")]:
        with pytest.raises(ValueError, match="not a name beneath the log root"):
            tree.open(*parts)
    assert [e.name for e in tree.entries("a")] == []  # neither the link nor the FIFO is listed


@pytest.mark.parametrize(
    "files, lines, tail",
    [
        ([["a", "b"], ["c", "d", "e"]], 2, "d\ne\n"),
        ([["a", "b"], ["c", "d", "e"]], 4, "b\nc\nd\ne\n"),
        ([["a", "b"], ["c"]], 10, "a\nb\nc\n"),
        ([["a", "b"], []], 1, "b\n"),
        ([[], []], 3, ""),
    ],
    ids=["within-the-current-file", "across-the-rotated-file", "more-than-there-are", "current-file-empty", "nothing"],
)
def test_the_tail_of_a_log_reads_across_its_rotated_files(tmp_path: Path, files: list[list[str]], lines: int, tail: str) -> None:
    paths = [write_log(tmp_path, "r1", f"worker-0.{i}", content) for i, content in enumerate(files)]
    tree = LogTree(str(tmp_path))
    stream = Concatenation([tree.open(*p.relative_to(tmp_path).parts) for p in paths])
    try:
        assert b"".join(stream.chunks(stream.tail_start(lines))).decode() == tail
    finally:
        stream.close()


def test_the_tail_counts_a_last_line_without_its_newline_and_long_files(tmp_path: Path) -> None:
    path = tmp_path / "log"
    body = "".join(f"line {i:06d}\n" for i in range(20_000)) + "unfinished"  # several read blocks
    path.write_text(body)
    stream = Concatenation([os.open(path, os.O_RDONLY)])
    try:
        assert b"".join(stream.chunks(stream.tail_start(3))).decode() == "line 019998\nline 019999\nunfinished"
        assert b"".join(stream.chunks(stream.tail_start(30_000))).decode() == body
    finally:
        stream.close()
