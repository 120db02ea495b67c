"""GitOps for real: a team's repository, the pipeline command exactly as CI runs it
(`hack/gitops.sh`, see .github/workflows/), team state in a real S3 server (versitygw), a cluster
of its own. Fourteen steps, in order, each a commit or pull request on the same repository, each
reported on its own (a subtest: SUBFAILED with its name; SUBPASSED too under `pytest -v`):

  01 set-up  the first push: a platform, two tenants, alice's experiment, applied in order, the
             two tenants at once (`apply --parallel 4`, as `make apply-fleet` runs it)
  02 PR      adds bob's experiment: previewed with the policy pack, nothing created;
     merge   the same commit applied: created, ready
  03 merge   an experiment naming alice's namespace, from a stack her tenant does not list: refused
             by the API server (the pipeline acts as the stack's own account), nothing made
  04 merge   a file that says it is a tenant, which the team file does not declare: refused
  05 PR      bob's worker count: only his experiment previewed, and exactly what its apply changes
  06 PR      a hostile program, previewed as a pull request's own job runs it: the team's job
             exports the experiments' state, the pull request's job holds the preview identity's
             token alone; the program runs, sees no credential of the team's, its write is refused,
             the team's store and the cluster unchanged; never merged
  07 commit removes alice's experiment: destroyed, her tenant's logs kept
  08 PR      adds a tenant: only that tenant previewed
  09 drift   a `kubectl` edit of a live object: reported, with the property
  10 PR      a `:latest` image: the mandatory policy named, nothing applied
  11 merge   a new stack with a `:latest` image (no preview before a new stack's `up`): refused,
             no object that carries the image made; the next commit's destroy removes the rest
  12 PR      rewrites the policy pack and the pipeline command: the base's judge it (the workflow's step)
  13 merge   removes a tenant: refused whole until a person confirms, nothing changed
  14 race    two applies of one stack at once: one waits for the other's lock, nothing lost

Each pipeline run's wall time is printed (pytest -s) and kept in the summary files under the
test's temporary directory.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from drivers import CLUSTER, ROOT, Kube, preview_minter, team_platform
from s3_server import s3_server
from tfk8s_gitops import operator
from tfk8s_gitops.identity import identity

import toolenv

BUCKET = "tfk8s-state"
PLATFORM, ALICE, BOB, CAROL = "gitops-platform", "tenant-alice", "tenant-bob", "tenant-carol"
EXP_A, EXP_B, EXP_C = "exp-a", "exp-b", "exp-c"
INTRUDER = "exp-intruder"  # a stack file that names alice's namespace, which her tenant does not list
MALLORY = "tenant-mallory"  # a stack file that says it is a tenant, which the team file does not declare


@dataclass
class S3:
    env: dict[str, str]
    """What a team's CI gets from its secrets to reach the store."""
    root: Path
    """The directory served: BUCKET/.pulumi/... is the backend's own layout (its locks included)."""


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3]:
    """A real S3 server on loopback; the environment a team's CI gets from its secrets to reach it."""
    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        yield S3(server.env(server.bucket(BUCKET)), server.root)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Kube]:
    """A kwok cluster of its own: this team's platform claims the User Node and storage names the
    session's other platform uses."""
    name = f"{CLUSTER}-gitops"
    with toolenv.throwaway_cluster(name) as kubeconfig:
        yield Kube(kubeconfig, cluster=name)


def _stack_file(config: dict[str, Any]) -> str:
    return yaml.safe_dump({"config": config}, sort_keys=False)


def _experiment(tenant: str, workers: int = 2, image: str | None = None) -> str:
    cluster: dict[str, Any] = {
        "name": "mnist",
        "ps": {"count": 1, "cpu": "250m", "memory": "512Mi"},
        "workers": {"count": workers, "cpu": "250m", "memory": "512Mi"},
    }
    if image:
        cluster["image"] = image
    namespace = f"tfk8s-{tenant.removeprefix('tenant-')}"  # the tenant stack tenant-<user>'s
    return _stack_file({"tfk8s:kind": "experiment", "tfk8s:namespace": namespace, "tfk8s:clusters": [cluster]})


def _tenant(user: str, *experiments: str) -> str:
    """A tenant of `user` whose identities include the accounts the pipeline runs `experiments` as."""
    users = [user, *(identity(stack) for stack in experiments)]
    return _stack_file(
        {
            "tfk8s:kind": "tenant",
            "tfk8s:platformStack": PLATFORM,
            "tfk8s:tenant": {"name": user, "identities": {"users": users}, "volumes": {"dataSize": "1Gi", "logSize": "1Gi"}},
        }
    )


@dataclass
class Run:
    returncode: int
    summary: str
    seconds: float
    output: str


