"""The command blocks a newcomer follows, run as written: the README's "A first experiment of your
own" and the Usage page's block (usage.md), each extracted from the Markdown and run in a fresh shell
of its own, as a user types it after `make up` (the platform and alice's tenant up), from a
checkout of its own. The shell starts with the team's environment (`make env`'s), as a user's
does who ran it first: `hack/env.sh --tenant alice` must replace it, and `make env` bring it back.
`set -e`: any command that fails fails the test. Confirmation prompts are answered yes
(PULUMI_SKIP_CONFIRMATIONS, Pulumi's own switch), as in any script."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from command_blocks import block_after, checkout, run_block
from drivers import CLUSTER, ROOT, Kube

from doc_blocks import shell_blocks


def remove_alices_experiment(work: Path, env: dict[str, str]) -> None:
    """What a block that failed half way left: alice-cifar, destroyed as alice (nothing, when the block ran)."""
    script = (
        'eval "$(hack/env.sh --tenant alice)" && pulumi destroy --stack alice-cifar --yes --skip-preview '
        "&& pulumi stack rm alice-cifar --yes"
    )
    subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=600)


def team_environment(tmp_path: Path) -> dict[str, str]:
    """The session's team environment (its backend, the worker's cluster), its passphrase in a file
    as a team keeps it (env.sh brings a file back after a tenant's environment, never a passphrase)."""
    passphrase = tmp_path / "team.passphrase"
    passphrase.write_text(os.environ["PULUMI_CONFIG_PASSPHRASE"])
    # A fresh shell: nothing of `make test`'s own make (MAKEFLAGS, MAKELEVEL) reaches the block's `make env`.
    team = {k: v for k, v in os.environ.items() if k != "PULUMI_CONFIG_PASSPHRASE" and not k.startswith(("MAKE", "MFLAGS"))}
    return {
        **team,
        "PULUMI_CONFIG_PASSPHRASE_FILE": str(passphrase),
        "TFK8S_CLUSTER_NAME": CLUSTER,
        "PULUMI_SKIP_CONFIRMATIONS": "true",
    }


def test_the_readmes_first_experiment_runs_as_written(kube: Kube, tenants: dict[str, str], tmp_path: Path) -> None:
    block = block_after(ROOT / "README.md", "A first experiment of your own")
    assert "pulumi up" in block and "hack/env.sh --tenant alice" in block
    work = checkout(tmp_path / "checkout")
    env = team_environment(tmp_path)
    try:
        done = run_block(block, work, env)
    finally:
        remove_alices_experiment(work, env)
    assert done.returncode == 0, f"the README's block failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    # As alice: her state in the checkout's .state, not the team's backend.
    assert (work / ".state" / "tenants" / "alice" / "backend" / ".pulumi" / "stacks").is_dir()
    assert "cifar" in done.stdout  # `stack output readiness` named the cluster
    assert "replaced" in done.stderr  # env.sh said it replaced the team's variables
    left = kube.run("get", "all,configmaps", "-n", "tfk8s-alice", "-l", "tfk8s.io/experiment=alice-cifar", "-o", "name")
    assert left.strip() == "", left  # `pulumi destroy` took the experiment away


def test_the_usage_pages_first_block_runs_as_written(kube: Kube, tenants: dict[str, str], tmp_path: Path) -> None:
    block = shell_blocks(ROOT / "docs" / "guide" / "usage.md")[0].text
    assert "pulumi stack init tenant-carol" in block
    work = checkout(tmp_path / "checkout")
    env = team_environment(tmp_path)
    try:
        done = run_block(block, work, env)
        assert done.returncode == 0, f"the Usage page's block failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        # carol read her token with her own certificate (48 hex characters, no newline), then `pulumi
        # stack ls`, back in the team's backend, lists the new tenant beside the platform, not alice's stack.
        token = re.search(r"^[0-9a-f]{48}", done.stdout, flags=re.MULTILINE)
        assert token, done.stdout[-2000:]
        listed = done.stdout[token.end() :]
        assert "back to the team's environment" in done.stderr
        assert "tenant-carol" in listed and "platform-dev" in listed and "alice-cifar" not in listed
    finally:  # the new tenant goes, as the platform team would remove it
        remove_alices_experiment(work, env)
        subprocess.run(
            ["pulumi", "destroy", "--stack", "tenant-carol", "--yes"], cwd=work, env=env, capture_output=True, text=True
        )
        subprocess.run(
            ["pulumi", "stack", "rm", "--stack", "tenant-carol", "--yes"], cwd=work, env=env, capture_output=True, text=True
        )
