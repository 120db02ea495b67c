"""Which stacks a change touches, and in what order their Pulumi operations run.

From `base` to `head`:
- a stack file removed is destroyed, before anything else (an experiment's destroy would otherwise
  block its tenant's change, and the platform refuses to lose a tenant that still has experiments),
  experiments first, then tenants, then platforms;
- a stack file added or changed is updated, and so is every stack downstream of it in `head` (a
  tenant reads its platform's outputs, an experiment its tenant's: a new platform output reaches them
  only through their own `up`), platforms first, then tenants, then experiments;
- a change of the program itself (`repo.PROGRAM_PATHS`) updates every stack of `head`.

Which credentials a step runs with is the team file's word at `base` (`repo.TEAM_FILE`; at `head`
for a branch's first push, which is the team's by definition): its platforms and tenants run with
the pipeline's own, every other stack as its own identity. An added or changed stack file whose
`tfk8s:kind` disagrees with it (a `tenant` the team file does not declare, a declared tenant whose
file says `experiment`) is refused before anything runs, as is a new stack file under the name of
a removed one that would run as its own identity: a tenant may still list that identity, and a
new file must not inherit it. (A destroy runs no program: the declaration alone says who runs it.)

The steps' order is a line, but what must wait is less: `Plan.after` names, for each step, the
planned steps it must follow (an update its planned upstreams and every destroy; a destroy the
destroys of what is built on it), so two tenants of one platform never wait for each other
(`apply --parallel`, and `Plan.waves` for a CI workflow's jobs).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from tfk8s.errors import Refusal

from tfk8s_gitops.identity import identity
from tfk8s_gitops.repo import NO_COMMIT, TEAM_KINDS, Repo, StackFile, TeamStacks, is_program_path, stack_name

Action = Literal["destroy", "update"]


class NotPlanned(Refusal):
    """A stack the command names (`apply --only`) is not in the plan; the message names what is."""


# Creates and updates go down this order; destroys go up it. An unknown kind (the stack's own
# preview will say what is wrong with it) goes last.
KIND_ORDER = ("platform", "tenant", "experiment")


@dataclass(frozen=True)
class Step:
    stack: str
    action: Action
    kind: str | None
    reason: str
    """Why the stack is in the plan: `added`, `changed`, `removed`, `program changed`, `downstream of X`."""
    upstream: str | None
    """The stack this one builds on (in `head` for updates, in `base` for destroys)."""
    team: bool = False
    """Runs with the pipeline's own credentials: the team file at `base` declares it."""


@dataclass(frozen=True)
class Plan:
    base: str
    head: str
    steps: tuple[Step, ...]
    program_changed: bool
    config_dir_move: tuple[str, str] | None = None
    """Pulumi.yaml's `stackConfigDir` at `base` and at `head`, when it changed."""
    refusals: dict[str, str] = field(default_factory=dict)
    """Stack -> why no step of the plan may run while it is in it (the team file's word, a reused name)."""

    def unconfirmed(self, destroys: Iterable[str], config_dir_move: bool) -> list[str]:
        """Why the plan may not run without a person's word: each team stack (`Step.team`) it destroys
        that `destroys` does not name (a platform's or tenant's destroy takes every tenant's data path
        or a user's namespace with it; an undeclared file that only claims such a kind destroys as its
        own identity, which can destroy nothing of the team's), and a moved `stackConfigDir` unless
        `config_dir_move`."""
        named = set(destroys)
        reasons = [
            f"the removal of {s.stack}'s stack file destroys the {s.kind} {s.stack}: confirm with --confirm-destroy {s.stack}"
            for s in self.steps
            if s.action == "destroy" and s.team and s.stack not in named
        ]
        if self.config_dir_move is not None and not config_dir_move:
            old, new = self.config_dir_move
            reasons.append(
                f"Pulumi.yaml's stackConfigDir moves from {old!r} to {new!r}: every stack file is read from the new place "
                "(a stack missing there is destroyed); confirm with --confirm-config-dir-move"
            )
        return reasons

    def step(self, stack: str) -> Step:
        for step in self.steps:
            if step.stack == stack:
                return step
        planned = ", ".join(s.stack for s in self.steps) or "none"
        raise NotPlanned(f"stack {stack!r} is not in the plan of {self.base[:12]}..{self.head[:12]} (planned: {planned})")

    def blocked_by(self, step: Step, failed: Iterable[str]) -> str | None:
        """The failed stack that `step` must not run after, if any: for an update, one it builds on
        (directly or not); for a destroy, one built on it (its destroy failed, so it still exists)."""
        failed = set(failed)
        if step.action == "update":
            return next((s for s in self._chain(step) if s in failed), None)
        built_on_it = [s.stack for s in self.steps if s.action == "destroy" and step.stack in self._chain(s)]
        return next((s for s in built_on_it if s in failed), None)

    def after(self, step: Step) -> set[str]:
        """The planned stacks whose steps must be done before `step` starts: for an update, every
        destroy and the updates of the stacks it builds on (directly or not); for a destroy, the
        destroys of the stacks built on it. Only steps before `step` in the plan's order count, so
        the order is never a cycle and running the steps one by one in that order honours it."""
        earlier = {s.stack: s for s in self.steps[: self.steps.index(step)]}
        if step.action == "update":
            waits = {s for s in self._chain(step) if s in earlier and earlier[s].action == "update"}
            return waits | {s.stack for s in earlier.values() if s.action == "destroy"}
        return {s.stack for s in earlier.values() if s.action == "destroy" and step.stack in self._chain(s)}

    def waves(self) -> dict[str, int]:
        """Each stack's wave: 0 for a step that waits for none, else one more than the latest wave it
        waits for. Running the waves one after another, each wave's steps at once, honours `after`
        (destroys, then platforms, their tenants, their experiments: at most six waves when every
        tenant builds on a platform)."""
        waves: dict[str, int] = {}
        for step in self.steps:  # the plan's order: every step's waits come before it
            waves[step.stack] = max((waves[s] + 1 for s in self.after(step)), default=0)
        return waves

    def _chain(self, step: Step) -> list[str]:
        """The planned stacks `step` builds on, nearest first. (Every stack downstream of a planned
        update is planned too, and a removed stack's upstream is either removed or left alone.)"""
        upstreams = {s.stack: s.upstream for s in self.steps}
        chain, upstream = [], step.upstream
        while upstream is not None and upstream in upstreams and upstream not in chain:
            chain.append(upstream)
            upstream = upstreams[upstream]
        return chain


