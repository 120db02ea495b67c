"""The README's "A first experiment of your own" block, run as written: extracted from the Markdown,
in a fresh shell of its own, as a user types it after `make up` (the platform and alice's tenant
up), from a checkout of its own. The shell starts with the team's environment (`make env`'s), as
a user's does who ran it first: `hack/env.sh --tenant alice` must replace it. `set -e`: any
command that fails fails the test. Confirmation prompts are answered yes
(PULUMI_SKIP_CONFIRMATIONS, Pulumi's own switch), as in any script."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from drivers import CLUSTER, ROOT, Kube

import toolenv


def block_after(markdown: Path, heading: str) -> str:
    """The first ```sh block after the heading `heading`."""
    text = markdown.read_text()
    start = text.index(f"\n## {heading}\n")
    found = re.search(r"```sh\n(.*?)```", text[start:], flags=re.DOTALL)
    assert found, f"no sh block after {heading!r} in {markdown}"
    return found.group(1)


def checkout(work: Path) -> Path:
    """A checkout of its own: the project copy (stack files copied, infra and .venv linked) and the
    scripts the block runs, so its `stack init` writes no file of the repository's."""
    toolenv.project_copy(work)
    (work / "hack").symlink_to(ROOT / "hack")
    return work


def test_the_readmes_first_experiment_runs_as_written(kube: Kube, tenants: dict[str, str], tmp_path: Path) -> None:
    block = block_after(ROOT / "README.md", "A first experiment of your own")
    assert "pulumi up" in block and "hack/env.sh --tenant alice" in block
    work = checkout(tmp_path / "checkout")
    team = dict(os.environ)  # the session's: `make env`'s team environment, on this worker's cluster
    env = {**team, "TFK8S_CLUSTER_NAME": CLUSTER, "PULUMI_SKIP_CONFIRMATIONS": "true"}
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block], cwd=work, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"the README's block failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    # As alice: her state in the checkout's .state, not the team's backend.
    assert (work / ".state" / "tenants" / "alice" / "backend" / ".pulumi" / "stacks").is_dir()
    assert "cifar" in done.stdout  # `stack output readiness` named the cluster
    assert "replaced" in done.stderr  # env.sh said it replaced the team's variables
    left = kube.run("get", "all,configmaps", "-n", "tfk8s-alice", "-l", "tfk8s.io/experiment=alice-cifar", "-o", "name")
    assert left.strip() == "", left  # `pulumi destroy` took the experiment away
