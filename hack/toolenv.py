"""What the e2e tests and benches share with users: the environment `hack/env.sh` (`make env`)
prints (the shell script stays the one source; this runs it and parses its `export`s), a project
copy to run `pulumi` in, and a throwaway local cluster.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
from collections.abc import Iterator
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


def project_copy(work: Path) -> Path:
    """A copy of this project to run plain `pulumi` commands in, with a local backend of its own:
    Pulumi.yaml and stacks/ copied (commands edit stack files), infra/ and .venv linked, `state/`
    for PULUMI_BACKEND_URL=file://<work>/state."""
    work.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "Pulumi.yaml", work / "Pulumi.yaml")
    shutil.copytree(ROOT / "stacks", work / "stacks")
    (work / "infra").symlink_to(ROOT / "infra")  # Pulumi.yaml's `main`
    (work / ".venv").symlink_to(ROOT / ".venv")  # runtime.options.virtualenv
    (work / "state").mkdir()
    return work


@contextlib.contextmanager
def throwaway_cluster(name: str, kube: str | None = None) -> Iterator[Path]:
    """A kwok cluster of its own (hack/cluster.sh start [--kube X]), deleted afterwards whatever
    happens; yields its kubeconfig."""
    env = {**os.environ, "TFK8S_CLUSTER_NAME": name}
    script = str(ROOT / "hack" / "cluster.sh")
    subprocess.run([script, "start", *(["--kube", kube] if kube else [])], check=True, env=env)
    try:
        found = subprocess.run([script, "kubeconfig"], check=True, env=env, capture_output=True, text=True)
        yield Path(found.stdout.strip())
    finally:
        subprocess.run([script, "stop"], check=False, env=env)
