"""The plain `pulumi` CLI on one stack, as the pipeline runs it, with the engine's events read back.

Each command runs in a workspace: a scratch directory holding copies of the head's stack files (the
CLI writes into them: a new stack's encryption salt) and links to everything else of the checkout,
so a pipeline never changes the checkout it runs from. Each run writes the engine's event log
(`--event-log`, the stream the Automation API reads) and the pipeline counts changes and policy
verdicts from those events, not from the printed text, and takes the stack's outputs from them (the
root stack's `pulumi:pulumi:Stack` resource reports them as its outputs at the end of an `up`): no
`pulumi stack output` after it, a CLI start and a key derivation fewer per stack.

Stack locks: on a shared backend (S3) two pipelines may reach one stack at once. The CLI refuses
the second with "the stack is currently locked"; the runner waits for the lock (up to `lock_wait`
seconds, polling) and then runs, so nothing is lost and nothing runs twice at the same time. At
the handoff an S3 server over a directory (versitygw's posix backend) can refuse the next holder's
lock with 409 ExistingObjectIsDirectory: the previous holder's lock, deleted at that instant, takes
the emptied directory with it between the new lock's mkdir and link. The CLI stops before its
engine starts (no event log at all), so nothing ran; the runner tries again, a few times only.

A refusal that is the API server's and not the stack's: an object created while the namespace's
quota controller writes the quota's status can be refused with "Operation cannot be fulfilled on
resourcequotas" (docs/concepts/quotas.md), which pulumi-kubernetes does not retry. An `up` whose
every error is that refusal (and the engine's "update failed" after it) runs once more with the
same arguments, which creates what is left: a new stack's `up` again without a refresh or a
preview, as what the first run made is the stack's own and was judged by its policies as it was
made. The result is the second run's, with both runs' output and changes.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pulumi.automation.events import EngineEvent, OpType
from tfk8s.errors import MissingPrerequisite

from tfk8s_gitops.repo import STACK_FILE_PREFIX, STACK_FILE_SUFFIX, stack_name


class BackendError(MissingPrerequisite):
    """The state backend refused a read the pipeline needs (its URL, its credentials, the
    passphrase); the message is the CLI's, after the command that failed."""


LOCKED = "currently locked"
LOCK_HANDOFF = "ExistingObjectIsDirectory"  # versitygw's refusal of a lock written at the handoff
LOCK_HANDOFF_TRIES = 3
QUOTA_STATUS_CONFLICT = "Operation cannot be fulfilled on resourcequotas"
UPDATE_FAILED = "update failed"  # the engine's error on the stack after any resource's
RAN_AGAIN = "\n--- the API server refused an object for its quota's status; ran again ---\n"
# A stack policy that needs values a preview does not know yet (a new stack's outputs): the engine
# reports it as an advisory event starting with these words; the summary says it did not run.
NOT_RUN = "can't run policy"
NOT_RUN_LEVEL = "not run"
# The root stack's resource: its outputs are the stack's outputs.
ROOT_STACK = "pulumi:pulumi:Stack"
# Operations that change nothing, in the engine's summary and per resource.
UNCHANGED = {OpType.SAME.value, OpType.READ.value, OpType.REFRESH.value}
# A replacement's own steps, reported once as its `replace`.
REPLACEMENT_PARTS = {OpType.CREATE_REPLACEMENT.value, OpType.DELETE_REPLACED.value, OpType.DISCARD_REPLACED.value}


@dataclass
class Verdict:
    """One policy's findings on one stack."""

    policy: str
    level: str
    messages: list[str] = field(default_factory=list)


