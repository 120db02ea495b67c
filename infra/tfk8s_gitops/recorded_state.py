"""A pull request's preview of its experiments against recorded state, in two jobs that share no
credential (docs/guide/gitops.md "Who runs what"; docs/security.md).

A pull request's program is its author's code. The team's credentials (the state store's keys, the
passphrase that opens the platform's and tenants' secrets, a kubeconfig that may change the
cluster) must never reach it, and an experiment's preview needs none of them:

- the team's job, `preview-state` (`export`), runs no code of the pull request: with the team's
  credentials it exports the state of every experiment the plan previews (`pulumi stack export`)
  into a directory, the job's artifact. An experiment holds no secret (its stack file may not,
  tfk8s.settings.stack_file), and a state that holds one anyway is refused, never copied; the
  secrets provider's record goes too (it names the team's salt, which opens nothing without the
  passphrase, and the preview runs under a passphrase of its own);
- the pull request's job, `preview --recorded-state DIR`, holds the preview identity's kubeconfig
  alone (tfk8s.specs.preview_identity: it reads and dry-runs what experiments declare, in tenants'
  namespaces, nothing else): a backend in a scratch directory under a passphrase made for the run,
  each experiment's stack made there and its recorded state imported (`prepare`), then previewed
  with the policy pack as any preview. Platforms and tenants are not previewed there: they hold
  secrets, so their previews stay the team's, in a job a maintainer approves.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tfk8s.errors import Refusal
from tfk8s.settings.state_store import STATE_ID_ENV

from tfk8s_gitops import salts
from tfk8s_gitops.engine import Pulumi, Result, Workspace
from tfk8s_gitops.plan import Plan, Step

INDEX = "stacks.json"
# How the engine marks a secret value in a deployment (`pulumi stack export`): its ciphertext, or
# its plain text when exported with --show-secrets.
SECRET_SIGNATURE = "4dabf18193072939515e22adb298388d"
BACKEND_ENV = (
    "PULUMI_BACKEND_URL",
    "PULUMI_CONFIG_PASSPHRASE",
    "PULUMI_CONFIG_PASSPHRASE_FILE",
    "TFK8S_SECRETS_PROVIDER",
    STATE_ID_ENV,
)


class Exporter(Protocol):
    def export(self, stack: str) -> dict[str, Any]: ...


class RecordedStateError(Refusal):
    """A state that may not leave the team's job, or a directory that is no export of it."""


def previewed(plan: Plan) -> list[Step]:
    """The steps the pull request's job previews: its experiments' (neither team stacks nor refused ones)."""
    return [s for s in plan.steps if not s.team and s.stack not in plan.refusals]


def export(plan: Plan, team: Exporter, existing: set[str], out: Path, state: str | None) -> list[str]:
    """Writes the recorded state of each previewed experiment that exists, and the index (which do,
    and `state`, the team's state's id, tfk8s.settings.state_store), into `out`; the stacks
    exported. Refused, with nothing written, when one holds a secret."""
    states: dict[str, dict[str, Any]] = {}
    for step in previewed(plan):
        if step.stack not in existing:
            continue
        exported = team.export(step.stack)
        if SECRET_SIGNATURE in json.dumps(exported):
            raise RecordedStateError(
                f"{step.stack}: its state holds a secret, so it cannot be previewed outside the team's job; an "
                "experiment holds none: find what put one there (`pulumi stack export --stack "
                f"{step.stack}`), remove it with `pulumi up`, then preview again"
            )
        (exported.get("deployment") or {}).pop("secrets_providers", None)
        states[step.stack] = exported
    out.mkdir(parents=True, exist_ok=True)
    for stack, exported in states.items():
        (out / f"{stack}.json").write_text(json.dumps(exported))
    (out / INDEX).write_text(json.dumps({"exported": sorted(states), "stateId": state}))
    return sorted(states)


@dataclass(frozen=True)
class Recorded:
    """The team job's export: which experiments exist, and where their states are."""

    directory: Path
    stacks: frozenset[str]
    state: str | None = None
    """The team's state's id: what its objects' owner annotations name (tfk8s.settings.state_store)."""

    @classmethod
    def read(cls, directory: Path) -> Recorded:
        index = directory / INDEX
        if not index.is_file():
            raise RecordedStateError(
                f"--recorded-state {directory}: no {INDEX} there; give the directory `preview-state --out` wrote"
            )
        found = json.loads(index.read_text())
        return cls(directory, frozenset(found["exported"]), found.get("stateId"))

    def environment(self, env: dict[str, str], scratch: Path) -> dict[str, str]:
        """`env` with a backend in `scratch`, a passphrase made for this run, and the team's state's
        id (the program then knows its stack's objects as its own): whatever of the team's the
        caller's environment still held is dropped, not used."""
        own = {k: v for k, v in env.items() if k not in BACKEND_ENV and not k.startswith("AWS_")}
        scratch.mkdir(parents=True, exist_ok=True)
        ids = {STATE_ID_ENV: self.state} if self.state else {}
        return {**own, "PULUMI_BACKEND_URL": scratch.as_uri(), "PULUMI_CONFIG_PASSPHRASE": secrets.token_hex(16), **ids}

    def prepare(self, cli: Pulumi, workspace: Workspace, stack: str) -> Result | None:
        """`stack` made in the scratch backend, with a salt of its own (the stack file's is the
        team's passphrase's) and its recorded state, if it has one: None, or the failed command."""
        salts.drop(workspace.stack_file(stack))
        commands: list[tuple[str, ...]] = [("stack", "init", stack, "--no-select")]
        if stack in self.stacks:
            commands.append(("stack", "import", "--stack", stack, "--file", str(self.directory / f"{stack}.json")))
        for command in commands:
            done = cli.plain(*command)
            if done.returncode != 0:
                return Result(f"pulumi {' '.join(command[:2])}", done.returncode, done.stdout + done.stderr, 0.0)
        return None
