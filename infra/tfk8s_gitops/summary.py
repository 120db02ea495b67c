"""One Markdown report per pipeline run, fit for a pull-request comment (GitHub keeps at most 65,536
characters: each stack's CLI output is cut to its last `OUTPUT_LIMIT` characters)."""

from __future__ import annotations

import re

from tfk8s_gitops.engine import NOT_RUN_LEVEL, Result
from tfk8s_gitops.pipeline import DONE, FAILED, SKIPPED, Report, StepReport

OUTPUT_LIMIT = 6000
MARK = {DONE: "✅", FAILED: "❌", SKIPPED: "⏭️"}
LEVEL_MARK = {"mandatory": "❌", "advisory": "⚠️", NOT_RUN_LEVEL: "⏸️"}
# The engine's operations in the order a reader scans them.
OPS = (("create", "+"), ("update", "~"), ("replace", "+-"), ("delete", "-"))
TITLE = {
    "preview": "preview (nothing applied)",
    "apply": "apply",
    "drift": "drift check (`pulumi refresh --preview-only`)",
}


def markdown(report: Report) -> str:
    lines = [f"## tfk8s GitOps: {TITLE[report.mode]}", ""]
    if report.plan is not None:
        plan = report.plan
        lines.append(
            f"`{plan.base[:12]}..{plan.head[:12]}`: {len(plan.steps)} stack(s)"
            + (", **the program changed**: every stack" if plan.program_changed else "")
            + "."
        )
        lines.append("")
    if report.refused:
        # An apply refused whole; a preview says what its merge will need.
        head = (
            "**Refused: nothing was changed.**" if report.mode == "apply" else "**Merging this needs a person's confirmation:**"
        )
        lines += [head, "", *(f"- {reason}" for reason in report.refused), ""]
        if report.mode == "apply":
            lines += ["Run the apply by hand with the confirmations named above (the `tfk8s apply` workflow's inputs).", ""]
            return "\n".join(lines)
    if not report.steps:
        lines += ["No stack to run.", ""]
        return "\n".join(lines)
    lines += [
        "| # | stack | kind | action | why | result | changes | policies | ready | time |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, step in enumerate(report.steps, 1):
        lines.append(
            f"| {n} | `{step.stack}` | {step.kind or '?'} | {step.action} | {step.reason} | "
            f"{MARK[step.outcome]} {step.outcome}{_note(step)} | {_changes(step.result)} | {_policies(step.result)} | "
            f"{_ready(step)} | {_time(step.result)} |"
        )
    failed = sum(s.outcome == FAILED for s in report.steps)
    lines += ["", f"**{'All stacks ok' if not failed else f'{failed} stack(s) failed'}** in {report.seconds:.1f} s.", ""]
    for step in report.steps:
        lines += _details(step)
    return "\n".join(lines)


def _note(step: StepReport) -> str:
    note = step.note
    if step.result is not None and step.result.lock_waited:
        note = f"{note}; " if note else ""
        note += f"waited {step.result.lock_waited:.0f} s for another run's lock"
    if step.result is not None and step.result.retried:
        note = f"{note}; " if note else ""
        note += f"ran twice: the API server refused {step.result.retried} for its quota's status the first time"
    return f": {note}" if note else ""


def _changes(result: Result | None) -> str:
    if result is None:
        return "–"
    shown = [f"{sign}{result.changes[op]}" for op, sign in OPS if result.changes.get(op)]
    others = [f"{op} {n}" for op, n in sorted(result.changes.items()) if op not in dict(OPS)]
    counted = " ".join(shown + others) or "no changes"
    if not result.ok and not result.applied and result.command.split()[1:2] in (["up"], ["destroy"]):
        return f"{counted} proposed, none made"  # its preview was refused
    return counted


def _policies(result: Result | None) -> str:
    if result is None or "policy-pack" not in result.command:
        return "–"
    if not result.verdicts:
        return "all passed"
    return ", ".join(f"{LEVEL_MARK.get(v.level, '⚠️')} {v.policy} ({v.level})" for v in result.verdicts.values())


def _ready(step: StepReport) -> str:
    return "–" if step.ready is None else ("yes" if step.ready else "**no**")


def _time(result: Result | None) -> str:
    return "–" if result is None else f"{result.seconds:.1f} s"


def _details(step: StepReport) -> list[str]:
    result = step.result
    if result is None:
        return []
    body: list[str] = [f"- **error**: {error.splitlines()[0]}" for error in result.errors if error]
    for op, urn, diffs in result.changed:
        name = urn.rsplit("::", 1)[-1]
        # urn:pulumi:STACK::PROJECT::PARENT$...$kubernetes:batch/v1:Job::NAME -> Job
        kind = urn.split("::")[-2].rsplit("$", 1)[-1].rsplit(":", 1)[-1]
        body.append(f"- {op} `{kind}` `{name}`" + (f": {', '.join(diffs)}" if diffs else ""))
    for verdict in result.verdicts.values():
        for message in verdict.messages:
            body.append(f"- policy **{verdict.policy}** ({verdict.level}): {message.splitlines()[0]}")
    output = result.output.strip()
    if len(output) > OUTPUT_LIMIT:
        output = "…\n" + output[-OUTPUT_LIMIT:]
    fence = "`" * (max(map(len, re.findall(r"`+", output)), default=0) + 1 if "```" in output else 3)
    return [
        f"<details><summary><code>{step.stack}</code>: <code>{result.command}</code></summary>",
        "",
        *body,
        *([""] if body else []),
        f"{fence}text",
        output,
        fence,
        "</details>",
        "",
    ]