@dataclass
class Result:
    """What one command did to one stack, from its exit code and its engine events."""

    command: str
    returncode: int
    output: str
    seconds: float
    changes: dict[str, int] = field(default_factory=dict)
    """Operation -> resources (`create`, `update`, `delete`, `replace`, ...); unchanged ones left out."""
    changed: list[tuple[str, str, list[str]]] = field(default_factory=list)
    """(operation, URN, changed properties) of each resource the command changes."""
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    """The engine's error diagnostics (a refused apply, a failed await), first line first."""
    lock_waited: float = 0.0
    phases: int = 0
    """Engine phases whose events the log holds: `up` and `destroy` preview (1), then change (2); a
    refused preview stops at 1. The CLI (3.259) starts the log afresh for the change, which leaves 1."""
    retried: str | None = None
    """The object the API server refused for its quota's status, when the command ran a second
    time: the result is then the second run's, with both runs' output, changes, changed resources
    and lock waits. None: it ran once."""
    changed_live: bool = False
    """The log's engine summary is a change's, not a preview's (`isPreview: false`)."""
    outputs: dict[str, Any] | None = None
    """The stack's outputs as the last phase's events report them (secret ones as the engine masks
    them, `[secret]`); None when they report none (a failed program, a refused preview)."""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def applied(self) -> bool:
        """Whether the counted changes were made, not only proposed."""
        verb = self.command.split()[1:2]
        ran = self.phases >= 2 or self.changed_live
        return verb in (["up"], ["destroy"]) and "--preview-only" not in self.command and ran


class Workspace:
    """A scratch project at the checkout's state: its stack files copied, all else linked."""

    def __init__(self, checkout: Path, stack_dir: str) -> None:
        self.checkout = checkout
        self.stack_dir = stack_dir
        self.path = Path(tempfile.mkdtemp(prefix="tfk8s-gitops-"))
        for entry in checkout.iterdir():
            if entry.name == ".git":
                continue
            if entry.name == stack_dir:
                shutil.copytree(entry, self.path / entry.name)
            elif stack_dir == "." and stack_name(entry.name, "") is not None:  # stack files at the root
                shutil.copy(entry, self.path / entry.name)
            else:
                (self.path / entry.name).symlink_to(entry)

    def stack_file(self, stack: str) -> Path:
        """The workspace's copy of `stack`'s stack file (what the CLI reads and writes)."""
        return self.path / self.stack_dir / f"{STACK_FILE_PREFIX}{stack}{STACK_FILE_SUFFIX}"

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


class Pulumi:
    """`pulumi <command> --stack S` in a workspace, with the environment given (default: this process's)."""

    def __init__(self, workspace: Workspace, env: Mapping[str, str], lock_wait: float = 600.0, poll: float = 2.0) -> None:
        self.workspace = workspace
        # The engine writes its event log (--event-log) only with debug commands on, as the Automation
        # API has them: every count, verdict and output the pipeline reports comes from that log.
        self.env = {**env, "PULUMI_DEBUG_COMMANDS": "true"}
        self.lock_wait = lock_wait
        self.poll = poll

    def run(self, stack: str, *args: str) -> Result:
        start = time.monotonic()
        result = self._run_waiting_for_lock(stack, args, start)
        refused = _refused_for_quota_status(result)
        if args[:1] == ("up",) and refused is not None:
            again = self._run_waiting_for_lock(stack, args, time.monotonic())
            again.retried = refused
            again.output = result.output + RAN_AGAIN + again.output
            again.changed[:0] = result.changed
            again.changes = {op: result.changes.get(op, 0) + again.changes.get(op, 0) for op in {*result.changes, *again.changes}}
            again.lock_waited += result.lock_waited
            again.phases = max(again.phases, result.phases)  # made by the first run, if the second never ran
            again.changed_live |= result.changed_live
            result = again
        result.seconds = time.monotonic() - start
        return result

    def _run_waiting_for_lock(self, stack: str, args: Sequence[str], start: float) -> Result:
        """One command, run again while another run holds the stack's lock, until `lock_wait`
        seconds after `start`, and when its lock was refused at the handoff (LOCK_HANDOFF_TRIES)."""
        began, waited, handoffs = time.monotonic(), 0.0, 0
        while True:
            with tempfile.TemporaryDirectory(prefix="tfk8s-events-") as scratch:
                log = Path(scratch) / "events.jsonl"
                done = self._cli(*args, "--stack", stack, "--event-log", str(log))
                events = _events(log)
            output = done.stdout + done.stderr
            locked = LOCKED in output and time.monotonic() - start < self.lock_wait
            handoff = not events and LOCK_HANDOFF in output and handoffs < LOCK_HANDOFF_TRIES
            if done.returncode != 0 and (locked or handoff):
                if not locked:
                    handoffs += 1
                # Jittered: two runs that locked at the same instant both back off (the backend
                # writes its lock, then re-reads; each sees the other's), and must not collide again.
                time.sleep(self.poll * random.uniform(0.5, 1.5))
                waited = time.monotonic() - began
                continue
            break
        result = Result(" ".join(["pulumi", *args]), done.returncode, output, 0.0, lock_waited=waited)
        _read_events(result, events)
        return result

    def plain(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A command without engine events (stack select, output, init)."""
        return self._cli(*args)

    def export(self, stack: str) -> dict[str, Any]:
        """The stack's state (`pulumi stack export`, secrets left encrypted)."""
        done = self._cli("stack", "export", "--stack", stack)
        if done.returncode != 0:
            raise BackendError(f"pulumi stack export --stack {stack}: {done.stderr.strip()}")
        exported: dict[str, Any] = json.loads(done.stdout)
        return exported

    def external_urns(self, stack: str) -> set[str]:
        """The URNs of the objects the stack only reads (`external` in its state)."""
        resources = self.export(stack).get("deployment", {}).get("resources") or []
        return {r["urn"] for r in resources if r.get("external")}

    def stack_names(self) -> set[str]:
        """The names of the project's stacks in the backend (one `pulumi stack ls`, which reads every
        stack's entry: a run lists them once, `pipeline.Clis.exists`, not once per stack)."""
        listed = self._cli("stack", "ls", "--json")
        if listed.returncode != 0:
            raise BackendError(f"pulumi stack ls: {listed.stderr.strip()}")
        return {s.get("name", "").split("/")[-1] for s in json.loads(listed.stdout or "[]")}

    def _cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["pulumi", *args, "--non-interactive", "--color", "never"],
            cwd=self.workspace.path,
            capture_output=True,
            text=True,
            env=self.env,
        )


