"""`pulumi preview` of a platform with 100 users vs `kubectl diff --server-side` of the same objects.

On a throwaway kwok cluster (`tfk8s-bench-preview`, started and deleted here, with the state) a
platform stack with 100 users is deployed once with `pulumi up` (timed too, without
checkpoints). Then, alternating, --repeat times:
  * `pulumi preview` of that stack (no change: the program runs, the provider diffs every
    resource against its state), as a user typing it waits;
  * `kubectl diff --server-side` of the same program rendered to YAML (the provider's
    `render_yaml_to_directory`): a server-side dry-run apply and diff of every object
    (`--force-conflicts`: the rendering stack's owner labels are Pulumi's fields).
Medians, ms per resource, ratio pulumi / kubectl. The rendered YAML holds Secrets in plain text:
it lives in a temporary directory that is removed at the end.

    make tools && .venv/bin/python bench/platform_preview.py [--users 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "infra"), str(ROOT / "hack"), str(ROOT / "bench")]

from rendering import render  # noqa: E402

import toolenv  # noqa: E402

STACK = "platform-bench"


def kubectl(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [toolenv.KUBECTL, "--kubeconfig", os.environ["KUBECONFIG"], *args], check=check, capture_output=True, text=True
    )


def make_room_on_user_node(users: int) -> None:
    """A 100-user platform needs a User Node with room for 200 pods (kubelet --max-pods), more
    than kubelet's default 110 that hack/kwok/nodes.yaml gives it (tfk8s refuses the stack then)."""
    pods = str(users * 2 + 10)
    room = {"status": {"capacity": {"pods": pods}, "allocatable": {"pods": pods}}}
    kubectl("patch", "node", "tfk8s-user-node", "--subresource=status", "--type=merge", "-p", json.dumps(room))


def stack_config(users: int) -> dict[str, Any]:
    config = yaml.safe_load((ROOT / "stacks" / "Pulumi.platform-dev.yaml").read_text())["config"]
    config["tfk8s:users"] = [{"name": f"user{u}", "volumes": {"dataSize": "1Gi", "logSize": "1Gi"}} for u in range(users)]
    return config


def timed(argv: list[str], cwd: Path | None = None, ok: tuple[int, ...] = (0,)) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    assert done.returncode in ok, done.stdout[-2000:] + done.stderr[-2000:]
    return elapsed


def render_platform(work: Path, out: Path, stack_config: dict[str, Any]) -> None:
    from tfk8s import program
    from tfk8s.schema_platform import PlatformStack
    from tfk8s.stack_config import load

    def declare() -> None:
        stack = load()
        assert isinstance(stack, PlatformStack)
        program.run_platform(stack, None, None, {}, ROOT)

    render(work, out, stack_config, declare)


def measure(users: int, repeat: int) -> None:
    work = toolenv.project_copy(Path(tempfile.mkdtemp(prefix="tfk8s-bench-")))
    out = Path(tempfile.mkdtemp(prefix="tfk8s-render-"))
    os.environ["PULUMI_BACKEND_URL"] = f"file://{work / 'state'}"
    config = stack_config(users)
    (work / "stacks" / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump({"config": config}))
    pulumi = ["pulumi", "--stack", STACK, "--non-interactive", "--color", "never"]
    make_room_on_user_node(users)
    try:
        subprocess.run(["pulumi", "stack", "init", STACK, "--non-interactive"], cwd=work, check=True, capture_output=True)
        # Set-up, not the measure: without checkpoints, because the file backend rewrites the whole
        # state after every step (quadratic: ~10 min for 1,800 resources here) and this state is thrown away.
        os.environ["PULUMI_SKIP_CHECKPOINTS"] = "true"
        up = timed([*pulumi[:1], "up", *pulumi[1:], "--yes", "--skip-preview"], cwd=work)
        del os.environ["PULUMI_SKIP_CHECKPOINTS"]
        resources = len(
            json.loads(
                subprocess.run(
                    ["pulumi", "stack", "export", "--stack", STACK], cwd=work, check=True, capture_output=True, text=True
                ).stdout
            )["deployment"]["resources"]
        )
        render_platform(work, out, config)
        docs = [d for f in sorted(out.rglob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
        manifest = out / "all.yaml"
        # The NodePatch renders as a Node manifest; a diff of a whole Node is not what the patch does.
        manifest.write_text(yaml.safe_dump_all([d for d in docs if d["kind"] != "Node"]))
        previews, diffs = [], []
        for _ in range(repeat):
            previews.append(timed([*pulumi[:1], "preview", *pulumi[1:]], cwd=work))
            # exit 1: differences found (the rendering stack's auto-names and owner labels differ from the
            # deployed ones), still a full diff; --force-conflicts: those labels are Pulumi's fields.
            diffs.append(
                timed(
                    [toolenv.KUBECTL, "--kubeconfig", os.environ["KUBECONFIG"], "diff", "--server-side", "--force-conflicts"]
                    + ["-f", str(manifest)],
                    ok=(0, 1),
                )
            )
        preview, diff = statistics.median(previews), statistics.median(diffs)
        print(
            f"platform with {users} users: {resources} resources in state, {len(docs)} rendered objects; "
            f"first `pulumi up` (PULUMI_SKIP_CHECKPOINTS=true) {up:.1f} s"
        )
        print("| | median (s) | ms per resource | ratio |")
        print("|---|---:|---:|---:|")
        print(f"| pulumi preview (no change) | {preview:.1f} | {preview * 1e3 / resources:.1f} | {preview / diff:.2f} |")
        print(f"| kubectl diff --server-side | {diff:.1f} | {diff * 1e3 / len(docs):.1f} | 1 |", flush=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with toolenv.throwaway_cluster("tfk8s-bench-preview") as kubeconfig:
        os.environ.update(toolenv.exported({"KUBECONFIG": str(kubeconfig)}))
        measure(args.users, args.repeat)


if __name__ == "__main__":
    main()
