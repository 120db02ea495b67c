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


def oldest_python() -> str | None:
    """The oldest CPython >= 3.6 on this machine (pyenv's versions, then PATH): the launcher's floor."""
    import glob
    import os
    import shutil
    import subprocess

    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates = sorted(glob.glob(f"{root}/versions/3.*/bin/python3"))
    candidates += [p for p in (shutil.which(f"python3.{m}") for m in range(6, 14)) if p]
    found = []
    for path in candidates:
        out = subprocess.run([path, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True, text=True)
        if out.returncode == 0:
            major, minor = map(int, out.stdout.split())
            if (major, minor) >= (3, 6):
                found.append(((major, minor), path))
    return min(found)[1] if found else None


OLDEST_PYTHON = oldest_python()


@pytest.fixture(params=["current", "oldest"], ids=["python-current", "python-oldest"])
def launcher_python(request: pytest.FixtureRequest) -> str:
    """The interpreters the launcher must run on: this one, and the oldest the machine has (3.6 in
    TF 1.x images; this machine's pyenv has 3.6.15)."""
    import sys

    if request.param == "current":
        return sys.executable
    assert OLDEST_PYTHON, "no Python >= 3.6 older than the project's found (pyenv versions or python3.X on PATH)"
    return OLDEST_PYTHON
