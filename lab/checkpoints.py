"""A run's newest checkpoint as the tests read it (the loopback runs' and the real node's), from
TensorFlow's `checkpoint` state file, without importing TensorFlow."""

from __future__ import annotations

import re
from pathlib import Path


def latest_checkpoint_step(checkpoint_dir: Path) -> int:
    """The step of the newest checkpoint TensorFlow's `checkpoint` state file names (-1: none yet)."""
    state = checkpoint_dir / "checkpoint"
    if not state.is_file():
        return -1
    match = re.search(r'^model_checkpoint_path: ".*-(\d+)"', state.read_text(), re.M)
    return int(match[1]) if match else -1
