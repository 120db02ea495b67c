"""Which earlier run a new run continues (tfk8s_train.run_lineage), on run directories as the
launcher and TensorFlow leave them: the newest checkpoint of the newest interrupted run of the same
lineage, never a run that ended, another lineage's, or a run without a checkpoint; a run with
checkpoints of its own is left alone; the earlier run's files stay as they were."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tfk8s_train.launch import write_done_marker
from tfk8s_train.run_lineage import CONTINUED_FILE, continue_run, record

LINEAGE, CHIEF = "a1b2c3d4e5f6", "worker-0"


def a_run(cluster: Path, uid: str, lineage: str | None, steps: list[int], *, written_at: float, absolute: bool = True) -> Path:
    """A run directory with TF1-style checkpoints at `steps`, its state file naming the last (with
    the pod's absolute path, as a Saver writes it), its files last written at `written_at`."""
    run = cluster / f"run-{uid}"
    checkpoints = run / "checkpoints"
    checkpoints.mkdir(parents=True)
    if lineage is not None:
        record(run, lineage)
    for step in steps:
        for suffix in (".index", ".data-00000-of-00001", ".meta"):
            path = checkpoints / f"model.ckpt-{step}{suffix}"
            path.write_text(f"{uid} {step}")
            os.utime(path, (written_at, written_at))
    if steps:
        newest = f"/log/run-{uid}/checkpoints/model.ckpt-{steps[-1]}" if absolute else f"model.ckpt-{steps[-1]}"
        (checkpoints / "checkpoint").write_text(
            f'model_checkpoint_path: "{newest}"\n' + "".join(f'all_model_checkpoint_paths: "model.ckpt-{s}"\n' for s in steps)
        )
    return run


def test_a_new_run_continues_the_newest_interrupted_run_of_its_lineage(tmp_path: Path) -> None:
    older = a_run(tmp_path, "older", LINEAGE, [100], written_at=1000)
    newest = a_run(tmp_path, "newest", LINEAGE, [100, 200, 300], written_at=2000)
    before = {p: p.read_text() for p in newest.rglob("*") if p.is_file()}
    new = tmp_path / "run-new"
    record(new, LINEAGE)

    continued = continue_run(new, LINEAGE, CHIEF)

    assert continued is not None and (continued["run"], continued["checkpoint"]) == ("run-newest", "model.ckpt-300")
    checkpoints = new / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == [
        "checkpoint",
        "model.ckpt-300.data-00000-of-00001",
        "model.ckpt-300.index",
        "model.ckpt-300.meta",
    ]
    assert (checkpoints / "model.ckpt-300.index").read_text() == "newest 300"
    # The state names the checkpoint beside it: TensorFlow resolves a relative path from there.
    assert (checkpoints / "checkpoint").read_text().splitlines()[0] == 'model_checkpoint_path: "model.ckpt-300"'
    assert json.loads((new / CONTINUED_FILE).read_text())["run"] == "run-newest"
    assert {p: p.read_text() for p in newest.rglob("*") if p.is_file()} == before  # the earlier run untouched
    assert older.exists()


def test_a_run_that_ended_another_lineage_or_no_checkpoint_is_not_continued(tmp_path: Path) -> None:
    ended = a_run(tmp_path, "ended", LINEAGE, [100, 200], written_at=3000)
    write_done_marker(ended, "worker", 0)  # its chief finished: a run after it starts over
    a_run(tmp_path, "other", "ffffffffffff", [500], written_at=4000)
    a_run(tmp_path, "unrecorded", None, [600], written_at=5000)  # a run of a release before lineages
    a_run(tmp_path, "no-checkpoint", LINEAGE, [], written_at=6000)
    new = tmp_path / "run-new"

    assert continue_run(new, LINEAGE, CHIEF) is None
    assert not (new / "checkpoints").exists()


def test_a_run_with_checkpoints_of_its_own_is_left_as_it_is(tmp_path: Path) -> None:
    """A restarted chief of the run finds its run's own checkpoints: nothing is linked over them."""
    a_run(tmp_path, "earlier", LINEAGE, [900], written_at=1000)
    own = a_run(tmp_path, "own", LINEAGE, [100], written_at=2000, absolute=False)
    state = (own / "checkpoints" / "checkpoint").read_text()

    assert continue_run(own, LINEAGE, CHIEF) is None
    assert (own / "checkpoints" / "checkpoint").read_text() == state
    assert not (own / "checkpoints" / "model.ckpt-900.index").exists()


def test_the_chief_of_an_in_graph_run_is_the_task_whose_end_counts(tmp_path: Path) -> None:
    interrupted = a_run(tmp_path, "interrupted", LINEAGE, [40], written_at=1000)
    write_done_marker(interrupted, "worker", 0)  # an in-graph worker's marker says nothing of the run's end

    continued = continue_run(tmp_path / "run-new", LINEAGE, "chief-0")

    assert continued is not None and continued["checkpoint"] == "model.ckpt-40"
