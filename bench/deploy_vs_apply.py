"""Time to readiness of a new experiment: `pulumi up` vs `kubectl apply` + `kubectl wait` of the same
objects, and tfk8s's fixed cost over Pulumi's own floor.

On a throwaway kwok cluster (`tfk8s-bench`, started and deleted by this script; the `make up`
cluster is never touched) the platform-dev platform and its tenant-alice tenant are deployed
once; then, for the dev experiment of that tenant (1 cluster) and a 3-cluster experiment, alternating:
  1. `pulumi up` of the experiment until it returns (it waits for PS and workers itself), then a
     no-change `pulumi up` (its program's phases timed, tfk8s.timings) and a `pulumi preview`;
     then destroy; with `--baseline REV[,REV...]`, the same for the program as of each git
     revision, in the environment that revision's own `make env` prints and with the salt its
     tooling gave a new stack, beside this tree's: before and after, or a ladder of the changes in
     between, in one run;
  2. the same experiment program rendered to YAML (the provider's `render_yaml_to_directory`),
     applied with `kubectl apply --server-side` and waited on with `kubectl wait` for the same
     conditions; then deleted;
  3. the floor: a no-change `pulumi up` of a Python program that only imports `pulumi` and exports
     one value, with the same CLI, virtualenv and backend, in each program's environment (a
     revision's own language host, Pulumi's automatic logs as that program has them); and what
     single pieces add to it in this tree's (the SDK's Kubernetes imports, one ConfigMap, two stack
     reads with salts of their own or the reader's): see `floors`.
Ratios are pulumi / kubectl. The pulumi side is the plain CLI with tfk8s's language host, in the
environment `make env` prints, timed as a user typing `pulumi up` waits. The rendered YAML holds
Secrets in plain text: it lives in a temporary directory that is removed at the end.

    make tools && .venv/bin/python bench/deploy_vs_apply.py [--repeat 3] [--baseline REV[,REV...]]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "infra"), str(ROOT / "lab"), str(ROOT / "bench")]

from rendering import RenderedExperiment, render_experiment  # noqa: E402
from tfk8s.kube.objects import provider_version  # noqa: E402

import toolenv  # noqa: E402

KUBECTL = toolenv.KUBECTL
CLUSTER = "tfk8s-bench"


def three_clusters() -> list[dict[str, Any]]:
    base = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())["config"]["tfk8s:clusters"][0]
    return [dict(copy.deepcopy(base), name=f"c{c}") for c in range(3)]


def kubectl(*args: str) -> str:
    return subprocess.run(
        [KUBECTL, "--kubeconfig", os.environ["KUBECONFIG"], *args], check=True, capture_output=True, text=True
    ).stdout


@dataclass(frozen=True)
class Program:
    """A version of the tfk8s program, in a project copy of its own, and its experiment stack."""

    label: str
    work: Path
    stack: str
    env: dict[str, str]  # the environment its own `make env` prints: each revision's settings and host, not ours

    @property
    def stack_file(self) -> Path:
        return self.work / "stacks" / f"Pulumi.{self.stack}.yaml"


def set_clusters(program: Program, clusters: list[dict[str, Any]]) -> None:
    config = yaml.safe_load(program.stack_file.read_text())
    config["config"]["tfk8s:clusters"] = clusters
    program.stack_file.write_text(yaml.safe_dump(config))


def timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def pulumi_cli(work: Path, *args: str, stack: str = "dev", env: dict[str, str] | None = None) -> float:
    """Seconds one plain `pulumi` command takes, as a user typing it waits (in `env`, else ours)."""
    started = time.perf_counter()
    done = subprocess.run(
        ["pulumi", *args, "--stack", stack, "--non-interactive", "--color", "never"],
        cwd=work,
        capture_output=True,
        text=True,
        env=env or dict(os.environ),
    )
    if done.returncode != 0:
        raise SystemExit(f"pulumi {' '.join(args)} --stack {stack} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return time.perf_counter() - started


BASE = ("platform-dev", "tenant-alice")  # what the dev experiment builds on, in deploy order


def init(work: Path, stack: str, env: dict[str, str] | None = None) -> None:
    argv = ["pulumi", "stack", "init", stack, "--non-interactive"]
    subprocess.run(argv, cwd=work, check=True, capture_output=True, env=env or dict(os.environ))


def platform(work: Path) -> None:
    """The running platform and tenant every experiment is measured against (deployed once, not
    timed), the tenant sharing the platform's salt as `make up` creates it (hack/project.py
    share-salt)."""
    os.environ["PULUMI_BACKEND_URL"] = f"file://{work / 'state'}"
    for stack in (*BASE, "dev", "render"):
        toolenv.share_salt(work / "stacks" / f"Pulumi.{stack}.yaml")
        init(work, stack)
    for stack in BASE:
        pulumi_cli(work, "up", "--yes", "--skip-preview", stack=stack)


def revision_env(tree: Path, ours: dict[str, str]) -> dict[str, str]:
    """The environment a revision's own `make env` (hack/env.sh) prints, on the bench's cluster and
    backend: without what our env.sh adds (a setting a later revision introduced), with its own."""
    base = {k: v for k, v in os.environ.items() if k not in ours}
    base.update({"KUBECONFIG": os.environ["KUBECONFIG"], "PULUMI_BACKEND_URL": os.environ["PULUMI_BACKEND_URL"]})
    return {**base, **toolenv.exported(tree=tree, base=base)}


def revision_project(revision: str, into: Path, ours: dict[str, str]) -> dict[str, str]:
    """The project as of `revision`, copied into `into` beside ours (same virtualenv; its own infra/
    and training/, which its entry point puts first on the path), and the environment to run its
    `pulumi` commands in: the one its own hack/env.sh prints, on the bench's cluster and backend,
    with its own language host (toolenv.language_host) and, before hack/env.sh turned them off,
    Pulumi's automatic logs."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    (into / ".venv").symlink_to(ROOT / ".venv")
    env = revision_env(into, ours)
    # Its own language host, built as its hack/tools.sh built it (the Python host until 2026-11-26).
    env["PATH"] = f"{toolenv.language_host(revision)}{os.pathsep}{env['PATH']}"
    if not toolenv.turns_off_pulumi_logs(into):
        env = toolenv.with_automatic_logs(env, into / ".pulumi-home")
    return env


