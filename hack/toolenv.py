"""The environment `hack/env.sh` (`make env`) prints, for Python callers: the e2e tests and benches.

One source of truth: the shell script users `eval`; this only runs it and parses its `export`s.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("TFK8S_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tfk8s")
BIN = CACHE / "bin"
KUBECTL = str(BIN / "kubectl")


def exported(overrides: dict[str, str] | None = None) -> dict[str, str]:
    """The variables hack/env.sh exports, as a user's `eval "$(make env)"` would get them."""
    printed = subprocess.run(
        [str(ROOT / "hack" / "env.sh")], check=True, capture_output=True, text=True, env={**os.environ, **(overrides or {})}
    ).stdout
    result = {}
    for line in printed.splitlines():
        word, assignment = shlex.split(line)
        if word != "export":
            raise ValueError(f"hack/env.sh printed {line!r}, not an export")
        key, value = assignment.split("=", 1)
        result[key] = value
    return result
