"""The README's block for this machine's real node, run as written: `make up-real-node`, then
`make status WATCH=1`, then `make down`, in a fresh shell of a newcomer (nothing of `make env`
exported yet), from a checkout of its own with a cluster of its own (TFK8S_CLUSTER_NAME), so that
it touches neither the repository's .state nor the session's clusters.

Before `make down`, the Progress page's first block (docs/guide/status.md) runs as written too, in
the environment its first line names (alice's): `tfk8s status`, `tfk8s logs` and their make targets.

What the newcomer must see: the demo brings up the cluster with the real node as the User Node and
the training node at once, the platform, alice's tenant and the `dev` experiment, and reports the
first training step `tfk8s status` shows; `make status WATCH=1`, as alice, follows the run to its
end; `make down` destroys the stacks and stops the cluster with its real node. Prints the demo's
own timeline (lab/demo_real_node.py's marks) for the closing note."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from command_blocks import block_after, checkout, run_block
from drivers import CLUSTER, ROOT

import toolenv

# A warm run takes about 90 s (the first step at about 60); a cold machine builds the node's
# binaries and images inside the block.
TIMEOUT = 2400


def newcomer_environment(cluster: str) -> dict[str, str]:
    """A shell that has exported nothing of tfk8s's (this session's environment is the team's, as
    `make env` gives it), nor `make test`'s own make, with its own cluster."""
    exported = toolenv.exported()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in exported and not key.startswith(("PULUMI_", "MAKE", "MFLAGS"))
    }
    return {**env, "PATH": os.environ["PATH"], "TFK8S_CLUSTER_NAME": cluster}


def as_written_up_to(block: str, command: str) -> tuple[str, str]:
    """`block` split before its line that starts with `command`: what runs before it, and the rest."""
    lines = block.splitlines(keepends=True)
    (at,) = [i for i, line in enumerate(lines) if line.startswith(command)]
    return "".join(lines[:at]), "".join(lines[at:])


def in_the_stated_environment(block: str) -> str:
    """The block after the environment its own first comment says it runs in (status.md: "As alice,
    in her environment (eval "$(hack/env.sh --tenant alice)")")."""
    stated = re.search(r'\((eval "\$\(hack/env\.sh --tenant [a-z0-9-]+\)")\)', block)
    assert stated, f"the block names no environment to run in:\n{block}"
    return f"{stated[1]}\n{block}"


def test_the_readmes_real_node_block_trains_dev_as_alice_and_make_down_leaves_no_cluster(tmp_path: Path) -> None:
    block = block_after(ROOT / "README.md", "A first experiment of your own", containing="make up-real-node")
    assert "make status WATCH=1" in block, block
    # The README's block, with the Progress page's first block (status.md) run before its `make down`:
    # `tfk8s status` and `tfk8s logs` as alice, and their make targets, on the run that just ended.
    up, down = as_written_up_to(block, "make down")
    status = block_after(ROOT / "docs" / "guide" / "status.md", "Progress and logs of a running experiment")
    assert "tfk8s status --stack dev" in status and "make logs" in status, status
    # The Makefile's prerequisites of the virtualenv, and the demo's script, are the repository's.
    work = checkout(tmp_path / "checkout", "lab", "pyproject.toml", "requirements.txt")
    env = newcomer_environment(f"{CLUSTER}-demo")
    try:
        done = run_block(up, work, env, timeout=TIMEOUT)
        said = f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
        assert done.returncode == 0, f"the README's real-node block failed:\n{said}"
        followed = run_block(in_the_stated_environment(status), work, env, timeout=600)
        shown = f"stdout:\n{followed.stdout[-3000:]}\nstderr:\n{followed.stderr[-3000:]}"
        assert followed.returncode == 0, f"the Progress page's block failed:\n{shown}"
        downed = run_block(down, work, env, timeout=600)
        assert downed.returncode == 0, f"`make down` failed:\n{downed.stdout[-3000:]}\n{downed.stderr[-3000:]}"
    finally:  # what a block that failed half way left: the cluster and its real node
        subprocess.run(["hack/cluster.sh", "stop"], cwd=work, env=env, capture_output=True, text=True)
    first = re.search(r"\[up-real-node\s+(\d+) s\] first step seen in `tfk8s status`: mnist at step (\d+)", done.stderr)
    assert first and int(first[2]) > 0, said
    # `make status WATCH=1` followed alice's run to its end: the dev cluster at its target.
    assert re.search(r"^dev/mnist .* 100% .* succeeded", done.stdout, flags=re.MULTILINE), said
    # The Progress page's block: `tfk8s status` (once, --watch) and `make status` each showed the
    # finished run; `tfk8s logs` printed the PS's log and a worker's tail, `make logs` worker-0's.
    finished = re.findall(r"^dev/mnist .* 100% .* succeeded", followed.stdout, flags=re.MULTILINE)
    assert len(finished) >= 3, shown
    assert "tfk8s-launch: ps-0: all of ['worker-0', 'worker-1'] are done; retiring" in followed.stdout, shown
    assert "tfk8s: worker-0 starts at global step" in followed.stdout, shown
    # The experiment ran as alice, in her own state; the platform and tenant in the team's.
    assert (work / ".state" / "tenants" / "alice" / "backend" / ".pulumi" / "stacks").is_dir()
    stopped = subprocess.run(["hack/cluster.sh", "status"], cwd=work, env=env, capture_output=True, text=True)
    assert stopped.returncode != 0, f"`make down` left the cluster running: {stopped.stdout}"
    marks = re.findall(r"\[up-real-node\s+(\d+) s\] (.+)", done.stderr)
    print("\n[real-node demo] " + "; ".join(f"{what}: {seconds} s" for seconds, what in marks))