def shares_salts(tree: Path) -> bool:
    """Whether the tooling of `tree` (another revision's project) gives a stack the salt of the stack
    it builds on (hack/project.py share-salt, or hack/toolenv.py before the workshop left hack/ for lab/)."""
    helpers = [tree / "hack" / name for name in ("project.py", "toolenv.py")]
    return any(path.exists() and "def share_salt" in path.read_text() for path in helpers)


def baseline(revision: str, into: Path, ours: dict[str, str], upstream_salt: str, of: str = "dev") -> Program:
    """The program as of `revision` (revision_project), with its stack `<of>-<revision>`: that
    revision's stack file `of` (the dev experiment; bench/new_tenant.py a tenant), with the salt of
    the stack it builds on if that revision's tooling shares salts, else a salt of its own, as
    `pulumi stack init` made it then."""
    env = revision_project(revision, into, ours)
    stack = f"{of}-{revision}"
    salt = f"encryptionsalt: {upstream_salt}\n" if shares_salts(into) else ""
    stacks = into / "stacks"
    (stacks / f"Pulumi.{stack}.yaml").write_text(salt + (stacks / f"Pulumi.{of}.yaml").read_text())
    init(into, stack, env)
    return Program(revision, into, stack, env)


FLOOR = "import pulumi\n{body}\npulumi.export('ready', True)\n"


def floor_env(program: Program) -> dict[str, str]:
    """The program's environment for the floor's stack, which lives in the bench's own state under its passphrase."""
    secrets_env = {k: os.environ[k] for k in PASSPHRASE_VARIABLES if k in os.environ}
    kept = {k: v for k, v in program.env.items() if k not in PASSPHRASE_VARIABLES}
    return {**kept, **secrets_env, "PULUMI_BACKEND_URL": os.environ["PULUMI_BACKEND_URL"]}


PASSPHRASE_VARIABLES = ("PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE")