@dataclass
class Team:
    """The team's repository and the pipeline's environment."""

    repo: Path
    env: dict[str, str]
    summaries: Path
    s3: S3

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.repo), *args], check=True, capture_output=True, text=True).stdout.strip()

    def commit(self, message: str, files: dict[str, str | None]) -> str:
        """Write (or, for None, remove) stack files and commit them; the new commit's id."""
        for name, text in files.items():
            path = self.repo / "stacks" / f"Pulumi.{name}.yaml"
            if text is None:
                path.unlink()
            else:
                path.write_text(text)
        self.git("add", "-A", "stacks")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    def checkout(self, commit: str) -> None:
        self.git("checkout", "-q", "--detach", commit)

    def start(self, label: str, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], float]:
        """`hack/gitops.sh ARGS --summary <label>.md` in the repository, as the workflow runs it (in
        `env`: a job of its own; default: the team's)."""
        command = [str(self.repo / "hack" / "gitops.sh"), *args, "--summary", str(self.summaries / f"{label}.md")]
        started = subprocess.Popen(
            command, cwd=self.repo, env=env or self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        return started, time.monotonic()

    def finish(self, label: str, started: tuple[subprocess.Popen[str], float]) -> Run:
        process, start = started
        output = process.communicate(timeout=900)[0]
        seconds = time.monotonic() - start
        assert isinstance(process.args, list), process.args  # start() passes an argv
        command = " ".join(str(word) for word in process.args[1:-2])
        print(f"\n[gitops] {label}: `hack/gitops.sh {command}` exited {process.returncode} in {seconds:.1f} s")
        summary = self.summaries / f"{label}.md"
        return Run(process.returncode, summary.read_text() if summary.exists() else "", seconds, output)

    def pipeline(self, label: str, *args: str, env: dict[str, str] | None = None) -> Run:
        return self.finish(label, self.start(label, *args, env=env))

    def plan(self, base: str) -> list[dict[str, str]]:
        done = subprocess.run(
            [str(self.repo / "hack" / "gitops.sh"), "plan", "--base", base, "--json"],
            cwd=self.repo,
            check=True,
            capture_output=True,
            text=True,
            env=self.env,
        )
        return json.loads(done.stdout)

    def pulumi(self, *args: str) -> str:
        env = {**self.env, **toolenv.exported(self.env)}
        done = subprocess.run(
            ["pulumi", *args, "--non-interactive"], cwd=self.repo, capture_output=True, text=True, env=env, check=True
        )
        return done.stdout


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory, s3: S3, cluster: Kube) -> Team:
    """A throwaway git repository holding this project (what git tracks, as it is in the working
    tree), its stack files replaced by the team's, the virtualenvs linked (git ignores them)."""
    repo = tmp_path_factory.mktemp("team")
    tracked = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    for name in filter(None, tracked.split("\0")):
        if name.startswith("stacks/") or not (ROOT / name).exists():
            continue
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, repo / name)
    (repo / "stacks").mkdir()
    (repo / ".venv").symlink_to(ROOT / ".venv")
    (repo / "policies" / ".venv").symlink_to(ROOT / "policies" / ".venv")
    if not (ROOT / "policies" / ".venv" / ".installed").exists():
        subprocess.run(["make", "-C", str(ROOT), "policy-venv"], check=True, capture_output=True)
    volumes = tmp_path_factory.mktemp("volumes")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PULUMI_", "AWS_"))}
    env.update(s3.env)
    env.update({"KUBECONFIG": str(cluster.kubeconfig), "PULUMI_CONFIG_PASSPHRASE": secrets.token_urlsafe(24)})
    summaries = tmp_path_factory.mktemp("summaries")
    result = Team(repo, env, summaries, s3)
    result.git("init", "-q", "-b", "main")
    result.git("config", "user.email", "platform@example.com")
    result.git("config", "user.name", "platform team")
    platform = team_platform(volumes, "tfk8s-gitops-local")
    # This team lets its program run floating images (platform.images.allowLatest): its policy pack's
    # mandatory no-latest-image is then the gate that stops one, which the `:latest` scenarios prove.
    platform["tfk8s:platform"]["images"] = {"allowLatest": True}
    # Its pull requests' own jobs hold the preview identity's token alone (step 06).
    platform["tfk8s:platform"]["gitops"] = {"previewIdentity": True}
    (repo / "stacks" / f"Pulumi.{PLATFORM}.yaml").write_text(_stack_file(platform))
    # The team's own stacks, declared before their files come (tfk8s_gitops.repo.TEAM_FILE).
    team_file = {"platforms": [PLATFORM], "tenants": [ALICE, BOB, CAROL]}
    (repo / "stacks" / "team.yaml").write_text(yaml.safe_dump(team_file))
    result.git("add", "-A")
    result.git("commit", "-q", "-m", "the project, and the team's platform")
    return result


def _stack_objects(kube: Kube, namespace: str, stack: str) -> dict[tuple[str, str], dict[str, Any]]:
    kinds = "deployments,jobs,services,configmaps,networkpolicies,serviceaccounts,roles,rolebindings"
    items = json.loads(kube.run("get", kinds, "-n", namespace, "-l", f"tfk8s.io/stack={stack}", "-o", "json"))["items"]
    return {(i["kind"], i["metadata"]["name"]): i for i in items}


def _changed(summary: str, stack: str) -> set[tuple[str, str]]:
    """(kind, Pulumi name) of each resource the summary's details of `stack` list as changed."""
    part = summary.split(f"<code>{stack}</code>", 1)[1].split("</details>", 1)[0]
    lines = [line for line in part.splitlines() if line.startswith("- ") and not line.startswith(("- policy", "- **error**"))]
    return {(line.split("`")[1], line.split("`")[3]) for line in lines}


def _changed_properties(summary: str, stack: str) -> list[str]:
    """The details lines of `stack` that name a changed property (`- update `Job` `x`: spec`)."""
    part = summary.split(f"<code>{stack}</code>", 1)[1].split("</details>", 1)[0]
    return [
        line
        for line in part.splitlines()
        if line.startswith("- ") and not line.startswith(("- policy", "- **error**")) and "`: " in line
    ]


def _named(key: tuple[str, str], changed: set[tuple[str, str]]) -> bool:
    """Whether a live object (kind, name) is one of `changed`: its name is the Pulumi name, or that
    name with Pulumi's random suffix."""
    kind, name = key
    return any(kind == k and re.fullmatch(rf"{re.escape(n)}(-[0-9a-f]{{8}})?", name) for k, n in changed)


