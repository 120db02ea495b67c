"""The program's start (infra/__main__.py, tfk8s.entry): what must precede the program's import does.

A fresh interpreter runs the real entry point, as a language host does, on a stack with no config:
the program then refuses at its first step (no `tfk8s:kind`), after everything boot does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from mocked_program import ROOT
from tfk8s.gc_policy import EVALUATION_GC_THRESHOLDS

# Records, as each tfk8s module is first imported, the GC thresholds, the pydantic switch and the
# phases marked so far; then runs the entry point and prints what it saw.
CHILD = """
import gc, json, os, runpy, sys
import pulumi

class Watch:
    seen = {}
    def find_spec(self, name, path=None, target=None):
        if name.startswith("tfk8s.") and name not in self.seen:
            timings = os.environ["TFK8S_TIMINGS"]
            marked = [json.loads(line)["phase"] for line in open(timings)] if os.path.exists(timings) else []
            self.seen[name] = [list(gc.get_threshold()), os.environ.get("PYDANTIC_DISABLE_PLUGINS"), marked]
        return None

sys.meta_path.insert(0, Watch())
try:
    runpy.run_path(sys.argv[1], run_name="__main__")
except pulumi.RunError as error:
    print(json.dumps({"error": str(error), "seen": Watch.seen}))
"""


def run_entry(tmp_path: Path) -> dict[str, Any]:
    env = {"PATH": "/usr/bin:/bin", "TFK8S_TIMINGS": str(tmp_path / "timings.jsonl"), "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT / "infra" / "__main__.py")], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_boot_comes_before_the_programs_import_and_main_runs_the_program(tmp_path: Path) -> None:
    ran = run_entry(tmp_path)
    assert "tfk8s:kind: it is missing" in ran["error"]  # the program ran: its first step refused
    thresholds, pydantic_plugins, marked = ran["seen"]["tfk8s.program"]
    assert tuple(thresholds) == EVALUATION_GC_THRESHOLDS
    assert pydantic_plugins == "__all__"
    assert marked == ["start"]  # the provider's warm-up and the read ahead were started before
    thresholds, _, _ = ran["seen"]["tfk8s.kube.objects"]
    assert tuple(thresholds) == EVALUATION_GC_THRESHOLDS  # the collector's thresholds come first of all
    phases = [json.loads(line)["phase"] for line in (tmp_path / "timings.jsonl").read_text().splitlines()]
    assert phases[:2] == ["start", "import"]