def floor_of(program: Program) -> str:
    """The name of a program's floor: the empty program run in that program's environment (its
    language host; Pulumi's automatic logs on or off, as for the program)."""
    return f"floor as {program.label} runs"


# What an experiment's program imported of pulumi_kubernetes before tfk8s.kube.objects.
K8S_MODULES = ("core.v1", "apps.v1", "batch.v1", "networking.v1", "rbac.v1", "apiextensions")


def reads(project: str, upstream: str) -> str:
    """Two stack outputs read before declaring anything, as an experiment reads its tenant's and platform's."""
    return "if pulumi.get_stack() == 'floor':  # the read stacks themselves read nothing\n" + "".join(
        f"    pulumi.runtime.invoke('pulumi:pulumi:readStackOutputs', {{'name': 'organization/{project}/{upstream}{n}'}})\n"
        for n in (1, 2)
    )


@dataclass(frozen=True)
class Floor:
    """A program at Pulumi's floor, in a project of its own, and what its no-change `up` measures."""

    label: str
    work: Path


def floors(into: Path) -> list[Floor]:
    """Programs at Pulumi's floor, with the same runtime options, language host, virtualenv and
    backend as tfk8s's project, each deployed once so that its no-change `up` changes nothing:
    `pulumi` alone; with the pulumi_kubernetes modules tfk8s imported; with one ConfigMap (the
    provider's start and configuration, paid by any program with a Kubernetes resource, without
    the SDK's imports); reading
    two stacks' outputs whose salts are their own (the passphrase provider derives each salt's key:
    1,000,000 PBKDF2 rounds) and whose salt is the reader's."""
    programs = {
        "floor": ("", None),
        "floor + the SDK's Kubernetes imports": ("".join(f"import pulumi_kubernetes.{m}\n" for m in K8S_MODULES), None),
        # Registered as tfk8s.kube.objects does, without the SDK's classes: the provider alone.
        "floor + one ConfigMap": (
            "pulumi.CustomResource('kubernetes:core/v1:ConfigMap', 'floor', {'apiVersion': 'v1', 'kind': 'ConfigMap', "
            "'metadata': {'namespace': 'default'}, 'data': {'a': 'b'}}, "
            f"pulumi.ResourceOptions(version={provider_version()!r}))\n",
            None,
        ),
        "floor + 2 stack reads, salts of their own": ("", "own"),
        "floor + 2 stack reads, the reader's salt": ("", "shared"),
    }
    found = []
    for i, (label, (body, upstream)) in enumerate(programs.items()):
        program = FLOOR.format(body=body + (reads(f"floor{i}", upstream) if upstream else ""))
        work = toolenv.program_project(into / f"floor{i}", f"floor{i}", program)
        init(work, "floor")
        if upstream:
            salt = yaml.safe_load((work / "stacks" / "Pulumi.floor.yaml").read_text())["encryptionsalt"]
            for n in (1, 2):
                if upstream == "shared":
                    (work / "stacks" / f"Pulumi.{upstream}{n}.yaml").write_text(f"encryptionsalt: {salt}\n")
                init(work, f"{upstream}{n}")
                pulumi_cli(work, "up", "--yes", "--skip-preview", stack=f"{upstream}{n}")
        pulumi_cli(work, "up", "--yes", "--skip-preview", stack="floor")
        found.append(Floor(label, work))
    return found


def phases(path: Path, started: float, ended: float) -> dict[str, float]:
    """The program's phases (tfk8s.timings) of one command, as seconds each took, with the CLI's
    own start (up to the program's first mark) and end (after the program's process ended)."""
    marks = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    path.unlink(missing_ok=True)
    if not marks:
        return {}
    result, previous = {}, started
    for mark in marks:
        name = "CLI, engine and host start, SDK import" if mark["phase"] == "start" else mark["phase"]
        result[name] = mark["time"] - previous
        previous = mark["time"]
    result["after the program: engine, state, exit"] = ended - previous
    return result


