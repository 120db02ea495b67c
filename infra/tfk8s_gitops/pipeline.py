"""Two of the three runs of a GitOps pipeline, one `Report` each (the third, `drift` on a
schedule, is `tfk8s_gitops.drift`):

- `preview` (a pull request): `pulumi preview --diff` of every planned update with the policy pack,
  `pulumi destroy --preview-only` of every removed stack file; nothing changes but a new stack's
  empty entry in the backend (a preview needs the stack to exist). In a pull request's own job
  (`Options.recorded_state`), its experiments alone, against the state the team's job exported,
  as the environment's identity (the preview identity), in a scratch backend: nothing of the
  team's is read or written (tfk8s_gitops.recorded_state);
- `apply` (a merge): the destroys, then `pulumi up` with the policy pack and the stack's `ready`
  output, from the `up`'s own events; a step is skipped when a stack it depends on failed
  (`Plan.blocked_by`); `parallel` steps at a time where the plan's order allows
  (`tfk8s_gitops.schedule`; the default, 1, runs them one by one in the plan's order). A stack that
  exists is refreshed and previewed first (`--refresh`, and `up`'s own preview): one whose preview
  fails, a mandatory policy included, is never updated. A stack this step creates skips both
  (`--skip-preview`): it has no object to refresh and none a half-made update could harm; its stack
  policies cannot judge it in a preview (its outputs are not known yet: they run in the `up`, after
  its objects exist, either way); and the engine runs every resource policy on each object before
  creating it, in `up` as in a preview. So a refused new stack holds what passed and never what was
  refused, and its step fails. The preview ran the program, the pack and the provider once more: a
  third of a new tenant's step (docs/benchmarks.md "A fleet").
A removed experiment's destroy leaves its tenant's volumes: they are the tenant stack's
(`keepOnDestroy`, docs/guide/tenants.md).

Every command on an experiment runs as the experiment's own identity (`tfk8s_gitops.identity`): the
pipeline's kubeconfig, impersonating `system:serviceaccount:tfk8s-gitops:tfk8s-<stack>`. The
platforms and tenants the team file declares run with the pipeline's credentials; a stack file
whose kind disagrees with it runs with neither (`Plan.refusals`: an apply runs nothing, a preview
shows why beside the other stacks' previews).

Steps that run at once share the run's workspace and PULUMI_HOME. What each writes is its own: its
stack file in the workspace (`stack init`'s salt), its impersonating kubeconfig, its event log (a
temporary directory per command); the state and its lock are the backend's, per stack. The one file
every command could write is PULUMI_HOME's record of the workspace's selected stack: `stack init`
selects the new stack unless told not to, and no command here selects one (each names `--stack`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from tfk8s.settings.state_store import state_id

from tfk8s_gitops import recorded_state, salts
from tfk8s_gitops.engine import Pulumi, Result, Workspace
from tfk8s_gitops.identity import ImpersonationError, impersonating_kubeconfig
from tfk8s_gitops.plan import Plan, Step
from tfk8s_gitops.recorded_state import Recorded, previewed
from tfk8s_gitops.repo import Repo
from tfk8s_gitops.schedule import run as run_steps

# Without it, an apply refuses to take back a field a person changed with kubectl (a server-side
# apply conflict naming their field manager); with it (`apply --force-conflicts`), git wins.
FORCE_CONFLICTS_ENV = "PULUMI_K8S_ENABLE_PATCH_FORCE"
# Outcomes of a step, as the summary shows them.
DONE, FAILED, SKIPPED = "ok", "failed", "skipped"


@dataclass
class StepReport:
    stack: str
    kind: str | None
    action: str
    reason: str
    team: bool = False
    """Runs with the pipeline's own credentials (the team file declares it)."""
    outcome: str = DONE
    result: Result | None = None
    ready: bool | None = None
    note: str = ""

    @property
    def done(self) -> bool:
        """Neither failed nor skipped: the steps after it may run."""
        return self.outcome == DONE


@dataclass
class Report:
    mode: str
    plan: Plan | None
    steps: list[StepReport] = field(default_factory=list)
    seconds: float = 0.0
    refused: list[str] = field(default_factory=list)
    """Why nothing ran (an apply that needs a person's confirmation); in a preview, what its merge will need."""

    @property
    def ok(self) -> bool:
        return all(s.outcome != FAILED for s in self.steps) and not (self.refused and self.mode == "apply")


@dataclass(frozen=True)
class Options:
    checkout: Path
    env: Mapping[str, str]
    policy_pack: Path | None
    secrets_provider: str | None = None
    lock_wait: float = 600.0
    confirmed_destroys: tuple[str, ...] = ()
    """Platforms and tenants a person confirmed the destroy of (`apply --confirm-destroy`)."""
    confirmed_config_dir_move: bool = False
    parallel: int = 1
    """Steps run at once where the plan's order allows (`--parallel`); 1: one by one, in order."""
    recorded_state: Recorded | None = None
    """A pull request's job (`preview --recorded-state`): its experiments previewed against the team
    job's export, as the environment's identity, in a scratch backend (tfk8s_gitops.recorded_state)."""


