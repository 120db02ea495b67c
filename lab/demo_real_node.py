"""`make up-real-node`: `make up` on this machine's real node (root), which is the User Node and the
training node at once, as on a cluster of one node (platform.userNode.sharedWithTraining): the
`dev` experiment trains for real, and `make status WATCH=1` shows it advance from its TensorBoard.

The local cluster starts with the real node (hack/cluster.sh start --real-node; lab/realnode.sh),
which loses its own taint; the images it runs are built here and imported (lab/images.py). The
demo's stacks (.state/demo, the copy `make up` runs) get the node's settings with `pulumi config
set`: the platform's as the team, the experiment's as alice, in her own environment
(hack/env.sh --tenant). Then the platform, the tenant and the experiment go up, and this waits for
the first training step `tfk8s status` shows, printing how long each part took. `make up`
afterwards puts the demo back on the simulated User Node; `make down` stops it all.

  .venv/bin/python lab/demo_real_node.py [--steps N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import realnode
import toolenv

# The checkout `make up-real-node` runs this in: its demo project (.state/demo, which `make demo`
# wrote there), its scripts and state. Not resolved through links: the README's test runs the
# block from a checkout of its own whose lab/ links to the repository's (tests/e2e/test_real_demo.py).
ROOT = Path(__file__).absolute().parents[1]
PY = str(ROOT / ".venv" / "bin" / "python")
DEMO = ROOT / ".state" / "demo"
# hack/cluster.sh's cluster, which `make up` and `make status` use (TFK8S_CLUSTER_NAME, `tfk8s` unset).
CLUSTER = os.environ.get("TFK8S_CLUSTER_NAME") or "tfk8s"
PLATFORM, TENANT, STACK, EXPERIMENTER = "platform-dev", "tenant-alice", "dev", "alice"
VOLUMES = ROOT / ".state" / "real-node-volumes"
# The dev experiment's one cluster (stacks/Pulumi.dev.yaml) and what the real node's two cores
# hold beside the tenant's Jupyter, TensorBoard and gate.
DEV_CLUSTER = "mnist"
SIZES = {
    "tfk8s:clusters[0].ps.cpu": "200m",
    "tfk8s:clusters[0].ps.memory": "1Gi",
    "tfk8s:clusters[0].workers.cpu": "300m",
    "tfk8s:clusters[0].workers.memory": "1500Mi",
}
APP_CPU = "300m"  # each tenant app's CPU (its memory: realnode.platform_on_the_node's)
FIRST_STEP_TIMEOUT = 900


def team(*args: str) -> list[str]:
    """A command in the team's environment (`make env`), in the demo's project."""
    return ["bash", "-c", 'eval "$(hack/env.sh)" && exec "$@"', "team", *args]


def experimenter(*args: str) -> list[str]:
    """A command in alice's own environment: her kubeconfig, her state (hack/env.sh --tenant)."""
    return ["bash", "-c", f'eval "$(hack/env.sh --tenant {EXPERIMENTER})" && exec "$@"', EXPERIMENTER, *args]


def run(command: Sequence[str], *, quiet: bool = False) -> None:
    """`command` from the checkout; its output shown unless `quiet`; a failure ends the demo naming it."""
    done = subprocess.run(command, cwd=ROOT, text=True, stdout=subprocess.PIPE if quiet else None)
    if done.returncode != 0:
        # team() and experimenter() wrap the command in `bash -c SCRIPT NAME`: name what ran.
        shown = command[4:] if command[0] == "bash" else command
        raise SystemExit(f"up-real-node: `{' '.join(shown)}` exited {done.returncode}")


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, help="the dev experiment's training steps (the trainer's default when unset)")
    args = parser.parse_args(argv)
    reason = realnode.why_not(CLUSTER)
    if reason:
        print(
            f"up-real-node: this machine cannot run a real node: {reason} (`make real-node-deps` installs what it can)",
            file=sys.stderr,
        )
        return 2
    started = time.monotonic()
    marks: list[tuple[str, float]] = []

    def mark(what: str) -> None:
        marks.append((what, time.monotonic() - started))
        print(f"[up-real-node {marks[-1][1]:6.0f} s] {what}", file=sys.stderr, flush=True)

    run(["hack/cluster.sh", "start", "--real-node"])
    node = realnode.node_name(CLUSTER)
    realnode.untaint(CLUSTER)
    mark(f"cluster up, with the real node {node}")
    tensorflow, jupyter = realnode.import_image(CLUSTER, "tensorflow"), realnode.import_image(CLUSTER, "jupyter")
    mark("images imported")

    platform = {
        **realnode.platform_on_the_node(VOLUMES, tensorflow=tensorflow, jupyter=jupyter, app_cpu=APP_CPU),
        **realnode.shared_user_node(node),
    }
    for stack in (PLATFORM, TENANT):
        run([PY, "hack/project.py", "share-salt", str(DEMO / "stacks" / f"Pulumi.{stack}.yaml")], quiet=True)
        run(team("pulumi", "--cwd", str(DEMO), "stack", "select", "--create", stack), quiet=True)
    for path, value in platform.items():
        run(team("pulumi", "--cwd", str(DEMO), "config", "set", "--stack", PLATFORM, "--path", path, value), quiet=True)
    run(team("pulumi", "--cwd", str(DEMO), "up", "--stack", PLATFORM, "--yes", "--skip-preview", "--refresh"))
    run(team("pulumi", "--cwd", str(DEMO), "up", "--stack", TENANT, "--yes", "--skip-preview", "--refresh"))
    mark("platform and tenant up")

    realnode.give_volumes_to_pods(toolenv.CACHE / "kwok" / f"{CLUSTER}.kubeconfig", [f"{STACK}/{DEV_CLUSTER}"])
    run(["hack/cluster.sh", "user-kubeconfig", EXPERIMENTER], quiet=True)
    run(experimenter("pulumi", "--cwd", str(DEMO), "stack", "select", "--create", STACK), quiet=True)
    experiment = [["--path", path, value] for path, value in SIZES.items()] + realnode.placement(0)
    if args.steps:
        experiment.append(["--path", "tfk8s:clusters[0].args[0]", f"--steps={args.steps}"])
    for config in experiment:
        run(experimenter("pulumi", "--cwd", str(DEMO), "config", "set", "--stack", STACK, *config), quiet=True)
    run(experimenter("pulumi", "--cwd", str(DEMO), "up", "--stack", STACK, "--yes", "--skip-preview", "--refresh"))
    mark("experiment up")

    step = first_step()
    mark(f"first step seen in `tfk8s status`: {DEV_CLUSTER} at step {step}")
    print(f"up-real-node: now `make status WATCH=1` (as {EXPERIMENTER}); `make down` stops it all", file=sys.stderr)
    return 0


def first_step() -> int:
    """The first step > 0 `tfk8s status --json` reports for the dev cluster, as alice sees it."""
    status = experimenter(PY, "-m", "tfk8s.cli", "status", "--stack", STACK, "--cwd", str(DEMO), "--json")
    deadline = time.monotonic() + FIRST_STEP_TIMEOUT
    while time.monotonic() < deadline:
        done = subprocess.run(status, cwd=ROOT, capture_output=True, text=True)
        if done.returncode == 0:
            cluster = json.loads(done.stdout).get("clusters", {}).get(DEV_CLUSTER, {})  # one document without --watch
            if cluster.get("step"):
                return int(cluster["step"])
        time.sleep(2)
    raise SystemExit(
        f"up-real-node: no training step in `tfk8s status` after {FIRST_STEP_TIMEOUT} s (last: {done.stderr.strip()[-500:]})"
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