def _salt(team: Team, stack: str) -> str:
    """The encryption salt the backend records for `stack`."""
    exported = json.loads(team.pulumi("stack", "export", "--stack", stack))
    salt: str = exported["deployment"]["secrets_providers"]["state"]["salt"]
    return salt


def _versions(objects: dict[tuple[str, str], dict[str, Any]]) -> dict[tuple[str, str], str]:
    return {key: obj["metadata"]["resourceVersion"] for key, obj in objects.items()}


def test_a_team_repository_through_pull_requests_merges_and_a_schedule(
    team: Team, cluster: Kube, tmp_path_factory: pytest.TempPathFactory, subtests: pytest.Subtests
) -> None:
    """The scenarios share one repository, backend and cluster, each building on the last, as a
    team's history does: each is a step reported on its own, and the first that fails ends the run
    (the steps after it would start from a history that did not happen), naming those not run."""
    first: list[str] = []
    steps: list[tuple[str, Callable[[], object]]] = [
        ("the first push: a platform, two tenants, an experiment", lambda: first.append(_first_push(team))),
        (
            "a pull request adding an experiment, then its merge",
            lambda: _pull_request_adding_an_experiment_then_its_merge(team, cluster),
        ),
        (
            "a merged experiment in another user's namespace",
            lambda: _a_merged_experiment_in_another_users_namespace(team, cluster),
        ),
        ("a merged file claiming to be a tenant", lambda: _a_merged_file_claiming_to_be_a_tenant(team, cluster)),
        ("a pull request changing a worker count", lambda: _pull_request_changing_a_worker_count(team, cluster)),
        (
            "a hostile pull request previewed as the preview identity",
            lambda: _a_hostile_pull_request_previewed_as_the_preview_identity(
                team, cluster, tmp_path_factory.mktemp("pr-runner")
            ),
        ),
        ("a commit removing an experiment", lambda: _commit_removing_an_experiment(team, cluster)),
        ("a pull request adding a tenant", lambda: _pull_request_adding_a_tenant(team, cluster)),
        ("the schedule's drift check", lambda: _drift(team, cluster, first[0])),
        ("a pull request with a :latest image", lambda: _mandatory_policy_violation(team, cluster)),
        ("a new stack refused by a mandatory policy", lambda: _a_new_stack_refused_by_a_mandatory_policy(team, cluster)),
        (
            "a pull request rewriting its own judge",
            lambda: _pull_request_that_rewrites_its_own_judge(team, cluster, tmp_path_factory.mktemp("runner")),
        ),
        (
            "removing a tenant needs a person's confirmation",
            lambda: _removing_a_tenant_needs_a_persons_confirmation(team, cluster),
        ),
        ("two applies of one stack at once", lambda: _two_applies_at_once(team, cluster)),
    ]
    for number, (scenario, step) in enumerate(steps, 1):
        passed = False
        with subtests.test(msg=f"{number:02d} {scenario}"):
            step()
            passed = True
        if not passed:
            not_run = [name for name, _ in steps[number:]]
            pytest.fail(f"step {number:02d} ({scenario}) failed; not run, as they build on it: {not_run}")


def _first_push(team: Team) -> str:
    head = team.commit(
        "two tenants and alice's first experiment",
        {ALICE: _tenant("alice", EXP_A), BOB: _tenant("bob", EXP_B, EXP_C), EXP_A: _experiment(ALICE)},
    )
    steps = team.plan("0" * 40)
    assert [(s["stack"], s["action"]) for s in steps] == [
        (PLATFORM, "update"),
        (ALICE, "update"),
        (BOB, "update"),
        (EXP_A, "update"),
    ]
    run = team.pipeline("first-push", "apply", "--base", "0" * 40, "--head", head, "--parallel", "4")
    assert run.returncode == 0, run.output
    assert run.summary.count("✅ ok") == 4 and "❌" not in run.summary, run.summary
    rows = [line.split("`")[1] for line in run.summary.splitlines() if re.match(r"\| \d+ \|", line)]
    assert rows == [PLATFORM, ALICE, BOB, EXP_A], run.summary  # the plan's order, whatever finished first
    for stack in (PLATFORM, ALICE, BOB, EXP_A):
        assert json.loads(team.pulumi("stack", "output", "--stack", stack, "--json"))["ready"] is True
    # The tenants share their platform's salt (one key derivation per command, not two); the
    # experiment, which reads no other stack, keeps its own.
    salt = {stack: _salt(team, stack) for stack in (PLATFORM, ALICE, BOB, EXP_A)}
    assert salt[ALICE] == salt[BOB] == salt[PLATFORM] != salt[EXP_A], salt
    # The backend's own record (whole seconds): the two tenants' updates overlapped, each after the
    # platform's, and alice's experiment after her tenant's.
    start: dict[str, datetime] = {}
    end: dict[str, datetime] = {}
    for stack in (PLATFORM, ALICE, BOB, EXP_A):
        (update,) = json.loads(team.pulumi("stack", "history", "--stack", stack, "--json"))
        start[stack], end[stack] = (datetime.fromisoformat(update[key]) for key in ("startTime", "endTime"))
    assert end[PLATFORM] <= min(start[ALICE], start[BOB]) and end[ALICE] <= start[EXP_A], (start, end)
    assert start[ALICE] < end[BOB] and start[BOB] < end[ALICE], (start, end)
    # The state is in the bucket (the backend's own layout under it), not on a file backend.
    assert list((team.s3.root / BUCKET / ".pulumi" / "stacks").rglob(f"{EXP_A}.json*")), "no state in the bucket"
    return head


