"""The GitOps plan (tfk8s_gitops.plan) on real git repositories: which stacks a change touches, in
which order their operations run, and which steps a failure blocks."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from tfk8s_gitops.plan import NotPlanned, Plan, Step, make_plan
from tfk8s_gitops.repo import NO_COMMIT, GitError, Repo, TeamFileError

PROJECT = {"name": "tfk8s", "runtime": "python", "main": "infra/", "stackConfigDir": "stacks"}
# The team file (tfk8s_gitops.repo.TEAM_FILE) of the fixture's repository.
TEAM = {"platforms": ["platform-dev"], "tenants": ["tenant-alice", "tenant-bob"]}


def _platform() -> dict[str, object]:
    return {"tfk8s:kind": "platform"}


def _tenant(platform: str, name: str = "alice") -> dict[str, object]:
    return {"tfk8s:kind": "tenant", "tfk8s:platformStack": platform, "tfk8s:tenant": {"name": name}}


def _experiment(tenant: str, workers: int = 2) -> dict[str, object]:
    """An experiment of the tenant `tenant-<name>` (on a platform with the default namespace prefix)."""
    return {
        "tfk8s:kind": "experiment",
        "tfk8s:namespace": f"tfk8s-{tenant.removeprefix('tenant-')}",
        "tfk8s:clusters": [{"name": "m", "workers": {"count": workers}}],
    }


class GitRepo:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.email", "t@example.com")
        self.git("config", "user.name", "t")

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.root), *args], check=True, capture_output=True, text=True).stdout.strip()

    def commit(self, stacks: dict[str, dict[str, object] | None], files: dict[str, str] | None = None) -> str:
        (self.root / "stacks").mkdir(exist_ok=True)
        for name, config in stacks.items():
            path = self.root / "stacks" / f"Pulumi.{name}.yaml"
            if config is None:
                path.unlink()
            else:
                path.write_text(yaml.safe_dump({"config": config}))
        for name, text in (files or {}).items():
            (self.root / name).parent.mkdir(parents=True, exist_ok=True)
            (self.root / name).write_text(text)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", "change")
        return self.git("rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    result = GitRepo(tmp_path)
    result.commit(
        {
            "platform-dev": _platform(),
            "tenant-alice": _tenant("platform-dev"),
            "tenant-bob": _tenant("platform-dev", "bob"),
            "dev": _experiment("tenant-alice"),
            "big": _experiment("tenant-bob"),
        },
        {
            "Pulumi.yaml": yaml.safe_dump(PROJECT),
            "stacks/team.yaml": yaml.safe_dump(TEAM),
            "infra/tfk8s/program.py": "# v1\n",
            "README.md": "v1\n",
        },
    )
    return result


def _steps(plan: Plan) -> list[tuple[str, str, str]]:
    return [(s.action, s.stack, s.reason) for s in plan.steps]


def test_a_changed_experiment_is_its_only_step(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    head = repo.commit({"dev": _experiment("tenant-alice", workers=3)})
    assert _steps(make_plan(Repo(repo.root), base, head)) == [("update", "dev", "changed")]


def test_a_changed_platform_updates_everything_downstream_in_kind_order(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    head = repo.commit({"platform-dev": {"tfk8s:kind": "platform", "tfk8s:platform": {"awaitTimeoutSeconds": 60}}})
    assert _steps(make_plan(Repo(repo.root), base, head)) == [
        ("update", "platform-dev", "changed"),
        ("update", "tenant-alice", "downstream of platform-dev"),
        ("update", "tenant-bob", "downstream of platform-dev"),
        ("update", "big", "downstream of platform-dev"),
        ("update", "dev", "downstream of platform-dev"),
    ]


def test_removed_stacks_are_destroyed_first_experiments_before_their_tenant(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    head = repo.commit({"tenant-bob": None, "big": None, "dev": _experiment("tenant-alice", workers=4)})
    assert _steps(make_plan(Repo(repo.root), base, head)) == [
        ("destroy", "big", "removed"),
        ("destroy", "tenant-bob", "removed"),
        ("update", "dev", "changed"),
    ]


def test_a_program_change_updates_every_stack_and_a_readme_change_none(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    docs = repo.commit({}, {"README.md": "v2\n"})
    assert make_plan(Repo(repo.root), base, docs).steps == ()
    program = repo.commit({}, {"infra/tfk8s/program.py": "# v2\n"})
    plan = make_plan(Repo(repo.root), docs, program)
    assert plan.program_changed
    assert [s.stack for s in plan.steps] == ["platform-dev", "tenant-alice", "tenant-bob", "big", "dev"]
    assert {s.reason for s in plan.steps} == {"program changed"}


def test_a_first_push_has_no_base_and_updates_everything(repo: GitRepo) -> None:
    plan = make_plan(Repo(repo.root), NO_COMMIT, "HEAD")
    assert [(s.action, s.stack) for s in plan.steps][:3] == [
        ("update", "platform-dev"),
        ("update", "tenant-alice"),
        ("update", "tenant-bob"),
    ]
    assert len(plan.steps) == 5 and {s.reason for s in plan.steps} == {"added"} and not plan.program_changed


def test_a_renamed_stack_file_is_a_destroy_and_a_create(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    repo.git("mv", "stacks/Pulumi.dev.yaml", "stacks/Pulumi.dev2.yaml")
    repo.git("commit", "-q", "-m", "rename")
    assert _steps(make_plan(Repo(repo.root), base, "HEAD")) == [("destroy", "dev", "removed"), ("update", "dev2", "added")]


def test_another_projects_stack_reference_is_not_ordered(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    head = repo.commit(
        {
            "ext": _tenant("acme/other-project/platform-dev"),
            "ext2": _tenant("other-project/platform-dev"),
            "own": _tenant("organization/tfk8s/platform-dev"),
            "own2": _tenant("tfk8s/platform-dev"),  # project/stack: the form the schema's messages offer
        }
    )
    plan = make_plan(Repo(repo.root), base, head)
    assert {s.stack: s.upstream for s in plan.steps} == {"ext": None, "ext2": None, "own": "platform-dev", "own2": "platform-dev"}


def test_files_outside_the_stack_folder_are_not_stacks(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    head = repo.commit({}, {"Pulumi.stray.yaml": "config: {}\n", "stacks/sub/Pulumi.deep.yaml": "config: {}\n"})
    assert make_plan(Repo(repo.root), base, head).steps == ()


def test_an_unknown_commit_is_a_clear_error(repo: GitRepo) -> None:
    with pytest.raises(GitError, match="rev-parse"):
        make_plan(Repo(repo.root), "f" * 40, "HEAD")


def _plan(*steps: Step) -> Plan:
    return Plan("b" * 40, "h" * 40, steps, False)


def test_an_update_is_blocked_by_any_failed_stack_it_builds_on() -> None:
    plan = _plan(
        Step("p", "update", "platform", "changed", None),
        Step("t", "update", "tenant", "downstream of p", "p"),
        Step("e", "update", "experiment", "downstream of p", "t"),
        Step("other", "update", "tenant", "changed", "q"),
    )
    assert plan.blocked_by(plan.step("e"), ["p"]) == "p"  # two levels up
    assert plan.blocked_by(plan.step("e"), ["t"]) == "t"
    assert plan.blocked_by(plan.step("other"), ["p", "t"]) is None
    assert plan.blocked_by(plan.step("t"), ["e"]) is None  # a failure downstream blocks nothing above


def test_a_destroy_is_blocked_by_a_failed_destroy_of_a_stack_built_on_it() -> None:
    plan = _plan(
        Step("e", "destroy", "experiment", "removed", "t"),
        Step("t", "destroy", "tenant", "removed", "p"),
        Step("p", "destroy", "platform", "removed", None),
    )
    assert plan.blocked_by(plan.step("t"), ["e"]) == "e"
    assert plan.blocked_by(plan.step("p"), ["e"]) == "e"
    assert plan.blocked_by(plan.step("e"), ["t"]) is None


# --- what must wait for what (apply --parallel, the workflow's waves) -------------------------------


def _after(plan: Plan) -> dict[str, set[str]]:
    return {s.stack: plan.after(s) for s in plan.steps}


def test_tenants_of_one_platform_and_experiments_of_one_tenant_never_wait_for_each_other(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    head = repo.commit({"dev2": _experiment("tenant-alice")}, {"infra/tfk8s/program.py": "# v2\n"})
    plan = make_plan(Repo(repo.root), base, head)
    assert _after(plan) == {
        "platform-dev": set(),
        "tenant-alice": {"platform-dev"},
        "tenant-bob": {"platform-dev"},
        "big": {"tenant-bob", "platform-dev"},
        "dev": {"tenant-alice", "platform-dev"},
        "dev2": {"tenant-alice", "platform-dev"},
    }
    assert plan.waves() == {"platform-dev": 0, "tenant-alice": 1, "tenant-bob": 1, "big": 2, "dev": 2, "dev2": 2}


def test_updates_wait_for_every_destroy_and_a_destroy_for_the_destroys_of_what_is_built_on_it(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    head = repo.commit({"tenant-bob": None, "big": None, "dev": _experiment("tenant-alice", workers=4)})
    plan = make_plan(Repo(repo.root), base, head)
    assert _after(plan) == {"big": set(), "tenant-bob": {"big"}, "dev": {"big", "tenant-bob"}}
    assert plan.waves() == {"big": 0, "tenant-bob": 1, "dev": 2}


def test_removing_every_stack_destroys_experiments_then_tenants_then_the_platform_in_three_waves(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    head = repo.commit({"platform-dev": None, "tenant-alice": None, "tenant-bob": None, "dev": None, "big": None})
    plan = make_plan(Repo(repo.root), base, head)
    assert _after(plan)["platform-dev"] == {"tenant-alice", "tenant-bob", "dev", "big"}
    assert _after(plan)["tenant-alice"] == {"dev"}  # not bob's experiment
    assert plan.waves() == {"big": 0, "dev": 0, "tenant-alice": 1, "tenant-bob": 1, "platform-dev": 2}


def test_a_first_push_is_three_waves_and_a_lone_experiment_one(repo: GitRepo) -> None:
    first = make_plan(Repo(repo.root), NO_COMMIT, "HEAD")
    assert sorted(first.waves().values()) == [0, 1, 1, 2, 2]
    base = repo.git("rev-parse", "HEAD")
    lone = make_plan(Repo(repo.root), base, repo.commit({"dev": _experiment("tenant-alice", workers=3)}))
    assert _after(lone) == {"dev": set()} and lone.waves() == {"dev": 0}


def test_a_step_waits_only_for_steps_before_it_so_a_cycle_of_references_cannot_deadlock() -> None:
    """Two tenants naming each other as their platform (the program refuses both): the plan's order
    decides, as it did when steps ran one by one."""
    plan = _plan(
        Step("a", "update", "tenant", "changed", "b"),
        Step("b", "update", "tenant", "changed", "a"),
    )
    assert _after(plan) == {"a": set(), "b": {"a"}}
    assert plan.waves() == {"a": 0, "b": 1}


def test_plan_json_gives_each_step_its_wave(repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    from tfk8s_gitops.__main__ import main

    assert main(["--checkout", str(repo.root), "plan", "--base", NO_COMMIT, "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)
    assert [(s["stack"], s["wave"]) for s in steps] == [
        ("platform-dev", 0),
        ("tenant-alice", 1),
        ("tenant-bob", 1),
        ("big", 2),
        ("dev", 2),
    ]


def test_a_stack_not_in_the_plan_names_what_is() -> None:
    plan = _plan(Step("e", "update", "experiment", "changed", None))
    with pytest.raises(NotPlanned, match=r"'x' is not in the plan .* \(planned: e\)"):
        plan.step("x")


# --- what a merge alone may not run --------------------------------------------------------------


def test_removing_a_tenant_needs_its_destroy_confirmed_and_an_experiment_does_not(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    head = repo.commit({"tenant-bob": None, "big": None})
    plan = make_plan(Repo(repo.root), base, head)
    (reason,) = plan.unconfirmed((), config_dir_move=False)
    assert "destroys the tenant tenant-bob: confirm with --confirm-destroy tenant-bob" in reason
    assert plan.unconfirmed(["tenant-bob"], config_dir_move=False) == []
    # An experiment alone is its tenant's people's to remove: no confirmation.
    only_experiment = make_plan(Repo(repo.root), head, repo.commit({"dev": None}))
    assert only_experiment.unconfirmed((), config_dir_move=False) == []


def test_removing_every_stack_file_names_the_platform_and_each_tenant(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    head = repo.commit({"platform-dev": None, "tenant-alice": None, "tenant-bob": None, "dev": None, "big": None})
    reasons = make_plan(Repo(repo.root), base, head).unconfirmed(["tenant-alice"], config_dir_move=False)
    assert [r.split(":")[0] for r in reasons] == [
        "the removal of tenant-bob's stack file destroys the tenant tenant-bob",
        "the removal of platform-dev's stack file destroys the platform platform-dev",
    ]


def test_a_moved_stack_folder_needs_confirming_even_when_the_files_moved_along(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    repo.git("mv", "stacks", "team-stacks")
    head = repo.commit({}, {"Pulumi.yaml": yaml.safe_dump({**PROJECT, "stackConfigDir": "team-stacks"})})
    plan = make_plan(Repo(repo.root), base, head)
    assert plan.config_dir_move == ("stacks", "team-stacks")
    (reason,) = plan.unconfirmed((), config_dir_move=False)
    assert "stackConfigDir moves from 'stacks' to 'team-stacks'" in reason and "--confirm-config-dir-move" in reason
    assert plan.unconfirmed((), config_dir_move=True) == []
    # Moved to a folder without the files: every stack is destroyed, so each platform and tenant is named too.
    emptied = make_plan(
        Repo(repo.root), base, repo.commit({}, {"Pulumi.yaml": yaml.safe_dump({**PROJECT, "stackConfigDir": "elsewhere"})})
    )
    assert len(emptied.unconfirmed((), config_dir_move=True)) == 3


def test_an_unconfirmed_apply_runs_no_pulumi_command_at_all(repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    from tfk8s_gitops import pipeline, summary

    base = repo.git("rev-parse", "HEAD")
    head = repo.commit({"tenant-bob": None, "big": None})
    plan = make_plan(Repo(repo.root), base, head)

    def no_workspace(options: pipeline.Options) -> None:
        raise AssertionError("an unconfirmed apply reached the workspace")

    monkeypatch.setattr(pipeline, "open_workspace", no_workspace)
    for only in (None, "big"):  # CI runs one job per stack: the experiment's job refuses too
        report = pipeline.apply(plan, pipeline.Options(repo.root, {}, None), only)
        assert not report.ok and report.steps == []
        text = summary.markdown(report)
        assert "**Refused: nothing was changed.**" in text and "--confirm-destroy tenant-bob" in text


def test_an_experiment_builds_on_the_tenant_stack_that_holds_its_namespace(repo: GitRepo) -> None:
    """An experiment names a namespace, not a stack: the tenant holding it is its tenant's user name
    behind its platform's namespace prefix; a namespace no tenant of the repository holds orders nothing."""
    head = repo.commit(
        {
            "lab": {"tfk8s:kind": "platform", "tfk8s:platform": {"namespacePrefix": "ml-"}},
            "platform-dev": _platform(),
            "t-lab": _tenant("lab", "carol"),
            "t-dev": _tenant("platform-dev", "carol"),
            "on-lab": {**_experiment("tenant-x"), "tfk8s:namespace": "ml-carol"},
            "on-dev": _experiment("tenant-carol"),
            "nowhere": _experiment("tenant-dave"),
        }
    )
    files = Repo(repo.root).stack_files(head)
    assert {name: files[name].upstream for name in ("on-lab", "on-dev", "nowhere", "t-lab")} == {
        "on-lab": "t-lab",
        "on-dev": "t-dev",
        "nowhere": None,
        "t-lab": "lab",
    }


