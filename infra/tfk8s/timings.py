"""Where a program run's time goes, phase by phase (bench/deploy_vs_apply.py, docs/benchmarks.md "Fixed cost").

With TFK8S_TIMINGS=<file> in the program's environment, each phase appends one JSON line to the
file: the phase's name and the wall-clock time it ended, so a benchmark lines them up with the
CLI's own start and end. Unset, nothing is measured or written. Standard library only: the first
mark is taken before the program imports Pulumi.
"""

from __future__ import annotations

import atexit
import json
import os
import time

ENV = "TFK8S_TIMINGS"
_path = os.environ.get(ENV)


def mark(phase: str) -> None:
    """The end of `phase`, now."""
    if _path:
        with open(_path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"phase": phase, "time": time.time(), "pid": os.getpid()}) + "\n")


if _path:
    # When the process ends the engine has answered every registration: the program's last moment.
    atexit.register(mark, "exit")