def _pull_request_adding_an_experiment_then_its_merge(team: Team, cluster: Kube) -> None:
    base = team.git("rev-parse", "HEAD")
    head = team.commit("bob's first experiment", {EXP_B: _experiment(BOB)})
    assert [(s["stack"], s["reason"]) for s in team.plan(base)] == [(EXP_B, "added")]
    run = team.pipeline("pr-add-experiment", "preview", "--base", base, "--head", head)
    assert run.returncode == 0, run.output
    row = next(line for line in run.summary.splitlines() if f"`{EXP_B}`" in line)
    assert "✅ ok" in row and "+" in row and "(mandatory)" not in row, row
    assert "jobs-deadline (advisory)" in row, row  # the advisory rules speak: no deadline is set
    assert _stack_objects(cluster, "tfk8s-bob", EXP_B) == {}  # a preview creates nothing

    # The merge, as the workflow's matrix runs it: one job per planned stack, in order.
    for step in team.plan(base):
        merged = team.pipeline(f"merge-{step['stack']}", "apply", "--base", base, "--head", head, "--only", step["stack"])
        assert merged.returncode == 0, merged.output
    assert "| yes |" in merged.summary, merged.summary
    objects = _stack_objects(cluster, "tfk8s-bob", EXP_B)
    assert {kind for kind, _ in objects} >= {"Deployment", "Job", "Service", "NetworkPolicy"}, objects


def _a_merged_experiment_in_another_users_namespace(team: Team, cluster: Kube) -> None:
    """A stack file merged to main that names alice's namespace, from a stack her tenant does not
    list: the pipeline runs it as the stack's own account, so the API server refuses it (one line,
    naming that account) and nothing is made in her namespace. Removing the file is a clean destroy."""
    base = team.git("rev-parse", "HEAD")
    before = _versions(_stack_objects(cluster, "tfk8s-alice", EXP_A))
    head = team.commit("an experiment in alice's namespace", {INTRUDER: _experiment(ALICE)})
    run = team.pipeline("merge-intruder", "apply", "--base", base, "--head", head)
    assert run.returncode == 1, run.output
    refusal = [line for line in run.summary.splitlines() if line.startswith("- **error**")]
    assert len(refusal) == 1 and f"user '{identity(INTRUDER)}'" in refusal[0], run.summary
    assert "may not read the tenant contract in namespace 'tfk8s-alice'" in refusal[0], refusal
    assert "nothing was changed" in refusal[0], refusal
    assert _stack_objects(cluster, "tfk8s-alice", INTRUDER) == {}
    assert _versions(_stack_objects(cluster, "tfk8s-alice", EXP_A)) == before
    removed = team.commit("not alice's", {INTRUDER: None})
    cleaned = team.pipeline("remove-intruder", "apply", "--base", head, "--head", removed)
    assert cleaned.returncode == 0, cleaned.output


def _a_merged_file_claiming_to_be_a_tenant(team: Team, cluster: Kube) -> None:
    """A stack file merged to main that says `tfk8s:kind: tenant`, which the team file at the base
    does not declare: a tenant runs with the pipeline's cluster-admin credentials, so the whole
    apply is refused before any command runs, and nothing is made, not even its stack. Its removal
    runs as the file's own identity, which finds nothing to destroy and needs no person's word."""
    base = team.git("rev-parse", "HEAD")
    head = team.commit("mallory makes herself a tenant", {MALLORY: _tenant("mallory")})
    assert [(s["stack"], s["team"]) for s in team.plan(base)] == [(MALLORY, False)]
    run = team.pipeline("merge-claimed-tenant", "apply", "--base", base, "--head", head)
    assert run.returncode == 1, run.output
    assert "**Refused: nothing was changed.**" in run.summary, run.summary
    assert f"does not declare {MALLORY} among the team's tenants" in run.summary, run.summary
    assert "tfk8s-mallory" not in {n["metadata"]["name"] for n in cluster.get("namespaces")}
    assert MALLORY not in {s["name"] for s in json.loads(team.pulumi("stack", "ls", "--json"))}
    removed = team.commit("not a tenant", {MALLORY: None})
    cleaned = team.pipeline("remove-claimed-tenant", "apply", "--base", head, "--head", removed)
    assert cleaned.returncode == 0 and "never deployed" in cleaned.summary, cleaned.output + cleaned.summary


def _pull_request_changing_a_worker_count(team: Team, cluster: Kube) -> None:
    base = team.git("rev-parse", "HEAD")
    head = team.commit("bob: 3 workers", {EXP_B: _experiment(BOB, workers=3)})
    assert [s["stack"] for s in team.plan(base)] == [EXP_B]
    run = team.pipeline("pr-worker-count", "preview", "--base", base, "--head", head)
    assert run.returncode == 0, run.output
    assert f"`{EXP_A}`" not in run.summary and f"`{BOB}`" not in run.summary  # only bob's experiment
    predicted = _changed(run.summary, EXP_B)
    assert predicted, run.summary
    before = _stack_objects(cluster, "tfk8s-bob", EXP_B)
    merged = team.pipeline("merge-worker-count", "apply", "--base", base, "--head", head)
    assert merged.returncode == 0, merged.output
    after = _versions(_stack_objects(cluster, "tfk8s-bob", EXP_B))
    # What the preview named is what the apply changed, and nothing else.
    moved = {key for key, version in _versions(before).items() if after.get(key) != version}
    assert moved, predicted
    assert {key for key in before if _named(key, predicted)} == moved, (predicted, moved)