# --- whose credentials: the team file at the base, never the file being applied ----------------


def test_only_the_stacks_the_base_declares_run_with_the_teams_credentials(repo: GitRepo) -> None:
    plan = make_plan(Repo(repo.root), NO_COMMIT, "HEAD")  # a first push: the team's own file
    assert {s.stack: s.team for s in plan.steps} == {
        "platform-dev": True,
        "tenant-alice": True,
        "tenant-bob": True,
        "big": False,
        "dev": False,
    }
    assert plan.refusals == {}


def test_a_merged_file_claiming_kind_tenant_is_refused_before_anything_runs(repo: GitRepo) -> None:
    """Even when the same change declares it: the declaration counts from the commit after it."""
    base = repo.git("rev-parse", "HEAD")
    head = repo.commit(
        {"tenant-mallory": _tenant("platform-dev", "mallory")},
        {"stacks/team.yaml": yaml.safe_dump({**TEAM, "tenants": [*TEAM["tenants"], "tenant-mallory"]})},
    )
    plan = make_plan(Repo(repo.root), base, head)
    (step,) = [s for s in plan.steps if s.stack == "tenant-mallory"]
    assert step.team is False
    (why,) = plan.refusals.values()
    assert why.startswith("stacks/Pulumi.tenant-mallory.yaml says tfk8s:kind tenant, but stacks/team.yaml at ")
    assert "declare it there first, in a change of its own" in why
    # Declared by the commit before it, the same file runs with the team's credentials.
    again = make_plan(Repo(repo.root), head, repo.commit({"tenant-mallory": _tenant("platform-dev", "mallory2")}))
    assert again.refusals == {} and again.step("tenant-mallory").team