def _rank(kind: str | None) -> int:
    return KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)


def downstream(stacks: dict[str, StackFile], roots: set[str]) -> dict[str, str]:
    """Every stack that builds on one of `roots`, directly or not -> the root it builds on."""
    found: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        for name, file in stacks.items():
            if name in roots or name in found or file.upstream is None:
                continue
            origin = file.upstream if file.upstream in roots else found.get(file.upstream)
            if origin is not None:
                found[name] = origin
                changed = True
    return found


def make_plan(repo: Repo, base: str, head: str) -> Plan:
    head = repo.resolve(head)
    after = repo.stack_files(head)
    if base == NO_COMMIT:  # a branch's first push: every stack file is new
        before: dict[str, StackFile] = {}
        paths = {f.path for f in after.values()}
        team = repo.team_stacks(head)
    else:
        base = repo.resolve(base)
        before = repo.stack_files(base)
        paths = repo.changed_paths(base, head)
        team = repo.team_stacks(base)
    program_changed = any(is_program_path(p) for p in paths)
    _, folder = repo.project(head)
    old_folder = repo.project(base)[1] if base != NO_COMMIT else folder
    prefix = "" if folder == "." else f"{folder}/"
    touched = {name for p in paths if (name := stack_name(p, prefix)) is not None}

    removed = sorted((before[n] for n in before.keys() - after.keys()), key=lambda f: (-_rank(f.kind), f.name))
    steps = [Step(f.name, "destroy", f.kind, "removed", f.upstream, team.kind_of(f.name) is not None) for f in removed]

    if program_changed:
        reasons = {name: "program changed" for name in after}
    else:
        reasons = {name: ("added" if name not in before else "changed") for name in touched & after.keys()}
        for name, origin in downstream(after, set(reasons)).items():
            reasons[name] = f"downstream of {origin}"
    for name in sorted(reasons, key=lambda n: (_rank(after[n].kind), n)):
        steps.append(Step(name, "update", after[name].kind, reasons[name], after[name].upstream, team.kind_of(name) is not None))
    moved = (old_folder, folder) if old_folder != folder else None
    files = {**before, **after}
    # A destroy runs no program (the state says what to delete): the team file's word on it is enough.
    refusals = {s.stack: why for s in steps if s.action == "update" and (why := disagreement(team, files[s.stack]))}
    if base != NO_COMMIT:
        for step in steps:
            if step.stack not in refusals and step.stack not in before and step.action == "update" and not step.team:
                removal = repo.removal_of(files[step.stack].path, base)
                if removal is not None:
                    refusals[step.stack] = _reused(files[step.stack], removal)
    return Plan(base, head, tuple(steps), program_changed, moved, refusals)


def disagreement(team: TeamStacks, file: StackFile) -> str | None:
    """Why `file`'s kind and the team file disagree, if they do."""
    declared = team.kind_of(file.name)
    if declared == file.kind or (declared is None and file.kind not in TEAM_KINDS.values()):
        return None
    where = f"{team.path} at {team.commit[:12]}"
    if declared is None:
        return (
            f"{file.path} says tfk8s:kind {file.kind}, but {where} does not declare {file.name} among the team's "
            f"{file.kind}s, and only a declared stack runs with the pipeline's credentials: declare it there first, in "
            "a change of its own the platform team reviews, then add its stack file"
        )
    return (
        f"{file.path} says tfk8s:kind {file.kind!r}, but {where} declares {file.name} a {declared}: a team stack's "
        f"file keeps its kind; remove {file.name} from {team.path} first (a change of its own) to make it another kind"
    )


def _reused(file: StackFile, removal: str) -> str:
    return (
        f"{file.path}: a stack named {file.name} was removed at {removal[:12]}; its identity ({identity(file.name)}) may "
        "still be listed by a tenant (tfk8s:tenant.identities.users), and a new stack file must not inherit what "
        "that tenant granted the old one: name the new stack differently"
    )