def pulumi_side(program: Program, timeline: Path) -> dict[str, float]:
    work, stack, env = program.work, program.stack, program.env
    result = {"up": pulumi_cli(work, "up", "--yes", "--skip-preview", stack=stack, env=env)}
    argv = ["pulumi", "stack", "output", "ready", "--stack", stack]
    ready = subprocess.run(argv, cwd=work, capture_output=True, text=True, env=env)
    assert ready.stdout.strip() == "true", ready.stdout + ready.stderr
    started = time.time()
    timings = {**env, "TFK8S_TIMINGS": str(timeline)}
    result["up (no change)"] = pulumi_cli(work, "up", "--yes", "--skip-preview", stack=stack, env=timings)
    result.update({f"phase: {k}": v for k, v in phases(timeline, started, time.time()).items()})
    result["preview"] = pulumi_cli(work, "preview", stack=stack, env=env)
    pulumi_cli(work, "destroy", "--yes", stack=stack, env=env)
    return result


def as_experimenter(work: Path, into: Path) -> Program:
    """This tree's dev experiment as the quick start runs it (`hack/env.sh --tenant alice`): alice's
    own client certificate, state store and passphrase (its salt her own), nothing of the platform
    team's. Its stack `dev-alice` shares the namespace with the others: another experiment name."""
    minted = subprocess.run(
        [str(ROOT / "hack" / "cluster.sh"), "user-kubeconfig", "alice"],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "TFK8S_CLUSTER_NAME": CLUSTER},
    )
    (into / "state").mkdir(parents=True)
    env = {
        **os.environ,
        "KUBECONFIG": minted.stdout.strip(),
        "PULUMI_BACKEND_URL": f"file://{into / 'state'}",
        "PULUMI_CONFIG_PASSPHRASE": secrets.token_urlsafe(24),
    }
    env.pop("PULUMI_CONFIG_PASSPHRASE_FILE", None)
    # The repository's stack file, without a salt: `stack init` gives it one of her passphrase.
    (work / "stacks" / "Pulumi.dev-alice.yaml").write_text((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())
    init(work, "dev-alice", env)
    return Program("this tree, as alice: her certificate, state and passphrase", work, "dev-alice", env)


def kubectl_side(work: Path) -> dict[str, float]:
    out = Path(tempfile.mkdtemp(prefix="tfk8s-render-"))
    try:
        render_experiment(work, out, "dev")
        rendered = RenderedExperiment.load(out)

        def apply_and_wait(workers_ready: str) -> None:
            rendered.apply(kubectl)
            for ns in rendered.namespaces:
                kubectl("wait", "-n", ns, "--for=condition=Available", "deployment", "-l", "tfk8s.io/role=ps", "--timeout=300s")
                if workers_ready == "pods":
                    kubectl("wait", "-n", ns, "--for=condition=Ready", "pod", "-l", "tfk8s.io/role=worker", "--timeout=300s")
            if workers_ready == "job":
                for job in rendered.jobs:
                    ready = f"--for=jsonpath={{.status.ready}}={job['spec']['parallelism']}"
                    kubectl("wait", "-n", job["metadata"]["namespace"], ready, f"job/{job['metadata']['name']}", "--timeout=300s")

        # Two ways to wait for the workers, each from an empty cluster:
        # - "job": the Job's own .status.ready, the condition `pulumi up` awaits (see awaits.py);
        # - "pods": each worker pod's Ready condition; the Job controller batches status updates
        #   (up to 1 s), so this sees the same fact earlier than any wait on the Job can.
        result = {}
        for workers_ready in ("job", "pods"):
            result[f"apply+wait ({workers_ready})"] = timed(lambda: apply_and_wait(workers_ready))  # noqa: B023
            rendered.delete(kubectl)
        return result
    finally:
        shutil.rmtree(out, ignore_errors=True)


Compare = Callable[[int, list[str], dict[str, str]], None]


def ladder(description: str, compare: Compare) -> None:
    """The command line of a bench that runs this tree's program beside --baseline revisions' (this
    one, bench/new_tenant.py): parses it, times as a user's shell does, and calls `compare(repeat,
    revisions, our environment)` on a throwaway cluster."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side; medians are reported")
    parser.add_argument(
        "--baseline",
        default="",
        help="git revisions, comma-separated, whose programs run beside this one's, each in its own environment "
        "(before and after, or a ladder of the changes in between)",
    )
    args = parser.parse_args()
    toolenv.time_as_a_user()
    with toolenv.throwaway_cluster("tfk8s-bench") as kubeconfig:
        ours = toolenv.exported({"KUBECONFIG": str(kubeconfig)})
        os.environ.update(ours)
        compare(args.repeat, [r for r in args.baseline.split(",") if r], ours)


def main() -> None:
    ladder(__doc__ or "", compare)


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(run.get(key, 0.0) for run in runs) for key in runs[0]}


def compare(repeat: int, revisions: list[str], ours: dict[str, str]) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="tfk8s-bench-"))
    work = toolenv.project_copy(scratch / "after")
    platform(work)
    tenant_salt = yaml.safe_load((work / "stacks" / "Pulumi.tenant-alice.yaml").read_text())["encryptionsalt"]
    programs = [baseline(r, scratch / r, ours, tenant_salt) for r in revisions]
    programs.append(Program("this tree", work, "dev", dict(os.environ)))
    programs.append(as_experimenter(work, scratch / "alice"))
    # The same program with Pulumi's automatic logs (hack/env.sh turns them off): what they cost.
    with_logs = toolenv.with_automatic_logs(os.environ, scratch / "pulumi-home-with-logs")
    programs.append(Program("this tree, Pulumi's automatic logs on", work, "dev", with_logs))
    floor_programs = floors(scratch)
    timeline = scratch / "timings.jsonl"
    print(f"a new experiment on a running platform; medians of {repeat} runs per side, sides alternating")
    print(
        "| experiment | program | pulumi up (s) | apply+wait, Job ready (s) | ratio | no-change up (s) "
        "| floor: empty program's no-change up (s) | tfk8s's fixed cost over the floor (s) | preview (s) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    base_clusters = {p.label: yaml.safe_load(p.stack_file.read_text())["config"]["tfk8s:clusters"] for p in programs}
    timed_phases: dict[str, dict[str, float]] = {}
    for label, clusters in (("dev (1 cluster: 1 PS, 2 workers)", None), ("3 clusters", three_clusters())):
        for program in programs:
            set_clusters(program, clusters or base_clusters[program.label])
        theirs_runs, floor_runs = [], []
        ours_runs: dict[str, list[dict[str, float]]] = {p.label: [] for p in programs}
        for _ in range(repeat):
            theirs_runs.append(kubectl_side(work))
            for program in programs:
                ours_runs[program.label].append(pulumi_side(program, timeline))
            runs = {f.label: pulumi_cli(f.work, "up", "--yes", "--skip-preview", stack="floor") for f in floor_programs}
            # Each program's own floor: the empty program in that program's environment, with its
            # language host, and Pulumi's automatic logs as that program has them.
            for program in programs:
                runs[floor_of(program)] = pulumi_cli(
                    floor_programs[0].work, "up", "--yes", "--skip-preview", stack="floor", env=floor_env(program)
                )
            floor_runs.append(runs)
        theirs, floor = medians(theirs_runs), medians(floor_runs)
        job = theirs["apply+wait (job)"]
        for program in programs:
            measured = medians(ours_runs[program.label])
            its_floor = floor[floor_of(program)]
            print(
                f"| {label} | {program.label} | {measured['up']:.2f} | {job:.2f} | {measured['up'] / job:.2f} "
                f"| {measured['up (no change)']:.2f} | {its_floor:.2f} | {measured['up (no change)'] - its_floor:.2f} "
                f"| {measured['preview']:.2f} |",
                flush=True,
            )
            if clusters is None:
                timed_phases[program.label] = {
                    k.removeprefix("phase: "): v for k, v in measured.items() if k.startswith("phase: ")
                }
        if clusters is None:
            floors_line = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in floor.items())
            print(f"\nfloors (no-change up, medians): {floors_line}\n")
    for program_label, spent in timed_phases.items():
        if spent:
            print(f"\nthe dev experiment's no-change `up`, {program_label}, by phase (medians, seconds):\n")
            print("| phase | s |\n|---|---:|")
            for phase, seconds in spent.items():
                print(f"| {phase} | {seconds:.3f} |")
    for stack in reversed(BASE):
        pulumi_cli(work, "destroy", "--yes", stack=stack)


if __name__ == "__main__":
    main()