def open_workspace(checkout: Path) -> Workspace:
    repo = Repo(checkout)
    _, folder = repo.project("HEAD")
    return Workspace(checkout, folder)


class Clis:
    """The CLI each stack runs with: the team's for platforms and tenants, one impersonating the
    stack's own identity for every other kind (its kubeconfig made once per run, by one thread
    at a time per stack: two stacks' are made at once)."""

    def __init__(self, workspace: Workspace, options: Options) -> None:
        self.workspace = workspace
        self.options = options
        self.team = Pulumi(workspace, options.env, options.lock_wait)
        self._own: dict[str, Pulumi] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._stacks: set[str] | None = None
        self._salts: dict[str, str | None] = {}

    def platform_salt(self, platform: str) -> str | None:
        """`platform`'s encryption salt (tfk8s_gitops.salts): its stack file in the workspace, where
        the CLI writes it, else its state's; found once per run, by one thread at a time."""
        with self._lock:
            if platform not in self._salts:
                salt = salts.of_file(self.workspace.stack_file(platform))
                if salt is None and platform in (self._stacks or set()):
                    salt = salts.of_export(self.team.export(platform))
                self._salts[platform] = salt
            return self._salts[platform]

    def exists(self, stack: str) -> bool:
        """Whether the backend has `stack`: listed once per run (a listing reads every stack's entry,
        so one per step would cost a fleet of N stacks N x N reads), then kept by `created`. Against
        recorded state: whether the team's job exported it."""
        with self._lock:
            if self._stacks is None:
                recorded = self.options.recorded_state
                self._stacks = set(recorded.stacks) if recorded else self.team.stack_names()
            return stack in self._stacks

    def created(self, stack: str) -> None:
        with self._lock:
            if self._stacks is not None:
                self._stacks.add(stack)

    def of(self, entry: StepReport) -> Pulumi | None:
        """The CLI for `entry`'s stack; None, with `entry` failed and why, when the pipeline cannot
        act as the stack."""
        if entry.team or self.options.recorded_state:  # the preview identity impersonates no one
            return self.team
        with self._lock:
            lock = self._locks.setdefault(entry.stack, threading.Lock())
        with lock:
            if entry.stack not in self._own:
                try:
                    kubeconfig = impersonating_kubeconfig(self.options.env, entry.stack, self.workspace.path)
                except ImpersonationError as error:
                    entry.outcome, entry.note = FAILED, str(error)
                    return None
                env = {**self.options.env, "KUBECONFIG": str(kubeconfig)}
                self._own[entry.stack] = Pulumi(self.workspace, env, self.options.lock_wait)
            return self._own[entry.stack]


def _policy(options: Options) -> list[str]:
    return ["--policy-pack", str(options.policy_pack)] if options.policy_pack else []


def _ensure_stack(clis: Clis, cli: Pulumi, options: Options, step: Step) -> Result | None:
    """Create the step's stack (empty) if the backend has none: None, or the failed command. A new
    tenant takes its platform's salt under the passphrase provider (tfk8s_gitops.salts)."""
    stack = step.stack
    if options.recorded_state:
        return options.recorded_state.prepare(cli, clis.workspace, stack)
    if clis.exists(stack):
        return None
    if step.kind == "tenant" and step.upstream and not options.secrets_provider:
        salt = clis.platform_salt(step.upstream)
        if salt is not None:
            salts.give(clis.workspace.stack_file(stack), salt)
    extra = ["--secrets-provider", options.secrets_provider] if options.secrets_provider else []
    # --no-select: the selection is PULUMI_HOME's one file for the workspace, which steps running at
    # once would all write; every command here names its stack.
    done = cli.plain("stack", "init", stack, "--no-select", *extra)
    if done.returncode == 0:
        clis.created(stack)
        return None
    return Result("pulumi stack init", done.returncode, done.stdout + done.stderr, 0.0)


def _unconfirmed(plan: Plan, options: Options) -> list[str]:
    """Why the plan may not run: a stack the team file disagrees with, and what needs a person's word."""
    return [*plan.refusals.values(), *plan.unconfirmed(options.confirmed_destroys, options.confirmed_config_dir_move)]


def _entry(step: Step) -> StepReport:
    return StepReport(step.stack, step.kind, step.action, step.reason, step.team)