# Prepended to the program's entry by the hostile pull request: what its code finds in its job's
# environment, and a real write with the kubeconfig it holds, kept where the test reads them.
HOSTILE = """
import json as _json, os as _os, subprocess as _subprocess
_write = _subprocess.run(
    [{kubectl!r}, "create", "configmap", "pr-exfil", "-n", "tfk8s-bob", "--from-literal=stolen=yes"],
    capture_output=True, text=True,
)
Path({record!r}).write_text(_json.dumps({{"env": dict(_os.environ), "write": [_write.returncode, _write.stderr]}}))
"""


def _store_files(team: Team) -> dict[str, tuple[int, int]]:
    """Every file of the team's state store: (size, mtime in ns)."""
    root = team.s3.root / BUCKET
    return {str(f.relative_to(root)): (f.stat().st_size, f.stat().st_mtime_ns) for f in root.rglob("*") if f.is_file()}


def _workflow_step(workspace: Path, job: str, step_id: str) -> str:
    """The `run` script of a step of the base's preview workflow, as its runner runs it."""
    workflow = yaml.safe_load((workspace / "trusted" / ".github" / "workflows" / "tfk8s-preview.yml").read_text())
    script: str = next(s for s in workflow["jobs"][job]["steps"] if s.get("id") == step_id)["run"]
    return script


def _a_hostile_pull_request_previewed_as_the_preview_identity(team: Team, cluster: Kube, runner: Path) -> None:
    """A same-repository pull request whose program is its author's own (it reads its environment and
    writes to the cluster with the kubeconfig it holds), previewed by the preview workflow's own
    scripts, as its runner runs them, in a workspace of the base's checkout and the pull request's:
    the `state` job (the team's store and a minter's kubeconfig) exports the experiments' state and
    mints the preview identity's token, running none of its code; the `experiments` job previews
    them with those alone. Its program runs, finds no credential of the team's, and its write is
    refused; the cluster and the team's state store are as they were. Never merged. (The store's
    read-only keys the guide asks of its administrator are not made here: the `state` job holds the
    team's keys, which it only reads with.)"""
    base = team.git("rev-parse", "HEAD")
    record = runner / "what-the-program-found.json"
    entry = team.repo / "infra" / "__main__.py"
    anchor = "sys.path.insert(0, str(Path(__file__).resolve().parent))\n"
    entry.write_text(entry.read_text().replace(anchor, anchor + HOSTILE.format(kubectl=toolenv.KUBECTL, record=str(record))))
    team.git("add", "infra/__main__.py")
    head = team.commit("bob: 4 workers (and a program of the author's own)", {EXP_B: _experiment(BOB, workers=4)})
    workspace = runner / "work"
    for path, commit in (("trusted", base), ("pr", head)):
        team.git("worktree", "add", "-q", "--detach", str(workspace / path), commit)
    (workspace / "trusted" / ".venv").symlink_to(ROOT / ".venv")  # what the set-up action leaves there
    (workspace / "trusted" / "policies" / ".venv").symlink_to(ROOT / "policies" / ".venv")
    shas = {"BASE_SHA": base, "HEAD_SHA": head, "RUNNER_TEMP": str(runner)}
    try:
        # The `state` job: the team's store; the minter's kubeconfig, which may mint the preview
        # identity's token and do nothing else (as the guide makes it).
        minter = {"KUBECONFIG": str(preview_minter(cluster, runner))}
        exported = subprocess.run(
            ["bash", "-e", "-c", _workflow_step(workspace, "state", "export")],
            cwd=workspace,
            env={**team.env, **minter, **shas},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert exported.returncode == 0, exported.stdout + exported.stderr
        assert f"{EXP_A}, {EXP_B}" in exported.stdout, exported.stdout  # the program changed: every experiment
        # The `experiments` job: that directory alone, nothing of the team's in its environment.
        job = {k: v for k, v in team.env.items() if not k.startswith(("PULUMI_", "AWS_")) and k != "KUBECONFIG"}
        store, objects = _store_files(team), _versions(_stack_objects(cluster, "tfk8s-bob", EXP_B))
        done = subprocess.run(
            ["bash", "-e", "-c", _workflow_step(workspace, "experiments", "preview")],
            cwd=workspace,
            env={**job, **shas},
            capture_output=True,
            text=True,
            timeout=900,
        )
        summary = (runner / "summary.md").read_text() if (runner / "summary.md").exists() else ""
        print(f"\n[gitops] pr-as-preview-identity: the workflow's experiments job exited {done.returncode}")
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        row = next(line for line in summary.splitlines() if f"`{EXP_B}`" in line)
        assert "✅ ok" in row and "~" in row, row  # bob's experiment previewed from its recorded state: an update
        for stack in (PLATFORM, ALICE, BOB):  # theirs hold secrets: the team's approved job previews them
            assert "⏭️" in next(line for line in summary.splitlines() if f"`{stack}`" in line), summary

        found = json.loads(record.read_text())  # the author's code ran, with what the job holds
        # (The store's access key id is a user name, "tfk8s": its secret key and the passphrase are the secrets.)
        team_secrets = [team.env[k] for k in ("PULUMI_CONFIG_PASSPHRASE", "AWS_SECRET_ACCESS_KEY")]
        assert not [v for v in team_secrets if v in json.dumps(found["env"])], "a credential of the team's reached the program"
        assert not [k for k in found["env"] if k.startswith("AWS_")], found["env"].keys()
        assert found["env"]["PULUMI_BACKEND_URL"].startswith("file://")
        assert found["env"]["KUBECONFIG"] == str(runner / "state" / "preview.kubeconfig")
        returncode, said = found["write"]
        assert returncode != 0 and "may only dry-run: CREATE of configmaps refused" in said, said
        assert "pr-exfil" not in cluster.run("get", "configmaps", "-n", "tfk8s-bob", "-o", "name")
        assert _versions(_stack_objects(cluster, "tfk8s-bob", EXP_B)) == objects
        assert _store_files(team) == store, "the pull request's job touched the team's state store"
    finally:  # never merged
        for path in ("trusted", "pr"):
            team.git("worktree", "remove", "--force", str(workspace / path))
        team.git("reset", "-q", "--hard", base)


def _commit_removing_an_experiment(team: Team, cluster: Kube) -> None:
    (claim,) = [c for c in cluster.get("pvc", "tfk8s-alice") if "log" in c["metadata"]["name"]]
    logs = Path(cluster.get("pv", name=claim["spec"]["volumeName"])["spec"]["hostPath"]["path"])
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "exp-a-run.txt").write_text("events of a finished run\n")
    base = team.git("rev-parse", "HEAD")
    head = team.commit("alice is done with exp-a", {EXP_A: None})
    assert [(s["stack"], s["action"]) for s in team.plan(base)] == [(EXP_A, "destroy")]
    run = team.pipeline("remove-experiment", "apply", "--base", base, "--head", head)
    assert run.returncode == 0, run.output
    assert _stack_objects(cluster, "tfk8s-alice", EXP_A) == {}
    after = cluster.get("pvc", "tfk8s-alice", claim["metadata"]["name"])
    assert after["status"]["phase"] == "Bound" and after["metadata"]["uid"] == claim["metadata"]["uid"]
    assert (logs / "exp-a-run.txt").read_text() == "events of a finished run\n"


