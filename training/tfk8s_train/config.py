"""Training settings: one frozen dataclass, every default in exactly one place (here)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

MODES = ("auto", "local", "between-graph", "in-graph")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """What to train and how; parsed from the command line by ``tfk8s_train.cli``."""

    mode: str = "auto"  # auto: $TFK8S_REPLICATION, else in-graph iff the cluster has a chief; no cluster: local
    sync: bool = False  # aggregate one gradient per worker before each update (both replication modes)
    model: str = "mlp"  # mlp | cnn
    steps: int = 300  # global steps (one per applied update) to train to
    batch_size: int = 64  # per worker and step
    learning_rate: float = 0.005  # Adam
    checkpoint_steps: int = 100  # chief checkpoints every N global steps (and at the end)
    # ... and at least every N seconds: the training a lost task costs is bounded in time, whatever
    # a step costs ($TFK8S_CHECKPOINT_SECONDS, the experiment's run.checkpointSeconds).
    checkpoint_seconds: float = 60.0
    log_every: int = 25  # progress line + TensorBoard point every N local steps
    data_dir: str | None = None  # None: $TFK8S_DATA_DIR, else /data; missing dir: sklearn digits
    log_dir: str = ""  # "": $TFK8S_LOG_DIR, else /log
    seed: int = 0  # same initial weights on every task
    export: bool = True  # chief writes <log_dir>/saved_model at the end

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"--mode {self.mode!r}: expected one of {', '.join(MODES)}")
        for name in ("steps", "batch_size", "checkpoint_steps", "log_every"):
            if getattr(self, name) <= 0:
                raise ValueError(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        if self.checkpoint_seconds <= 0:
            raise ValueError(f"--checkpoint-seconds must be positive, got {self.checkpoint_seconds}")
        if self.learning_rate <= 0:
            raise ValueError(f"--learning-rate must be positive, got {self.learning_rate}")


def default_data_dir(environ: Mapping[str, str] = os.environ) -> str:
    return environ.get("TFK8S_DATA_DIR") or "/data"


def default_log_dir(environ: Mapping[str, str] = os.environ) -> str:
    return environ.get("TFK8S_LOG_DIR") or "/log"


def default_checkpoint_seconds(environ: Mapping[str, str] = os.environ) -> float:
    """$TFK8S_CHECKPOINT_SECONDS (what the experiment's run.checkpointSeconds sets), else 60."""
    given = environ.get("TFK8S_CHECKPOINT_SECONDS")
    if not given:
        return TrainConfig.checkpoint_seconds
    try:
        return float(given)
    except ValueError:
        raise ValueError(f"TFK8S_CHECKPOINT_SECONDS={given!r}: expected a number of seconds, e.g. 60") from None
