"""The third run of a GitOps pipeline, `drift` (on a schedule): `pulumi refresh --preview-only` of
every stack file of the checkout, and which managed objects changed live (what the program only
reads is left out). Each stack is read with the credentials its kind has in the team file
(`tfk8s_gitops.pipeline.Clis`), as the other two runs do.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tfk8s_gitops import pipeline
from tfk8s_gitops.pipeline import FAILED, Clis, Options, Report, StepReport
from tfk8s_gitops.repo import Repo


def check(checkout: Path, options: Options) -> Report:
    """Every stack file of the checkout against its live objects; a stack never deployed is drift too."""
    report = Report("drift", None)
    repo = Repo(checkout)
    workspace = pipeline.open_workspace(options.checkout)
    clis = Clis(workspace, options)
    # A refresh runs no program: the team file alone says whose credentials read each stack.
    team = repo.team_stacks("HEAD")
    entries = [
        StepReport(name, file.kind, "refresh", "scheduled", team.kind_of(name) is not None)
        for name, file in sorted(repo.stack_files("HEAD").items())
    ]
    try:
        # A refresh changes no state another stack reads: no order; the report in the entries' order.
        with ThreadPoolExecutor(max_workers=options.parallel, thread_name_prefix="tfk8s-drift") as pool:
            report.steps = list(pool.map(lambda entry: _drift_step(clis, entry), entries))
    finally:
        workspace.close()
    return report


def _drift_step(clis: Clis, entry: StepReport) -> StepReport:
    cli = clis.of(entry)
    if cli is None:
        return entry
    if not clis.exists(entry.stack):
        entry.outcome = FAILED
        entry.note = "never deployed: the stack file has no stack in the backend"
        return entry
    # Objects the program only reads (`.get`, e.g. the platform's look at the User Node)
    # change with every heartbeat, and are nobody's to put back: not drift.
    read_only = cli.external_urns(entry.stack)
    entry.result = cli.run(entry.stack, "refresh", "--preview-only")
    entry.result.changed = [c for c in entry.result.changed if c[1] not in read_only]
    entry.result.changes = _count(entry.result.changed)
    if entry.result.changed:
        entry.outcome = FAILED
        entry.note = "drifted: the live objects differ from the last deployment"
    elif not entry.result.ok:
        entry.outcome = FAILED
    return entry


def _count(changed: list[tuple[str, str, list[str]]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for op, _, _ in changed:
        counts[op] = counts.get(op, 0) + 1
    return counts