def _pull_request_adding_a_tenant(team: Team, cluster: Kube) -> None:
    base = team.git("rev-parse", "HEAD")
    head = team.commit("carol joins", {CAROL: _tenant("carol")})
    assert [(s["stack"], s["action"], s["reason"]) for s in team.plan(base)] == [(CAROL, "update", "added")]
    run = team.pipeline("pr-add-tenant", "preview", "--base", base, "--head", head)
    assert run.returncode == 0, run.output
    rows = [line for line in run.summary.splitlines() if re.match(r"\| \d+ \|", line)]
    assert len(rows) == 1 and f"`{CAROL}`" in rows[0], run.summary
    assert "tfk8s-carol" not in {n["metadata"]["name"] for n in cluster.get("namespaces")}
    # Its empty stack took the platform's salt, from the platform's state this time (no file holds it).
    assert _salt(team, CAROL) == _salt(team, PLATFORM)
    team.git("reset", "-q", "--hard", base)  # the pull request is closed unmerged


def _drift(team: Team, cluster: Kube, first: str) -> None:
    clean = team.pipeline("drift-none", "drift")
    assert clean.returncode == 0, clean.output
    (policy,) = [name for kind, name in _stack_objects(cluster, "tfk8s-bob", EXP_B) if kind == "NetworkPolicy"]
    patch = '[{"op": "replace", "path": "/spec/ingress/0/ports/0/port", "value": 2223}]'
    cluster.run("patch", "networkpolicy", policy, "-n", "tfk8s-bob", "--type", "json", "-p", patch)
    run = team.pipeline("drift", "drift")
    assert run.returncode == 1, run.output
    drifted = [line for line in run.summary.splitlines() if line.startswith("| ") and "drifted" in line]
    assert len(drifted) == 1 and f"`{EXP_B}`" in drifted[0], run.summary  # bob's experiment, and only it
    assert "spec.ingress[0].ports[0].port" in run.summary, run.summary
    # The next apply will not silently undo a person's edit: it names their field manager...
    refused = team.pipeline("drift-apply", "apply", "--base", first, "--only", EXP_B)
    assert refused.returncode == 1 and 'conflict with "kubectl-patch"' in refused.summary, refused.output
    # ...and the repository wins when the team says so.
    fixed = team.pipeline("drift-fix", "apply", "--base", first, "--only", EXP_B, "--force-conflicts")
    assert fixed.returncode == 0, fixed.output
    assert cluster.get("networkpolicy", "tfk8s-bob", policy)["spec"]["ingress"][0]["ports"][0]["port"] == 2222


def _mandatory_policy_violation(team: Team, cluster: Kube) -> None:
    base = team.git("rev-parse", "HEAD")
    before = _versions(_stack_objects(cluster, "tfk8s-bob", EXP_B))
    head = team.commit("bob tries :latest", {EXP_B: _experiment(BOB, workers=3, image="tensorflow/tensorflow:latest")})
    run = team.pipeline("pr-latest-image", "preview", "--base", base, "--head", head)
    assert run.returncode == 1, run.output
    assert "no-latest-image (mandatory)" in run.summary, run.summary
    merged = team.pipeline("merge-latest-image", "apply", "--base", base, "--head", head)
    assert merged.returncode == 1 and "no-latest-image" in merged.summary, merged.output
    assert _versions(_stack_objects(cluster, "tfk8s-bob", EXP_B)) == before  # nothing applied
    team.git("reset", "-q", "--hard", base)


def _a_new_stack_refused_by_a_mandatory_policy(team: Team, cluster: Kube) -> None:
    """A merge adding bob's second experiment on `:latest`. A new stack's `up` skips the preview
    (nothing of it exists yet), and the engine still runs every resource policy on each object
    before creating it: the step fails naming the policy, and no object that carries the image
    (the PS Deployment, the workers' Job) was ever made; the objects that passed were. The next
    commit, which removes the stack file, destroys them."""
    base = team.git("rev-parse", "HEAD")
    head = team.commit("bob's second experiment, on :latest", {EXP_C: _experiment(BOB, image="tensorflow/tensorflow:latest")})
    merged = team.pipeline("merge-new-latest-image", "apply", "--base", base, "--head", head)
    assert merged.returncode == 1 and "no-latest-image (mandatory)" in merged.summary, merged.output
    made = {kind for kind, _ in _stack_objects(cluster, "tfk8s-bob", EXP_C)}
    assert made and not made & {"Deployment", "Job"}, made
    removed = team.commit("bob drops it", {EXP_C: None})
    cleaned = team.pipeline("merge-remove-refused", "apply", "--base", head, "--head", removed)
    assert cleaned.returncode == 0, cleaned.output
    assert _stack_objects(cluster, "tfk8s-bob", EXP_C) == {}


