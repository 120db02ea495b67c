"""tfk8s_train.atomic_file: what a task writes for others is replaced whole or not at all."""

from __future__ import annotations

from pathlib import Path

import pytest
from tfk8s_train import atomic_file


def test_a_write_makes_the_directory_and_replaces_the_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "run" / "results" / "worker-0.json"
    assert atomic_file.write_text(path, "first") == path
    atomic_file.write_text(path, "second")
    assert path.read_text() == "second"
    assert [p.name for p in path.parent.iterdir()] == ["worker-0.json"]  # no temporary left beside it


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    atomic_file.write_text(path, "old")
    with pytest.raises(TypeError):
        atomic_file.write_text(path, 42)  # type: ignore[arg-type]
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["progress.json"]
