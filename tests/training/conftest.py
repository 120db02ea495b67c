"""Shared fixtures for the training tests: real TensorFlow processes on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TRAINING_DIR = Path(__file__).resolve().parents[2] / "training"
if str(TRAINING_DIR) not in sys.path:  # also works without pyproject's pythonpath
    sys.path.insert(0, str(TRAINING_DIR))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "training: starts a real local TensorFlow cluster (slow, runs by default)")


def subprocess_env(**extra: str) -> dict[str, str]:
    """This environment plus the training package on PYTHONPATH and quiet TensorFlow logs."""
    path = os.pathsep.join(p for p in (str(TRAINING_DIR), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "TF_CPP_MIN_LOG_LEVEL": "2", **extra}


@pytest.fixture
def training_env() -> dict[str, str]:
    """Environment for a subprocess that runs ``python -m tfk8s_train...``."""
    return subprocess_env()


@pytest.fixture(scope="session")
def digits_tfrecords(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """scikit-learn digits as 4 train shards + a test shard, written by the real CLI."""
    data_dir = tmp_path_factory.mktemp("digits-tfrecords")
    subprocess.run(
        [sys.executable, "-m", "tfk8s_train", "prepare-data", "--data-dir", str(data_dir), "--shards", "4"],
        check=True,
        env=subprocess_env(),
        capture_output=True,
        timeout=120,
    )
    return data_dir
