"""A fleet: a platform team onboarding N new tenants through the GitOps apply, P stacks at a time.

What a platform team waits for when one commit adds N tenant stack files (issue 40, "Fleets": 1,000
tenants' first `up` in at most 30 minutes, stated with the parallelism used): the wall time of

    hack/gitops.sh apply --base <before> --head <after> --parallel P [--policy-pack none]

exactly as `make apply-fleet` and CI run it, from the command's start to its exit (the environment
`make env` prints, its plan, the backend's stack listing, each tenant's `stack init` and `pulumi up`
with the policy pack, its `ready` output, the summary).

On a throwaway kwok cluster (`tfk8s-bench-fleet`, started and deleted here, with the state):
  * a team repository: a git copy of this project holding platform-dev's stack file only, its state
    in a file backend of a temporary directory; platform-dev is applied first through the same
    command (not timed), its User Node given room for every tenant of every run (tenant_scale.py's
    `make_room_on_user_node`);
  * for each N in --sizes and each P in --parallel, once the machine is quiet (tenant_scale.py's
    `settle`): a commit adding N tenant stack files of fresh users (`fleet-<P>-<N>-<i>`: each run
    creates its own tenants, on a platform that holds the earlier runs'), applied with --parallel P;
    the run counts only if the command exits 0 and the summary says `ready` yes for all N tenants.
The policy pack runs, as in CI, when its virtualenv exists (`make policy-venv`); --no-policy-pack
runs without it (`--policy-pack none`). No tenant is destroyed: the cluster and the state are
thrown away at the end.

With --floor, after each N and P, Pulumi's floor for it on the same cluster and backend: N stacks of a
program with as many Kubernetes objects as a tenant (`FLOOR_OBJECTS`) and none of tfk8s's code (a
restricted namespace, a default-deny NetworkPolicy and a quota, which the policy pack asks every
namespace for, and ConfigMaps), each run as the pipeline runs a new tenant (`pulumi stack init
--no-select`, then `pulumi up --yes --skip-preview --diff` with the policy pack and an event log),
P at a time: what any Pulumi program of that size costs a fleet, and tfk8s's share over it.

--secrets passphrase,kms runs all of the above once per secrets provider, each on a cluster, backend
and platform of its own, one after the other: `passphrase` (a team passphrase; the pipeline gives a
new tenant its platform's salt), `kms` (`TFK8S_SECRETS_PROVIDER=awskms://...` of a local-kms the
bench starts, lab/kms.py, for every stack, the platform's included: no key derivation at all). A
run counts only if every stack the apply created holds the run's provider in its state.

A table gives per run the wall seconds, seconds per tenant, the speed-up over P=1 at the same N,
and 1,000 tenants extrapolated from the run's own cost per tenant (at the largest N: the per-tenant
cost at P=1 times 1,000 over the speed-up P reached, its effective parallelism).

    make tools && .venv/bin/python bench/fleet.py [--sizes 10,100] [--parallel 1,2] [--floor] [--secrets passphrase,kms]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "lab")]

from kms import local_kms  # noqa: E402
from tenant_scale import FLEET, PLATFORM, make_room_on_user_node, settle, tenant_config  # noqa: E402
from tfk8s_gitops.engine import Pulumi, Workspace  # noqa: E402

import toolenv  # noqa: E402

CLUSTER = "tfk8s-bench-fleet"
GITOPS = ROOT / "hack" / "gitops.sh"
POLICIES = ROOT / "policies"
NO_COMMIT = "0" * 40  # `--base` of a first push: every stack file of the head
GOAL_MINUTES = 30.0  # issue 40: 1,000 tenants' first `up`
SECRETS = ("passphrase", "kms")
# A row of the apply's summary table: | # | stack | kind | action | why | result | changes | policies | ready | time |
STEP_ROW = re.compile(r"^\| \d+ \|")
READY_COLUMN = 8


# A tenant's Kubernetes objects (tests/unit/test_bench_fleet.py counts them under mocks), which the
# floor's program declares as plain ones.
FLOOR_OBJECTS = 30
FLOOR_PROGRAM = f"""import pulumi
import pulumi_kubernetes as k8s

labels = {{f"pod-security.kubernetes.io/{{mode}}": "restricted" for mode in ("enforce", "warn", "audit")}}
metadata = {{"name": f"f-{{pulumi.get_stack()}}", "labels": labels}}
namespace = k8s.core.v1.Namespace("namespace", metadata=metadata).metadata["name"]
deny = {{"podSelector": {{}}, "policyTypes": ["Ingress", "Egress"]}}
k8s.networking.v1.NetworkPolicy("deny", metadata={{"namespace": namespace}}, spec=deny)
k8s.core.v1.ResourceQuota("quota", metadata={{"namespace": namespace}}, spec={{"hard": {{"pods": "10"}}}})
for i in range({FLOOR_OBJECTS - 3}):
    k8s.core.v1.ConfigMap(f"config{{i}}", metadata={{"namespace": namespace}}, data={{"key": "value"}})