def test_a_declared_tenants_file_that_turns_experiment_keeps_no_credentials(repo: GitRepo) -> None:
    base = repo.git("rev-parse", "HEAD")
    head = repo.commit({"tenant-bob": _experiment("tenant-alice")})
    plan = make_plan(Repo(repo.root), base, head)
    assert "declares tenant-bob a tenant: a team stack's file keeps its kind" in plan.refusals["tenant-bob"]


def test_an_unconfirmed_or_undeclared_apply_refuses_whole(repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    from tfk8s_gitops import pipeline, summary

    base = repo.git("rev-parse", "HEAD")
    head = repo.commit({"tenant-mallory": _tenant("platform-dev", "mallory"), "dev": _experiment("tenant-alice", 3)})
    plan = make_plan(Repo(repo.root), base, head)
    monkeypatch.setattr(pipeline, "open_workspace", lambda options: (_ for _ in ()).throw(AssertionError("ran")))
    for only in (None, "dev"):
        report = pipeline.apply(plan, pipeline.Options(repo.root, {}, None), only)
        assert not report.ok and report.steps == []
        assert "does not declare tenant-mallory" in summary.markdown(report)


def test_a_new_stack_under_a_removed_experiments_name_is_refused(repo: GitRepo) -> None:
    """Its tenant may still list the old identity: a new file must not inherit it."""
    removed = repo.commit({"dev": None})
    back = repo.commit({"dev": _experiment("tenant-bob")})
    why = make_plan(Repo(repo.root), removed, back).refusals["dev"]
    assert f"a stack named dev was removed at {removed[:12]}" in why
    assert "system:serviceaccount:tfk8s-gitops:tfk8s-dev" in why and "name the new stack differently" in why
    fresh = make_plan(Repo(repo.root), removed, repo.commit({"dev2": _experiment("tenant-bob")}))
    assert "dev2" not in fresh.refusals
    # A removed tenant that comes back is the team's, declared: no identity of its own to inherit.
    gone = repo.commit({"tenant-bob": None, "big": None})
    assert make_plan(Repo(repo.root), gone, repo.commit({"tenant-bob": _tenant("platform-dev", "bob")})).refusals == {}


def test_a_shallow_clone_cannot_tell_a_reused_name(repo: GitRepo, tmp_path: Path) -> None:
    base = repo.git("rev-parse", "HEAD")
    repo.commit({"exp-new": _experiment("tenant-alice")})
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "2", f"file://{repo.root}", str(shallow)], check=True)
    with pytest.raises(GitError, match=r"the checkout is shallow: .*fetch-depth: 0"):
        make_plan(Repo(shallow), base, "HEAD")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("platforms: [a]\nadmins: [b]\n", r"only `platforms` and `tenants` .* not \['admins'\]"),
        ("tenants: tenant-alice\n", r"`tenants` must be a list of stack names, got 'tenant-alice'"),
        ("platforms: [a]\ntenants: [a]\n", r"a is declared both a platform and a tenant"),
        ("- a\n", r"only `platforms` and `tenants`"),
    ],
    ids=["unknown-key", "not-a-list", "both-kinds", "not-a-mapping"],
)
def test_a_malformed_team_file_names_the_key_and_the_fix(repo: GitRepo, text: str, match: str) -> None:
    head = repo.commit({}, {"stacks/team.yaml": text})
    with pytest.raises(TeamFileError, match=match):
        make_plan(Repo(repo.root), head, repo.commit({"dev": _experiment("tenant-alice", 5)}))
