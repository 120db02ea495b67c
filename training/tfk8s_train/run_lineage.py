"""A new run that continues an interrupted run of the same training (standard library only: the
launcher imports it in stock images, on Python 3.6 and newer).

Every run writes under its own directory, ``<log volume>/<experiment>/<cluster>/run-<job uid>``
(launch.py), so a new Job starts with no checkpoint. That is right for a run the user asked for
anew (other settings, a bumped ``run.number``, or the same settings after the last run ended),
and wrong for a run that only changed because tfk8s did: an upgrade that ships another trainer,
another default image or other host names replaces the Job, and the run in progress would start
again from step 0.

So the experiment program gives every task the run's lineage, ``TFK8S_LINEAGE``: a digest of what
the user decides (the cluster's settings as the stack file says them, and the user's code), not of
what tfk8s decides (tfk8s.specs.cluster_spec.lineage). Each run records it in
``.tfk8s/lineage``. When the task that checkpoints (the chief: ``chief-0``, else ``worker-0``)
starts a run that has no checkpoint yet, its launcher looks for earlier runs of the cluster with
the same lineage that did not end (no done marker of that task) and have a checkpoint; the newest
such checkpoint is linked into this run's ``checkpoints/`` (hard links on the same volume, a copy
elsewhere: the earlier run's files stay as they were), and the trainer restores it as a restarted
chief would. ``.tfk8s/continued.json`` says from which run and checkpoint.
"""

import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Union

try:
    from tfk8s_train import atomic_file
except ImportError:  # beside launch.py as plain files
    import atomic_file  # type: ignore[no-redef]

LINEAGE_FILE = Path(".tfk8s") / "lineage"
CONTINUED_FILE = Path(".tfk8s") / "continued.json"
CHECKPOINTS = "checkpoints"
STATE = "checkpoint"  # TensorFlow's checkpoint state file, for TF1's Saver and TF2's CheckpointManager
_NEWEST = re.compile(r'^model_checkpoint_path:\s*"(.*)"\s*$', re.M)


class Earlier(NamedTuple):
    """An earlier run to continue: its directory and its newest checkpoint's files."""

    run_dir: Path
    prefix: str  # the checkpoint's name (model.ckpt-1203, ckpt-12): its files are <prefix>.*
    files: List[Path]
    written_at: float


def checkpointing_task(cluster: Dict[str, object]) -> str:
    """The task whose checkpoints a run restores: the chief, else worker 0."""
    return "chief-0" if "chief" in cluster else "worker-0"


def record(run_dir: Union[str, Path], lineage: str) -> None:
    """Write the run's lineage once (every task of the run has the same one)."""
    path = Path(run_dir) / LINEAGE_FILE
    if path.exists():
        return
    atomic_file.write_text(path, lineage)


def newest_checkpoint(run_dir: Union[str, Path]) -> Optional[Earlier]:
    """The run's newest checkpoint, as its state file names it, if its files are there."""
    state = Path(run_dir) / CHECKPOINTS / STATE
    try:
        found = _NEWEST.search(state.read_text())
    except OSError:
        return None
    if found is None:
        return None
    # The state file may hold the pod's absolute path (/log/run-<uid>/checkpoints/...): the files
    # are beside it whatever the volume is mounted at.
    prefix = Path(found.group(1)).name
    files = sorted(p for p in state.parent.glob(prefix + ".*") if p.is_file())
    if not files:
        return None
    return Earlier(Path(run_dir), prefix, files, max(p.stat().st_mtime for p in files))


def earlier_run(run_dir: Union[str, Path], lineage: str, task: str) -> Optional[Earlier]:
    """The newest checkpoint of the cluster's earlier runs of `lineage` that `task` did not finish."""
    here = Path(run_dir)
    candidates = []
    for other in here.parent.glob("run-*"):
        if other == here or not other.is_dir() or _read(other / LINEAGE_FILE) != lineage:
            continue
        if (other / ".tfk8s" / "done" / task).exists():  # it ended: a run after it starts over
            continue
        found = newest_checkpoint(other)
        if found is not None:
            candidates.append(found)
    return max(candidates, key=lambda e: e.written_at) if candidates else None


def continue_run(run_dir: Union[str, Path], lineage: str, task: str) -> Optional[Dict[str, str]]:
    """Give this run the newest checkpoint of an interrupted earlier run of its lineage, unless it
    has checkpoints of its own (a restarted chief's run); what was continued, or None."""
    target = Path(run_dir) / CHECKPOINTS
    if (target / STATE).exists():
        return None
    earlier = earlier_run(run_dir, lineage, task)
    if earlier is None:
        return None
    target.mkdir(parents=True, exist_ok=True)
    for source in earlier.files:
        destination = target / source.name
        if destination.exists():
            destination.unlink()
        try:
            os.link(str(source), str(destination))
        except OSError:  # another filesystem, or one without hard links
            shutil.copy2(str(source), str(destination))
    name = json.dumps(earlier.prefix)
    atomic_file.write_text(target / STATE, f"model_checkpoint_path: {name}\nall_model_checkpoint_paths: {name}\n")
    continued = {"run": earlier.run_dir.name, "checkpoint": earlier.prefix, "at": str(time.time())}
    atomic_file.write_text(Path(run_dir) / CONTINUED_FILE, json.dumps(continued))
    return continued


def _read(path: Path) -> Optional[str]:
    try:
        return path.read_text().strip()
    except OSError:
        return None