def _pull_request_that_rewrites_its_own_judge(team: Team, cluster: Kube, runner: Path) -> None:
    """A pull request that empties the policy pack, replaces the pipeline command with its own
    script and breaks a mandatory policy, previewed by the workflow's own step (its `run` script,
    as the runner runs it, in a workspace of the base's checkout and the pull request's): the base's
    pack judges it, and nothing of the pull request's tree ran as tooling."""
    base = team.git("rev-parse", "HEAD")
    marker = runner / "the pull request's tooling ran"
    (team.repo / "policies" / "tfk8s_policies.py").write_text(
        "from pulumi_policy import PolicyPack\nPolicyPack(name='tfk8s', policies=[])\n"
    )
    (team.repo / "hack" / "gitops.sh").write_text(f"#!/usr/bin/env bash\ntouch '{marker}'\n")
    (team.repo / "requirements.txt").write_text("an-attackers-package==6.6.6\n")
    team.git("add", "-A")
    head = team.commit(
        "bob: :latest, and a pack that allows it", {EXP_B: _experiment(BOB, workers=3, image="tensorflow/tensorflow:latest")}
    )
    before = _versions(_stack_objects(cluster, "tfk8s-bob", EXP_B))
    workspace = runner / "work"
    for path, commit in (("trusted", base), ("pr", head)):
        team.git("worktree", "add", "-q", "--detach", str(workspace / path), commit)
    # What the set-up action leaves in the base's checkout: its virtualenvs.
    (workspace / "trusted" / ".venv").symlink_to(ROOT / ".venv")
    (workspace / "trusted" / "policies" / ".venv").symlink_to(ROOT / "policies" / ".venv")
    try:
        workflow = yaml.safe_load((workspace / "trusted" / ".github" / "workflows" / "tfk8s-preview.yml").read_text())
        step = next(s for s in workflow["jobs"]["team"]["steps"] if s.get("id") == "preview")
        env = {**team.env, "BASE_SHA": base, "HEAD_SHA": head, "RUNNER_TEMP": str(runner)}
        done = subprocess.run(
            ["bash", "-e", "-c", step["run"]], cwd=workspace, env=env, capture_output=True, text=True, timeout=900
        )
        summary = (runner / "summary.md").read_text() if (runner / "summary.md").exists() else ""
        print(f"\n[gitops] pr-rewrites-its-judge: the workflow's preview step exited {done.returncode}")
        assert done.returncode == 1, done.stdout + done.stderr
        assert "no-latest-image (mandatory)" in summary, summary  # the base's pack judged
        assert not marker.exists(), "the pull request's hack/gitops.sh ran"
        assert _versions(_stack_objects(cluster, "tfk8s-bob", EXP_B)) == before
    finally:
        for path in ("trusted", "pr"):
            team.git("worktree", "remove", "--force", str(workspace / path))
        team.git("reset", "-q", "--hard", base)


def _removing_a_tenant_needs_a_persons_confirmation(team: Team, cluster: Kube) -> None:
    """A merge removing bob's tenant (and his experiment) changes nothing: every job of the apply
    refuses, naming the confirmation; the tenant and its experiment are untouched."""
    base = team.git("rev-parse", "HEAD")
    before = _versions(_stack_objects(cluster, "tfk8s-bob", EXP_B))
    head = team.commit("bob leaves", {BOB: None, EXP_B: None})
    preview = team.pipeline("pr-remove-tenant", "preview", "--base", base, "--head", head)
    assert "Merging this needs a person's confirmation" in preview.summary, preview.summary
    for step in team.plan(base):
        merged = team.pipeline(f"merge-remove-{step['stack']}", "apply", "--base", base, "--head", head, "--only", step["stack"])
        assert merged.returncode == 1, merged.output
        assert "Refused: nothing was changed" in merged.summary and f"--confirm-destroy {BOB}" in merged.summary, merged.summary
    assert _versions(_stack_objects(cluster, "tfk8s-bob", EXP_B)) == before
    assert json.loads(team.pulumi("stack", "output", "--stack", BOB, "--json"))["ready"] is True
    team.git("reset", "-q", "--hard", base)


def _two_applies_at_once(team: Team, cluster: Kube) -> None:
    base = team.git("rev-parse", "HEAD")
    head = team.commit("bob: back to 2 workers", {EXP_B: _experiment(BOB, workers=2)})
    history = len(json.loads(team.pulumi("stack", "history", "--stack", EXP_B, "--json")))
    locks = team.s3.root / BUCKET / ".pulumi" / "locks"
    one = team.start("race-1", "apply", "--base", base, "--head", head)
    deadline = time.monotonic() + 120
    while not list(locks.rglob(f"{EXP_B}/*.json")):  # the first holds the stack's lock
        assert one[0].poll() is None and time.monotonic() < deadline, "the first apply never took the lock"
        time.sleep(0.05)
    two = team.start("race-2", "apply", "--base", base, "--head", head)
    runs = [team.finish("race-1", one), team.finish("race-2", two)]
    assert [r.returncode for r in runs] == [0, 0], [r.output for r in runs]
    assert "for another run's lock" in runs[1].summary, runs[1].summary
    updates = json.loads(team.pulumi("stack", "history", "--stack", EXP_B, "--json"))
    assert len(updates) == history + 2 and all(u["result"] == "succeeded" for u in updates[:2]), updates[:2]
    # The first changed the workers; the second, after waiting, found no property left to change.
    # (It may still re-apply the running worker Job unchanged: the provider's refresh reports a
    # Job that has not finished as not initialized, and the engine re-awaits it.)
    assert _changed_properties(runs[0].summary, EXP_B), runs[0].summary
    assert not _changed_properties(runs[1].summary, EXP_B), runs[1].summary
    assert not list(locks.rglob("*.json")), "a lock was left behind"


