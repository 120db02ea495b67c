"""`apply --parallel N` (tfk8s_gitops.schedule) with a fake `pulumi`: steps run at once where the
plan's order allows, never before what they build on, a failure skips exactly what it skipped one
by one, and the report keeps the plan's order. And what one apply step runs: a new stack's `up`
without `--refresh` or a preview, its `ready` from the `up`'s own events."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tfk8s_gitops import drift, pipeline, salts, summary
from tfk8s_gitops.engine import Result
from tfk8s_gitops.pipeline import DONE, FAILED, SKIPPED, Options
from tfk8s_gitops.plan import Plan, Step


@dataclass
class Cli:
    """What the fake `pulumi` does and saw, shared by every CLI of a run (the team's and each
    experiment's): `run` sleeps `seconds[stack]`, waits at `barrier` when the stack is one of
    `meet`, fails for the stacks in `fail`."""

    seconds: dict[str, float] = field(default_factory=dict)
    fail: set[str] = field(default_factory=set)
    meet: set[str] = field(default_factory=set)
    barrier: threading.Barrier = field(default_factory=lambda: threading.Barrier(2, timeout=5))
    events: list[tuple[str, str]] = field(default_factory=list)
    """("start" | "end", stack) in the order they happened."""
    commands: list[tuple[str, ...]] = field(default_factory=list)
    existing: set[str] | None = None
    """The stacks the backend has (None: every one)."""
    outputs: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    """The outputs an `up`'s events report, per stack (default: `ready` true)."""
    runs: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    """(stack, arguments) of each `run`, in the order they started."""
    listings: int = 0
    """How many times the backend's stacks were listed."""
    exports: list[str] = field(default_factory=list)
    """The stacks whose state was exported, in order."""
    salts_at_init: dict[str, str | None] = field(default_factory=dict)
    """The salt each stack's workspace file held when `stack init` ran."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, *event: str) -> None:
        with self.lock:
            self.events.append((event[0], event[1]))

    def started(self) -> list[str]:
        return [stack for what, stack in self.events if what == "start"]


class Everything:
    def __contains__(self, item: object) -> bool:
        return True


class FakePulumi:
    cli: Cli

    def __init__(self, workspace: Any, env: dict[str, str], lock_wait: float = 600.0) -> None:
        self.env = env
        self.workspace = workspace

    def stack_names(self) -> Any:
        with self.cli.lock:
            self.cli.listings += 1
        return Everything() if self.cli.existing is None else set(self.cli.existing)

    def plain(self, *args: str) -> Any:
        with self.cli.lock:
            self.cli.commands.append(args)
            if args[:2] == ("stack", "init"):
                self.cli.salts_at_init[args[2]] = salts.of_file(self.workspace.stack_file(args[2]))
        return type("Done", (), {"returncode": 0, "stdout": "", "stderr": ""})()

    def run(self, stack: str, *args: str) -> Result:
        self.cli.record("start", stack)
        with self.cli.lock:
            self.cli.runs.append((stack, args))
        time.sleep(self.cli.seconds.get(stack, 0.0))
        if stack in self.cli.meet:
            self.cli.barrier.wait()  # broken (an error) unless the other one runs at the same time
        self.cli.record("end", stack)
        result = Result(" ".join(["pulumi", *args]), 1 if stack in self.cli.fail else 0, "", 0.0)
        if args[0] == "up" and result.ok:
            result.outputs = self.cli.outputs.get(stack, {"ready": True})
        return result

    def export(self, stack: str) -> dict[str, Any]:
        with self.cli.lock:
            self.cli.exports.append(stack)
        return {"deployment": {"secrets_providers": {"type": "passphrase", "state": {"salt": f"salt-of-{stack}"}}}}

    def external_urns(self, stack: str) -> set[str]:
        return set()


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Cli]:
    shared = Cli()
    monkeypatch.setattr(FakePulumi, "cli", shared, raising=False)
    monkeypatch.setattr(pipeline, "Pulumi", FakePulumi)
    stack_file = lambda self, stack: tmp_path / "stacks" / f"Pulumi.{stack}.yaml"  # noqa: E731
    workspace = type("Workspace", (), {"path": tmp_path, "close": lambda self: None, "stack_file": stack_file})()
    monkeypatch.setattr(pipeline, "open_workspace", lambda options: workspace)
    monkeypatch.setattr(pipeline, "impersonating_kubeconfig", lambda env, stack, directory: directory / stack)
    yield shared


def _options(parallel: int) -> Options:
    return Options(Path("."), {}, None, parallel=parallel)


def _fleet(*destroys: Step) -> Plan:
    """A platform, two tenants, an experiment of each and one of no tenant of this repository, in
    the plan's order (`make_plan`'s)."""
    steps = (
        *destroys,
        Step("p", "update", "platform", "changed", None),
        Step("t1", "update", "tenant", "downstream of p", "p"),
        Step("t2", "update", "tenant", "downstream of p", "p"),
        Step("e1", "update", "experiment", "downstream of p", "t1"),
        Step("e2", "update", "experiment", "downstream of p", "t2"),
        Step("lone", "update", "experiment", "changed", None),
    )
    return Plan("b" * 40, "h" * 40, steps, False)


def _outcomes(report: pipeline.Report) -> list[tuple[str, str, str]]:
    return [(s.stack, s.outcome, s.note) for s in report.steps]


def test_two_tenants_of_one_platform_run_at_the_same_time(cli: Cli) -> None:
    cli.meet = {"t1", "t2"}
    report = pipeline.apply(_fleet(), _options(parallel=4))
    assert report.ok, _outcomes(report)


def test_one_at_a_time_two_tenants_that_must_meet_cannot(cli: Cli) -> None:
    """The converse, proving the fake can tell: one by one, t1 waits at the barrier alone."""
    cli.meet, cli.barrier = {"t1", "t2"}, threading.Barrier(2, timeout=0.3)
    with pytest.raises(threading.BrokenBarrierError):
        pipeline.apply(_fleet(), _options(parallel=1))


def test_a_stack_never_starts_before_the_stacks_it_builds_on_finished(cli: Cli) -> None:
    cli.seconds = {"p": 0.2, "t1": 0.1}  # slow enough that anything started too early starts first
    report = pipeline.apply(_fleet(), _options(parallel=4))
    assert report.ok
    at = {event: n for n, event in enumerate(cli.events)}
    for stack, upstream in (("t1", "p"), ("t2", "p"), ("e1", "t1"), ("e2", "t2")):
        assert at[("end", upstream)] < at[("start", stack)], cli.events
    assert at[("start", "lone")] < at[("end", "p")], cli.events  # it builds on nothing planned


def test_updates_start_after_every_destroy_has_finished(cli: Cli) -> None:
    cli.seconds = {"old-exp": 0.2}
    plan = _fleet(Step("old-exp", "destroy", "experiment", "removed", "old-tenant"))
    assert pipeline.apply(plan, _options(parallel=4)).ok
    assert cli.events[:2] == [("start", "old-exp"), ("end", "old-exp")], cli.events


def test_a_failure_skips_exactly_what_builds_on_it(cli: Cli) -> None:
    cli.fail = {"t1", "old-exp"}
    plan = _fleet(
        Step("old-exp", "destroy", "experiment", "removed", "old-tenant"),
        Step("old-tenant", "destroy", "tenant", "removed", "p"),
    )
    outcomes = _outcomes(
        pipeline.apply(plan, pipeline.Options(Path("."), {}, None, confirmed_destroys=("old-tenant",), parallel=4))
    )
    assert outcomes == [
        ("old-exp", FAILED, ""),
        ("old-tenant", SKIPPED, "not run: old-exp still exists"),
        ("p", DONE, ""),
        ("t1", FAILED, ""),
        ("t2", DONE, ""),
        ("e1", SKIPPED, "not run: t1 failed"),
        ("e2", DONE, ""),
        ("lone", DONE, ""),
    ]
    assert "e1" not in cli.started() and "old-tenant" not in cli.started()


@pytest.mark.parametrize("parallel", [1, 4], ids=["one-by-one", "four-at-once"])
def test_a_skip_is_the_same_whatever_the_parallelism(cli: Cli, parallel: int) -> None:
    """A failed platform skips everything downstream with the note one-by-one gave: the nearest
    failed (or skipped) stack it builds on."""
    cli.fail = {"p"}
    outcomes = _outcomes(pipeline.apply(_fleet(), _options(parallel)))
    assert outcomes == [
        ("p", FAILED, ""),
        ("t1", SKIPPED, "not run: p failed"),
        ("t2", SKIPPED, "not run: p failed"),
        ("e1", SKIPPED, "not run: t1 failed"),
        ("e2", SKIPPED, "not run: t2 failed"),
        ("lone", DONE, ""),
    ]


def test_the_report_keeps_the_plans_order_whatever_order_the_steps_finish_in(cli: Cli) -> None:
    cli.seconds = {"t1": 0.3, "e2": 0.0, "lone": 0.2}
    report = pipeline.apply(_fleet(), _options(parallel=4))
    finished = [stack for what, stack in cli.events if what == "end"]
    planned = [s.stack for s in _fleet().steps]
    assert finished != planned  # the test means something: they did finish out of order
    assert [s.stack for s in report.steps] == planned
    rows = [line.split("`")[1] for line in summary.markdown(report).splitlines() if line.startswith("| ") and "`" in line]
    assert rows == planned


def test_one_at_a_time_runs_strictly_in_the_plans_order(cli: Cli) -> None:
    """`lone` could start first (it waits for nothing), and does not: --parallel 1 is the old line."""
    cli.seconds = {"p": 0.05, "t1": 0.05}
    assert pipeline.apply(_fleet(), _options(parallel=1)).ok
    planned = [s.stack for s in _fleet().steps]
    assert cli.events == [(what, stack) for stack in planned for what in ("start", "end")]


def test_previews_run_at_once_in_the_same_order_and_skip_nothing(cli: Cli) -> None:
    cli.fail, cli.meet = {"p"}, {"t1", "t2"}
    report = pipeline.preview(_fleet(), _options(parallel=4))
    assert [(s.stack, s.outcome) for s in report.steps] == [
        ("p", FAILED),
        ("t1", DONE),
        ("t2", DONE),
        ("e1", DONE),
        ("e2", DONE),
        ("lone", DONE),
    ]


def test_a_new_stack_is_created_without_selecting_it(cli: Cli) -> None:
    """`stack init` selects the new stack by default: a write to PULUMI_HOME's one file for the
    workspace, which steps running at once would all make."""
    cli.existing = set()
    assert pipeline.apply(_fleet(), _options(parallel=4)).ok
    inits = [c for c in cli.commands if c[:2] == ("stack", "init")]
    assert len(inits) == 6 and all("--no-select" in c for c in inits), inits


def test_the_backend_is_listed_once_per_run_not_once_per_stack(cli: Cli) -> None:
    """A listing reads every stack's entry in the backend: one per step would make a fleet of N
    stacks cost N x N reads. Stacks the run creates are known without listing again."""
    cli.existing = set()
    assert pipeline.apply(_fleet(), _options(parallel=4)).ok
    assert cli.listings == 1
    assert len([c for c in cli.commands if c[:2] == ("stack", "init")]) == 6


def test_an_experiments_kubeconfig_is_made_once_when_asked_from_many_threads(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    made: list[str] = []

    def slow_kubeconfig(env: dict[str, str], stack: str, directory: Path) -> Path:
        made.append(stack)
        time.sleep(0.05)  # long enough for every thread to ask before the first is done
        return directory / stack

    monkeypatch.setattr(pipeline, "impersonating_kubeconfig", slow_kubeconfig)
    workspace = type("Workspace", (), {"path": tmp_path})()
    clis = pipeline.Clis(workspace, Options(tmp_path, {}, None))  # type: ignore[arg-type]
    got: list[object] = []
    threads = [
        threading.Thread(target=lambda: got.append(clis.of(pipeline.StepReport("e1", "experiment", "update", "x"))))
        for _ in range(8)
    ]
    threads += [threading.Thread(target=lambda: got.append(clis.of(pipeline.StepReport("e2", "experiment", "update", "x"))))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(made) == ["e1", "e2"]
    assert len({id(c) for c in got}) == 2


def test_parallel_must_be_at_least_one() -> None:
    from tfk8s_gitops.__main__ import _parser

    with pytest.raises(SystemExit):
        _parser().parse_args(["apply", "--base", "x", "--parallel", "0"])
    assert _parser().parse_args(["apply", "--base", "x"]).parallel == 1


def test_drift_checks_stacks_at_once_and_reports_them_in_name_order(cli: Cli, tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    (checkout / "stacks").mkdir(parents=True)
    (checkout / "Pulumi.yaml").write_text("name: tfk8s\nstackConfigDir: stacks\n")
    for name in ("b-tenant", "a-platform", "c-exp"):
        (checkout / "stacks" / f"Pulumi.{name}.yaml").write_text("config: {}\n")
    for command in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "c"]):
        subprocess.run(["git", "-C", str(checkout), *command], check=True, capture_output=True)
    cli.meet, cli.seconds = {"a-platform", "c-exp"}, {"a-platform": 0.1}
    report = drift.check(checkout, Options(checkout, {}, None, parallel=3))
    assert [(s.stack, s.outcome) for s in report.steps] == [("a-platform", DONE), ("b-tenant", DONE), ("c-exp", DONE)]


def test_ready_is_read_from_the_ups_own_events_and_nothing_runs_after_the_up(cli: Cli) -> None:
    """A `pulumi stack output` after each `up` cost a CLI start and a key derivation per stack; the
    fake has no `outputs` command, and only `stack init` may run outside `run`."""
    cli.existing = {"p"}
    report = pipeline.apply(_fleet(), _options(parallel=4))
    assert report.ok and all(s.ready is True for s in report.steps), _outcomes(report)
    assert all(c[:2] == ("stack", "init") for c in cli.commands), cli.commands
    assert not hasattr(FakePulumi, "outputs")


@pytest.mark.parametrize(
    ("outputs", "note"),
    [
        ({"ready": False, "notReady": ["jupyter"]}, "its `ready` output is not true"),
        ({"platform": {}}, "its `ready` output is not true"),
        ({"ready": "[secret]"}, "its `ready` output is not true"),  # the engine masks a secret output
        (None, "its events report no outputs"),
    ],
    ids=["false", "missing", "secret", "no-outputs-event"],
)
def test_an_up_without_ready_true_fails_its_step_and_skips_what_builds_on_it(
    cli: Cli, outputs: dict[str, Any] | None, note: str
) -> None:
    cli.outputs = {"t1": outputs}
    report = pipeline.apply(_fleet(), _options(parallel=4))
    steps = {s.stack: s for s in report.steps}
    assert not report.ok
    assert (steps["t1"].outcome, steps["t1"].ready) == (FAILED, False) and note in steps["t1"].note
    assert steps["e1"].outcome == SKIPPED and steps["t2"].outcome == DONE and steps["t2"].ready is True


def test_an_existing_stack_is_refreshed_and_previewed_and_one_this_apply_creates_is_neither(cli: Cli) -> None:
    """`up --refresh` reads every object of the state back first, and `up` previews before it changes
    anything; a stack `stack init` just made has no object to read back or to protect."""
    cli.existing = {"p", "e1"}
    assert pipeline.apply(_fleet(), _options(parallel=4)).ok
    modes = {stack: ("--refresh" in args, "--skip-preview" in args) for stack, args in cli.runs}
    existing, new = (True, False), (False, True)
    assert modes == {"p": existing, "t1": new, "t2": new, "e1": existing, "e2": new, "lone": new}
    assert sorted(c[2] for c in cli.commands if c[:2] == ("stack", "init")) == ["e2", "lone", "t1", "t2"]


def _stack_files(directory: Path, **salted: str) -> None:
    """The fleet's stack files in the workspace, `salted` ones with that salt."""
    (directory / "stacks").mkdir()
    for stack in ("p", "t1", "t2", "e1", "e2", "lone"):
        salt = f"{salts.SALT_KEY}: {salted[stack]}\n" if stack in salted else ""
        (directory / "stacks" / f"Pulumi.{stack}.yaml").write_text(f"{salt}config: {{}}\n")