def preview(plan: Plan, options: Options) -> Report:
    # Shown, not refused: the reviewer learns before the merge what it will need.
    report = Report("preview", plan, refused=_unconfirmed(plan, options))
    workspace = open_workspace(options.checkout)
    if options.recorded_state:  # a backend of its own, in the workspace, gone with it
        options = replace(options, env=options.recorded_state.environment(dict(options.env), workspace.path / ".state"))
    clis = Clis(workspace, options)
    try:
        # In the plan's order too (a new tenant's preview after its new platform's stack exists),
        # but a failed preview skips nothing: every stack's own verdict is shown.
        steps = previewed(plan) if options.recorded_state else plan.steps
        ran = run_steps(plan, steps, options.parallel, lambda step, _: _preview_step(clis, options, step, plan.refusals))
        # In the plan's order; the team's stacks are theirs to preview: they hold secrets.
        by_stack = {entry.stack: entry for entry in ran}
        report.steps = [by_stack.get(step.stack) or _left_to_the_team(step, plan.refusals) for step in plan.steps]
    finally:
        workspace.close()
    return report


def _left_to_the_team(step: Step, refusals: dict[str, str]) -> StepReport:
    entry = _entry(step)
    entry.outcome = FAILED if step.stack in refusals else SKIPPED
    entry.note = (
        refusals.get(step.stack) or "previewed by the team's job, with the team's credentials, once a maintainer approves it"
    )
    return entry


def _preview_step(clis: Clis, options: Options, step: Step, refusals: dict[str, str]) -> StepReport:
    entry = _entry(step)
    if step.stack in refusals:  # with neither the team's credentials nor its own identity
        entry.outcome, entry.note = FAILED, refusals[step.stack]
        return entry
    cli = clis.of(entry)
    if cli is None:
        return entry
    if step.action == "destroy":
        if not clis.exists(step.stack):
            entry.note = "never deployed: nothing to destroy"
            return entry
        entry.result = _ensure_stack(clis, cli, options, step) or cli.run(step.stack, "destroy", "--preview-only")
    else:
        entry.result = _ensure_stack(clis, cli, options, step) or cli.run(step.stack, "preview", "--diff", *_policy(options))
    entry.outcome = DONE if entry.result.ok else FAILED
    return entry


def export_recorded_state(plan: Plan, checkout: Path, env: Mapping[str, str], out: Path) -> list[str]:
    """The team's job of a pull request (`preview-state`): the state of each experiment it previews,
    exported into `out` with `env`'s (the team's) credentials; no program runs."""
    workspace = open_workspace(checkout)
    try:
        team = Pulumi(workspace, env)
        return recorded_state.export(plan, team, team.stack_names(), out, state_id(env))
    finally:
        workspace.close()


def apply(plan: Plan, options: Options, only: str | None = None) -> Report:
    """Every step in order (or the one `only` names), `options.parallel` at once where the order
    allows; nothing at all while the plan needs a confirmation it was not given, whichever step
    this run is."""
    report = Report("apply", plan, refused=_unconfirmed(plan, options))
    if report.refused:
        return report
    steps = [plan.step(only)] if only else list(plan.steps)
    workspace = open_workspace(options.checkout)
    clis = Clis(workspace, options)
    try:
        report.steps = run_steps(
            plan, steps, options.parallel, lambda step, failed: _apply_step(clis, options, plan, step, failed)
        )
    finally:
        workspace.close()
    return report


def _apply_step(clis: Clis, options: Options, plan: Plan, step: Step, failed: set[str]) -> StepReport:
    entry = _entry(step)
    blocker = plan.blocked_by(step, failed)
    if blocker is not None:
        entry.outcome = SKIPPED
        entry.note = f"not run: {blocker} failed" if step.action == "update" else f"not run: {blocker} still exists"
        return entry
    cli = clis.of(entry)
    if cli is None:
        return entry
    message = ["--message", f"tfk8s gitops: {step.reason} at {plan.head[:12]}"]
    if step.action == "destroy":
        if not clis.exists(step.stack):
            entry.note = "never deployed: nothing to destroy"
            return entry
        entry.result = cli.run(step.stack, "destroy", "--yes", *message)
    else:
        # An existing stack: --refresh, so a live object edited by hand is put back (the state learns
        # of the edit first), and up's own preview. A stack `stack init` creates here: neither (see
        # the module: nothing to refresh or to protect, and each object still meets every resource
        # policy before it is created).
        mode = ["--refresh"] if clis.exists(step.stack) else ["--skip-preview"]
        entry.result = _ensure_stack(clis, cli, options, step) or cli.run(
            step.stack, "up", "--yes", *mode, "--diff", *message, *_policy(options)
        )
        if entry.result.ok:
            outputs = entry.result.outputs
            entry.ready = outputs is not None and outputs.get("ready") is True
            if outputs is None:
                entry.note = "deployed, but its events report no outputs: its `ready` is unknown"
            elif not entry.ready:
                entry.note = "deployed, but its `ready` output is not true (see its notReady output)"
    entry.outcome = DONE if entry.result.ok and entry.ready is not False else FAILED
    return entry