def _refused_for_quota_status(result: Result) -> str | None:
    """The name of the object a failed command's only errors say the API server refused for its
    quota's status (QUOTA_STATUS_CONFLICT); None if it did not fail, or failed for anything else."""
    refusals = [e for e in result.errors if QUOTA_STATUS_CONFLICT in e]
    if result.ok or not refusals or any(QUOTA_STATUS_CONFLICT not in e and e != UPDATE_FAILED for e in result.errors):
        return None
    named = re.search(r'urn:pulumi:[^"\s]*::([^"\s:]+)"', refusals[0])
    return named.group(1) if named else "an object"


def _events(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _read_events(result: Result, raw: Sequence[dict[str, Any]]) -> None:
    for data in raw:
        event = EngineEvent.from_json(data)
        if event.prelude_event is not None:  # `up` previews, then updates: keep the last phase's
            result.phases += 1
            result.changed.clear()
            result.verdicts.clear()
            result.outputs = None
        elif event.summary_event is not None:
            changes = event.summary_event.resource_changes or {}
            result.changes = {op: n for op, n in changes.items() if op not in UNCHANGED and n}
            result.changed_live = data["summaryEvent"].get("isPreview") is False
        elif event.res_outputs_event is not None:  # its op is the outcome (a refresh's `update`: drift)
            step = event.res_outputs_event.metadata
            if step.type == ROOT_STACK and step.new is not None:
                result.outputs = dict(step.new.outputs or {})
            if step.op.value not in UNCHANGED | REPLACEMENT_PARTS and step.type != ROOT_STACK:
                result.changed.append((step.op.value, step.urn, list(step.diffs or step.detailed_diff or [])))
        elif event.policy_event is not None:
            policy = event.policy_event
            level = NOT_RUN_LEVEL if policy.message.startswith(NOT_RUN) else policy.enforcement_level
            verdict = result.verdicts.setdefault(policy.policy_name, Verdict(policy.policy_name, level))
            verdict.messages.append(policy.message.strip())
        elif event.diagnostic_event is not None and event.diagnostic_event.severity == "error":
            result.errors.append(event.diagnostic_event.message.strip())