pulumi.export("ready", True)
"""


def fleet_tenant(name: str) -> dict[str, Any]:
    """tenant_scale.py's tenant (one user, 1Gi volumes, the default quota, on platform-dev), for `name`."""
    config = tenant_config(0)
    config["tfk8s:tenant"] = {**config["tfk8s:tenant"], "name": name, "identities": {"users": [name]}}
    return config


@dataclass(frozen=True, kw_only=True)
class Run:
    n: int
    parallel: int
    seconds: float
    ready: int
    """Tenants whose summary row says `ready` yes."""
    returncode: int
    cpu: float
    """CPU seconds of the pipeline's processes (children_cpu), the cluster's not included."""
    busy_before: float
    load_after: float
    secrets: str
    provider_ok: bool = True
    """Every stack the run created holds the run's secrets provider."""
    floor: bool = False
    """A run of the floor's program, not of tenants."""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.ready == self.n and self.provider_ok


@dataclass(frozen=True, kw_only=True)
class Team:
    """The team's repository (a git copy of this project) and the pipeline's environment."""

    repo: Path
    summaries: Path
    policy_pack: bool

    def git(self, *args: str) -> str:
        argv = ["git", "-C", str(self.repo), *args]
        return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()

    def commit(self, message: str, stacks: dict[str, dict[str, Any]]) -> str:
        for stack, config in stacks.items():
            (self.repo / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": config}, sort_keys=False))
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    def declare(self, tenants: list[str]) -> str:
        """The team file's tenants, added to (tfk8s_gitops.repo.TEAM_FILE): the commit a new tenant's
        stack file must follow to run with the pipeline's credentials."""
        path = self.repo / "stacks" / "team.yaml"
        team = yaml.safe_load(path.read_text())
        team["tenants"] = [*team.get("tenants", []), *tenants]
        path.write_text(yaml.safe_dump(team, sort_keys=False))
        self.git("add", "-A")
        self.git("commit", "-q", "-m", f"the team declares {len(tenants)} new tenants")
        return self.git("rev-parse", "HEAD")

    def apply(self, label: str, base: str, head: str, parallel: int) -> tuple[float, float, int, str]:
        """`hack/gitops.sh apply` of base..head in the repository: wall seconds, CPU seconds of its
        process tree, exit code, summary."""
        summary = self.summaries / f"{label}.md"
        argv = [str(GITOPS), "apply", "--base", base, "--head", head, "--parallel", str(parallel), "--summary", str(summary)]
        argv += ["--policy-pack", str(POLICIES) if self.policy_pack else "none"]
        started, cpu = time.perf_counter(), children_cpu()
        done = subprocess.run(argv, cwd=self.repo, capture_output=True, text=True)
        seconds, cpu = time.perf_counter() - started, children_cpu() - cpu
        text = summary.read_text() if summary.exists() else ""
        if done.returncode != 0:
            print(f"{label}: exited {done.returncode}\n{(done.stdout + done.stderr)[-4000:]}", file=sys.stderr, flush=True)
        return seconds, cpu, done.returncode, text


def children_cpu() -> float:
    """User and system CPU seconds of this process's children that have exited, theirs included:
    the pipeline's CLIs, language hosts, programs, policy packs and providers (not the cluster's). A
    process its parent never waits for is not counted: Pulumi waits for its plugins."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def secrets_provider(stack: str) -> str:
    """The secrets provider of a stack's state in the file backend (the pipeline's workspaces are
    scratch copies: the repository's stack files never get one): `passphrase`, or the KMS's URL."""
    backend = Path(os.environ["PULUMI_BACKEND_URL"].removeprefix("file://"))
    found = list(backend.glob(f".pulumi/stacks/*/{stack}.json"))
    latest = json.loads(found[0].read_text())["checkpoint"].get("latest") if found else None
    providers = (latest or {}).get("secrets_providers") or {}
    return str(providers.get("state", {}).get("url") if providers.get("type") == "cloud" else providers.get("type"))


def ready_count(summary: str) -> int:
    """Steps of the summary's table whose `ready` is yes."""
    rows = [line.strip().strip("|").split("|") for line in summary.splitlines() if STEP_ROW.match(line)]
    return sum(len(cells) > READY_COLUMN and cells[READY_COLUMN].strip() == "yes" for cells in rows)


def team_repository(scratch: Path, policy_pack: bool) -> Team:
    """A copy of this project (toolenv.project_copy: Pulumi.yaml, infra/ and .venv linked) whose only
    stack file is platform-dev's, committed as a team's first push."""
    repo = toolenv.project_copy(scratch / "team")
    for stack_file in (repo / "stacks").glob("Pulumi.*.yaml"):
        if stack_file.name != f"Pulumi.{PLATFORM}.yaml":
            stack_file.unlink()
    (repo / "state").rmdir()  # the backend is outside the repository
    summaries = scratch / "summaries"
    summaries.mkdir()
    team = Team(repo=repo, summaries=summaries, policy_pack=policy_pack)
    team.git("init", "-q", "-b", "main")
    team.git("config", "user.email", "platform@example.com")
    team.git("config", "user.name", "platform team")
    (repo / "stacks" / "team.yaml").write_text(yaml.safe_dump({"platforms": [PLATFORM], "tenants": []}))
    team.commit("the project, and the team's platform", {})
    return team


def onboard(team: Team, n: int, parallel: int, settle_limit: float, secrets_kind: str) -> Run:
    """One commit adding N new tenants, applied P at a time once the machine is quiet, each of them
    with `secrets_kind` (passphrase, or the KMS of TFK8S_SECRETS_PROVIDER), as its state must say."""
    users = [f"fleet-{parallel}-{n}-{i}" for i in range(n)]
    base = team.declare([f"tenant-{user}" for user in users])
    head = team.commit(f"onboard {n} tenants", {f"tenant-{user}": fleet_tenant(user) for user in users})
    waited, fraction = settle(limit=settle_limit)
    print(f"N={n} P={parallel}: settled in {waited:.0f} s, the machine {fraction:.0%} busy", flush=True)
    seconds, cpu, returncode, summary = team.apply(f"fleet-{parallel}-{n}", base, head, parallel)
    expected = os.environ.get("TFK8S_SECRETS_PROVIDER") or "passphrase"
    providers = {secrets_provider(f"tenant-{user}") for user in users}
    if providers != {expected}:
        print(f"N={n} P={parallel}: the tenants' secrets providers are {sorted(providers)}, not {expected}", file=sys.stderr)
    run = Run(
        n=n,
        parallel=parallel,
        seconds=seconds,
        ready=ready_count(summary),
        returncode=returncode,
        cpu=cpu,
        busy_before=fraction,
        load_after=os.getloadavg()[0],
        secrets=secrets_kind,
        provider_ok=providers == {expected},
    )
    print(
        f"N={n} P={parallel} ({secrets_kind}): {seconds:.1f} s, exit {returncode}, ready {run.ready}/{n}, "
        f"load {run.load_after:.2f}",
        flush=True,
    )
    return run


def floor_step(cli: Pulumi, stack: str, policy_pack: bool) -> bool:
    """One new stack of the floor, as the pipeline runs a new tenant's step (its own commands:
    tfk8s_gitops.engine.Pulumi), with the pipeline's secrets provider."""
    provider = os.environ.get("TFK8S_SECRETS_PROVIDER")
    if cli.plain("stack", "init", stack, "--no-select", *(["--secrets-provider", provider] if provider else [])).returncode:
        return False
    pack = ["--policy-pack", str(POLICIES)] if policy_pack else []
    return cli.run(stack, "up", "--yes", "--skip-preview", "--diff", *pack).ok


def floor(cli: Pulumi, n: int, parallel: int, policy_pack: bool, settle_limit: float, secrets_kind: str) -> Run:
    """N new stacks of the floor's program, P at a time once the machine is quiet."""
    stacks = [f"floor-{parallel}-{n}-{i}" for i in range(n)]
    waited, fraction = settle(limit=settle_limit)
    started, cpu = time.perf_counter(), children_cpu()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        done = list(pool.map(lambda stack: floor_step(cli, stack, policy_pack), stacks))
    seconds, cpu = time.perf_counter() - started, children_cpu() - cpu
    run = Run(
        n=n,
        parallel=parallel,
        seconds=seconds,
        ready=sum(done),
        returncode=0 if all(done) else 1,
        cpu=cpu,
        busy_before=fraction,
        load_after=os.getloadavg()[0],
        secrets=secrets_kind,
        floor=True,
    )
    print(f"floor N={n} P={parallel}: settled in {waited:.0f} s; {seconds:.1f} s, {run.ready}/{n} up", flush=True)
    return run


def floor_report(runs: list[Run], floors: list[Run]) -> None:
    """Each floor run beside the tenants' run of the same N and P."""
    print(f"\nPulumi's floor: N new stacks of {FLOOR_OBJECTS} plain Kubernetes objects each, as the pipeline runs them")
    print(
        "| N | P | floor: seconds | s per stack | 1,000 stacks (min) | up | CPU-s per stack | "
        "tfk8s: s per tenant | tfk8s over the floor | tfk8s: CPU-s per tenant |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    tenants = {(run.n, run.parallel): run for run in runs}
    for run in floors:
        per = run.seconds / run.n
        tenant = tenants[(run.n, run.parallel)]
        own = tenant.seconds / run.n
        print(
            f"| {run.n} | {run.parallel} | {run.seconds:.1f} | {per:.2f} | {FLEET * per / 60:.0f} | "
            f"{run.ready}/{run.n}{'' if run.ok else ' ❌'} | {run.cpu / run.n:.2f} | {own:.2f} | {own - per:+.2f} | "
            f"{tenant.cpu / run.n:.2f} |"
        )


def report(runs: list[Run], policy_pack: bool) -> None:
    serial = {run.n: run.seconds for run in runs if run.parallel == 1 and run.ok}
    largest = max(run.n for run in runs)
    pack = "with the policy pack" if policy_pack else "without the policy pack (--policy-pack none)"
    print(
        f"\n[{runs[0].secrets}] `hack/gitops.sh apply --parallel P` of one commit adding N new tenants, {pack}; "
        f"kwok, {os.cpu_count()} cores; wall seconds of one run each; the pipeline's CPU (its processes, not the cluster's)"
    )
    print(
        "| N | P | seconds | s per tenant | speed-up vs P=1 | 1,000 tenants, extrapolated (min) | "
        "ready | CPU-s per tenant | machine busy before (%) | load (1 min) after |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for run in runs:
        per = run.seconds / run.n
        speedup = f"{serial[run.n] / run.seconds:.2f}" if run.n in serial else "–"
        print(
            f"| {run.n} | {run.parallel} | {run.seconds:.1f} | {per:.2f} | {speedup} | {FLEET * per / 60:.0f} | "
            f"{run.ready}/{run.n}{'' if run.ok else ' ❌'} | {run.cpu / run.n:.2f} | {100 * run.busy_before:.0f} | "
            f"{run.load_after:.2f} |"
        )
    best = min((run for run in runs if run.n == largest and run.ok), key=lambda run: run.seconds, default=None)
    if best is not None:
        minutes = FLEET * best.seconds / best.n / 60
        effective = f"{serial[largest] / best.seconds:.2f}" if largest in serial else "unknown (no P=1 run)"
        verdict = "meets" if minutes <= GOAL_MINUTES else "misses"
        print(
            f"\n{FLEET:,} tenants, from N={largest}: {best.seconds / best.n:.2f} s per tenant at --parallel "
            f"{best.parallel} (effective parallelism {effective}) -> {minutes:.0f} min, which {verdict} the goal of "
            f"{GOAL_MINUTES:.0f} min on this {os.cpu_count()}-core machine"
        )
    failed = [f"N={run.n} P={run.parallel}" for run in runs if not run.ok]
    print(f"failed runs: {', '.join(failed) or 'none'}; load average now {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def run(
    sizes: list[int], parallels: list[int], policy_pack: bool, settle_limit: float, with_floor: bool, secrets_kind: str
) -> list[Run]:
    scratch = Path(tempfile.mkdtemp(prefix="tfk8s-bench-fleet-"))
    floor_workspace = None
    try:
        os.environ["PULUMI_BACKEND_URL"] = f"file://{scratch / 'state'}"
        (scratch / "state").mkdir()
        os.environ.update(toolenv.exported())
        team = team_repository(scratch, policy_pack)
        # Every run's tenants stay: the node holds them all.
        make_room_on_user_node(sum(sizes) * len(parallels) + 1)
        seconds, _, returncode, summary = team.apply("platform", NO_COMMIT, team.git("rev-parse", "HEAD"), 1)
        if returncode != 0 or ready_count(summary) != 1:
            raise RuntimeError(f"the platform's apply failed (exit {returncode}):\n{summary[-4000:]}")
        provider = secrets_provider(PLATFORM)
        print(f"platform {PLATFORM} applied in {seconds:.1f} s (not timed), secrets: {provider}", flush=True)
        if with_floor:
            floor_workspace = Workspace(toolenv.program_project(scratch / "floor", "fleet-floor", FLOOR_PROGRAM), "stacks")
        runs, floors = [], []
        for n in sizes:
            for p in parallels:
                runs.append(onboard(team, n, p, settle_limit, secrets_kind))
                if floor_workspace is not None:
                    floors.append(floor(Pulumi(floor_workspace, os.environ), n, p, policy_pack, settle_limit, secrets_kind))
        report(runs, policy_pack)
        if floors:
            floor_report(runs, floors)
        return runs + floors
    finally:
        if floor_workspace is not None:
            floor_workspace.close()
        shutil.rmtree(scratch, ignore_errors=True)


def run_with(
    secrets_kind: str,
    scratch: Path,
    sizes: list[int],
    parallels: list[int],
    policy_pack: bool,
    settle_limit: float,
    with_floor: bool,
) -> list[Run]:
    """run() on a cluster of its own, its stacks' secrets with a team passphrase or a KMS."""
    with contextlib.ExitStack() as stack:
        if secrets_kind == "kms":
            kms = stack.enter_context(local_kms(scratch / "kms"))
            os.environ.update({**kms.env, "TFK8S_SECRETS_PROVIDER": kms.secrets_provider})
        else:
            os.environ.pop("TFK8S_SECRETS_PROVIDER", None)
        kubeconfig = stack.enter_context(toolenv.throwaway_cluster(CLUSTER))
        os.environ["KUBECONFIG"] = str(kubeconfig)
        return run(sizes, parallels, policy_pack, settle_limit, with_floor, secrets_kind)


def secrets_report(runs: list[Run]) -> None:
    """The tenants' runs of each N and P side by side, one column per secrets provider."""
    kinds = sorted({run.secrets for run in runs}, key=SECRETS.index)
    tenants = {(run.secrets, run.n, run.parallel): run for run in runs}
    print(
        "\nThe same fleets by secrets provider, one after the other in this run (per tenant: wall seconds, "
        "the pipeline's CPU seconds; 1,000 tenants in minutes)"
    )
    print(
        "| N | P | " + " | ".join(f"{kind}: s per tenant | CPU-s | 1,000 (min)" for kind in kinds) + " | wall ratio | CPU ratio |"
    )
    print("|---:|---:|" + "---:|---:|---:|" * len(kinds) + "---:|---:|")
    for n, p in sorted({(run.n, run.parallel) for run in runs}):
        row = [tenants[(kind, n, p)] for kind in kinds]
        cells = " | ".join(
            f"{r.seconds / n:.2f}{'' if r.ok else ' ❌'} | {r.cpu / n:.2f} | {FLEET * r.seconds / n / 60:.1f}" for r in row
        )
        print(f"| {n} | {p} | {cells} | {row[-1].seconds / row[0].seconds:.2f} | {row[-1].cpu / row[0].cpu:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100", help="the N new tenants of each commit, comma-separated")
    parser.add_argument("--parallel", default="1,2", help="the apply's --parallel P for each N, comma-separated")
    parser.add_argument("--no-policy-pack", action="store_true", help="apply with --policy-pack none")
    parser.add_argument("--settle", type=float, default=300.0, help="seconds at most to wait for a quiet machine before a run")
    parser.add_argument("--floor", action="store_true", help="also Pulumi's floor for each N and P (see above)")
    parser.add_argument(
        "--secrets", default="passphrase", help=f"the stacks' secrets providers, comma-separated: {', '.join(SECRETS)}"
    )
    args = parser.parse_args()
    kinds = [kind for kind in SECRETS if kind in args.secrets.split(",")]
    if not kinds or set(args.secrets.split(",")) - set(SECRETS):
        parser.error(f"--secrets {args.secrets}: name one or more of {', '.join(SECRETS)}, comma-separated")
    sizes = sorted({int(n) for n in args.sizes.split(",")})
    parallels = sorted({int(p) for p in args.parallel.split(",")})
    policy_pack = not args.no_policy_pack and (POLICIES / ".venv" / ".installed").exists()
    if not args.no_policy_pack and not policy_pack:
        print("the policy pack's virtualenv is missing (make policy-venv): applying without it", file=sys.stderr)
    toolenv.time_as_a_user()
    # The team's environment only: no backend, passphrase or cloud credentials of this machine's.
    for key in [k for k in os.environ if k.startswith(("PULUMI_", "AWS_"))]:
        del os.environ[key]
    os.environ["PULUMI_CONFIG_PASSPHRASE"] = secrets.token_urlsafe(24)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="tfk8s-bench-fleet-kms-") as scratch:
        for kind in kinds:
            runs += run_with(kind, Path(scratch), sizes, parallels, policy_pack, args.settle, args.floor)
    if len(kinds) > 1:
        secrets_report([r for r in runs if not r.floor])
    sys.exit(0 if all(r.ok for r in runs) else 1)


if __name__ == "__main__":
    main()
