"""Time of a new tenant's `pulumi up`: this tree's program beside earlier revisions', in one run.

On a throwaway kwok cluster (`tfk8s-bench`, started and deleted by this script; the `make up`
cluster is never touched) the platform-dev platform is deployed once (not timed). Then, alternating
between the programs, each from no tenant: the plain `pulumi up` of the tenant-bob stack until it
returns (it waits for the claims Bound and Jupyter and TensorBoard available), its `ready` output
checked, a no-change `pulumi up`, then `pulumi destroy` (each program a user of its own, whose
namespace and volumes go with the destroy: `own_user`). With `--baseline REV[,REV...]` the same
for the program as of each git revision, in the environment that revision's own `make env` prints
(deploy_vs_apply.baseline). Medians of `--repeat`; every command timed as a user's shell runs it
(toolenv.time_as_a_user).

    make tools && .venv/bin/python bench/new_tenant.py [--repeat 3] [--baseline REV[,REV...]]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "lab"), str(ROOT / "bench")]

from deploy_vs_apply import Program, baseline, init, ladder, pulumi_cli  # noqa: E402

import toolenv  # noqa: E402

PLATFORM, TENANT = "platform-dev", "tenant-bob"


def own_user(program: Program, user: str) -> None:
    """A user name of the program's own, whose namespace and volumes go with its destroy: a tenant's
    namespace and claims are otherwise kept (`volumes.keepOnDestroy`, docs/concepts/architecture.md "Data survival"), and
    only the stack that made them may take them back, so each program's runs start from nothing."""
    config = yaml.safe_load(program.stack_file.read_text())
    tenant = config["config"]["tfk8s:tenant"]
    tenant["name"] = user
    tenant.setdefault("volumes", {})["keepOnDestroy"] = False
    program.stack_file.write_text(yaml.safe_dump(config))


def new_tenant(program: Program) -> dict[str, float]:
    work, stack, env = program.work, program.stack, program.env
    result = {"up": pulumi_cli(work, "up", "--yes", "--skip-preview", stack=stack, env=env)}
    argv = ["pulumi", "stack", "output", "ready", "--stack", stack]
    ready = subprocess.run(argv, cwd=work, capture_output=True, text=True, env=env)
    assert ready.stdout.strip() == "true", ready.stdout + ready.stderr
    result["up (no change)"] = pulumi_cli(work, "up", "--yes", "--skip-preview", stack=stack, env=env)
    result["destroy"] = pulumi_cli(work, "destroy", "--yes", stack=stack, env=env)
    return result


def compare(repeat: int, revisions: list[str], ours: dict[str, str]) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="tfk8s-bench-"))
    work = toolenv.project_copy(scratch / "after")
    os.environ["PULUMI_BACKEND_URL"] = f"file://{work / 'state'}"
    for stack in (PLATFORM, TENANT):
        toolenv.share_salt(work / "stacks" / f"Pulumi.{stack}.yaml")
        init(work, stack)
    pulumi_cli(work, "up", "--yes", "--skip-preview", stack=PLATFORM)
    salt = yaml.safe_load((work / "stacks" / f"Pulumi.{PLATFORM}.yaml").read_text())["encryptionsalt"]
    programs = [baseline(r, scratch / r, ours, salt, of=TENANT) for r in revisions]
    programs.append(Program("this tree", work, TENANT, dict(os.environ)))
    for i, program in enumerate(programs):
        own_user(program, f"bench{i}")
    runs: dict[str, list[dict[str, float]]] = {p.label: [] for p in programs}
    for _ in range(repeat):
        for program in programs:
            runs[program.label].append(new_tenant(program))
    print(f"a new tenant ({TENANT}) on a running platform; medians of {repeat} runs per program, programs alternating\n")
    print("| program | pulumi up, new tenant (s) | no-change up (s) | destroy (s) |\n|---|---:|---:|---:|")
    for program in programs:
        m = {key: statistics.median(run[key] for run in runs[program.label]) for key in runs[program.label][0]}
        print(f"| {program.label} | {m['up']:.2f} | {m['up (no change)']:.2f} | {m['destroy']:.2f} |", flush=True)
    pulumi_cli(work, "destroy", "--yes", stack=PLATFORM)


def main() -> None:
    ladder(__doc__ or "", compare)


if __name__ == "__main__":
    main()