def _operator_crds() -> Path:
    """The Pulumi Kubernetes Operator's CRDs, unmodified (../shared/data, see its README): from
    TFK8S_OPERATOR_CRDS, or beside the checkout as on this project's machines."""
    candidates = [os.environ.get("TFK8S_OPERATOR_CRDS", "")]
    candidates += [str(ROOT.parent / "shared" / "data" / OPERATOR), f"/work/shared/data/{OPERATOR}"]
    found = next((Path(c) for c in candidates if c and (Path(c) / "pulumi.com_stacks.yaml").exists()), None)
    assert found is not None, f"the operator's CRDs are not in {candidates[1:]}: set TFK8S_OPERATOR_CRDS to its deploy/crds"
    return found


OPERATOR = "pulumi-kubernetes-operator-2.9.0"


def test_operator_stacks_of_every_kind_validate_against_the_operators_crds(cluster: Kube, tmp_path: Path) -> None:
    """`hack/gitops.sh operator-stack` for a platform, a tenant and an experiment, created with
    `kubectl create --dry-run=server --validate=strict` against the operator's real Stack CRD (its
    reconcile loop is not run here). The experiment's workspace is one of its tenant's identities."""
    cluster.run("apply", "--server-side", "-f", str(_operator_crds() / "pulumi.com_stacks.yaml"))
    deadline = time.monotonic() + 60
    while not any(
        c["type"] == "Established" and c["status"] == "True"
        for c in cluster.get("crd", name="stacks.pulumi.com").get("status", {}).get("conditions") or []
    ):
        assert time.monotonic() < deadline, "the Stack CRD was not established in 60 s"
        time.sleep(0.2)
    if "tfk8s-gitops" not in {n["metadata"]["name"] for n in cluster.get("namespaces")}:  # the team's, made once
        cluster.run("create", "namespace", "tfk8s-gitops")
    repo = tmp_path / "repo"
    (repo / "stacks").mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", repo / "Pulumi.yaml")
    shutil.copy(ROOT / "stacks" / "team.yaml", repo / "stacks")  # whose accounts get cluster-admin
    for stack in ("platform-dev", "tenant-alice", "dev"):
        shutil.copy(ROOT / "stacks" / f"Pulumi.{stack}.yaml", repo / "stacks")
    tenant = yaml.safe_load((repo / "stacks" / "Pulumi.tenant-alice.yaml").read_text())
    tenant["config"]["tfk8s:tenant"]["identities"]["users"].append("system:serviceaccount:tfk8s-gitops:tfk8s-dev")
    (repo / "stacks" / "Pulumi.tenant-alice.yaml").write_text(yaml.safe_dump(tenant))
    for command in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "stacks"]):
        subprocess.run(["git", "-C", str(repo), *command], check=True, capture_output=True)
    backend = "s3://tfk8s-state?endpoint=https://s3.example.com&s3ForcePathStyle=true"
    rendered = {}
    for stack in ("platform-dev", "tenant-alice", "dev"):
        out = subprocess.run(
            [str(ROOT / "hack" / "gitops.sh"), "--checkout", str(repo), "operator-stack", stack]
            + ["--repo", "https://git.example.com/ml/tfk8s.git", "--backend", backend],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        path = tmp_path / f"{stack}.yaml"
        path.write_text(out)
        created = cluster.run("create", "--dry-run=server", "--validate=strict", "-f", str(path), "-o", "name")
        rendered[stack] = {line.split("/")[0] for line in created.split()}
        (stack_object,) = [d for d in yaml.safe_load_all(out) if d["kind"] == "Stack"]
        assert stack_object["spec"]["backend"] == backend
        assert {ref["type"] for ref in stack_object["spec"]["envRefs"].values()} == {"Secret"}  # no value inline
        read = {ref["secret"]["name"] for ref in stack_object["spec"]["envRefs"].values()}
        team = stack != "dev"  # an experiment's workspace gets its tenant's secrets, never the team's
        assert read == ({"tfk8s-gitops-passphrase", "tfk8s-gitops-s3"} if team else set(operator.tenant_secrets("alice"))), stack
    assert rendered["dev"] == {"serviceaccount", "clusterrolebinding.rbac.authorization.k8s.io", "stack.pulumi.com"}
    # The API server refuses what the CRD does not define: the validation above is not a formality.
    bad = tmp_path / "bad.yaml"
    stack_object["spec"]["destroyOnFinalise"] = True
    bad.write_text(yaml.safe_dump(stack_object))
    refused = subprocess.run(
        [
            cluster.binary,
            "--kubeconfig",
            str(cluster.kubeconfig),
            "create",
            "--dry-run=server",
            "--validate=strict",
            "-f",
            str(bad),
        ],
        capture_output=True,
        text=True,
    )
    assert refused.returncode != 0 and 'unknown field "spec.destroyOnFinalise"' in refused.stderr, refused.stderr
