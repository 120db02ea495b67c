"""Running a plan's steps at once where its order allows (`apply --parallel N`).

A step starts once every step it must follow (`Plan.after`) is done, at most `parallel` at a time,
each in a thread of a bounded pool (a step is a `pulumi` subprocess: the threads only wait). When
several steps are ready, the earliest in the plan's order goes first, so `parallel=1` runs them in
exactly the plan's order. A step is told which of the steps it follows failed, and only those (as
if the steps before it had run one by one): `Plan.blocked_by` decides the same whatever finished
first. The reports come back in the plan's order, whatever order the steps finished in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Protocol, TypeVar

from tfk8s_gitops.plan import Plan, Step


class Outcome(Protocol):
    @property
    def done(self) -> bool:
        """Whether the step did what it was to do (a skipped step did not: what follows it is skipped too)."""
        ...


R = TypeVar("R", bound=Outcome)


def run(plan: Plan, steps: Sequence[Step], parallel: int, run_step: Callable[[Step, set[str]], R]) -> list[R]:
    """`run_step(step, failed)` for each of `steps` (a subset of the plan's, in its order), where
    `failed` holds the stacks it follows whose step is not `done`; the results in `steps`' order. An
    exception in a step is raised once the steps already running have finished; no other starts."""
    if parallel < 1:
        raise ValueError(f"parallel: {parallel}: run at least one step at a time")
    planned = {s.stack for s in steps}
    waits = {s.stack: plan.after(s) & planned for s in steps}
    results: dict[str, R] = {}
    failed: set[str] = set()
    pending = list(steps)
    running: dict[Future[R], Step] = {}
    with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="tfk8s-step") as pool:
        while pending or running:
            for step in [s for s in pending if waits[s.stack] <= results.keys()][: parallel - len(running)]:
                pending.remove(step)
                running[pool.submit(run_step, step, failed & waits[step.stack])] = step
            if not running:  # cannot happen: `after` names only earlier steps
                raise RuntimeError(f"no step can start: {', '.join(s.stack for s in pending)} wait for each other")
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                step = running.pop(future)
                results[step.stack] = future.result()
                if not results[step.stack].done:
                    failed.add(step.stack)
    return [results[s.stack] for s in steps]
