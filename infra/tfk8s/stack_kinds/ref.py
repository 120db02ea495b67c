"""A tenant's view of the platform it builds on: its `platform` output, read before anything is
declared. (An experiment reads its tenant's contract from the cluster instead: tfk8s.stack_kinds.tenant_contract.)

The read goes through the engine's stack-reference builtin (`pulumi:pulumi:readStackOutputs`,
the call `pulumi.StackReference` makes; it works with the local file backend) as a synchronous
invoke, not through a `StackReference` resource: its Outputs resolve only after the program has
run, too late to refuse a missing platform or tenant before any resource is declared. What comes
back is input like a stack file, so it is validated against its contract (tfk8s.settings.contract).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from tfk8s import release
from tfk8s.errors import StackUnavailable
from tfk8s.settings import NAMESPACE
from tfk8s.settings.contract import PlatformFacts
from tfk8s.stack_kinds import outputs as stack_outputs
from tfk8s.stack_kinds.outputs import qualified

PLATFORM_OUTPUT = "platform"

ReadOutputs = Callable[[str], dict[str, Any]]


def read_outputs(name: str) -> dict[str, Any]:
    """The stack's outputs, read ahead at the program's start where its config names it
    (tfk8s.stack_kinds.outputs.prefetch); raises on an unknown stack."""
    return stack_outputs.read(name)


def platform_facts(ref: str, read: ReadOutputs = read_outputs) -> PlatformFacts:
    """The platform's facts from its stack's `platform` output; StackUnavailable names the key and the fix."""
    key, name = f"{NAMESPACE}:platformStack", qualified(ref)
    deploy = f"deploy it first (`pulumi up --stack {ref}`) or fix {key}"
    try:
        outputs = read(name)
    except Exception as error:  # the engine's own error: unknown stack, unreadable backend, ...
        raise StackUnavailable(f"{key}: cannot read the platform stack {name!r} ({error}); {deploy}") from None
    raw = outputs.get(PLATFORM_OUTPUT)
    if raw is None:
        raise StackUnavailable(
            f"{key}: stack {name!r} has no {PLATFORM_OUTPUT!r} output: it is not a deployed tfk8s platform stack; {deploy}"
        )
    try:
        facts = PlatformFacts.model_validate(raw, strict=False)  # outputs carry JSON numbers (2222.0)
    except ValidationError as error:
        raise StackUnavailable(
            f"{key}: the {PLATFORM_OUTPUT!r} output of {name!r} is not what this tfk8s expects "
            f"({error.error_count()} problem(s), first: {error.errors()[0]['msg']}); `pulumi up` the platform stack "
            "with this version of tfk8s"
        ) from None
    problem = release.outside_window(
        "tenant", facts.release, what=f"the platform stack {name!r}'s facts", upgrade_first=f"the platform stack {name!r}"
    )
    if problem:
        raise StackUnavailable(f"{key}: {problem}")
    return facts