def test_new_tenants_take_their_platforms_salt_from_its_state_once_per_run(cli: Cli, tmp_path: Path) -> None:
    """A tenant's `up` decrypts its platform's outputs: one salt for both is one key derivation per
    command, not two (tfk8s_gitops.salts). The checkout's platform file holds no salt: its state has it."""
    _stack_files(tmp_path)
    cli.existing = {"p"}
    assert pipeline.apply(_fleet(), _options(parallel=4)).ok
    assert cli.exports == ["p"], cli.exports
    assert cli.salts_at_init == {"t1": "salt-of-p", "t2": "salt-of-p", "e1": None, "e2": None, "lone": None}


def test_a_platform_salt_in_the_workspace_is_used_without_reading_the_state(cli: Cli, tmp_path: Path) -> None:
    """A platform this run created, or one whose committed file holds its salt."""
    _stack_files(tmp_path, p="v1:committed")
    cli.existing = {"p", "t2"}
    assert pipeline.apply(_fleet(), _options(parallel=4)).ok
    assert cli.exports == [] and cli.salts_at_init["t1"] == "v1:committed" and "t2" not in cli.salts_at_init


def test_another_secrets_provider_has_no_salt_to_share(cli: Cli, tmp_path: Path) -> None:
    _stack_files(tmp_path)
    cli.existing = {"p"}
    options = Options(Path("."), {}, None, secrets_provider="awskms://alias/tfk8s", parallel=4)
    assert pipeline.apply(_fleet(), options).ok
    assert cli.exports == [] and set(cli.salts_at_init.values()) == {None}
