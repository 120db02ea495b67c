"""An experiment's view of its platform stack: the `platform` output, read before anything is declared.

The read goes through the engine's stack-reference builtin (`pulumi:pulumi:readStackOutputs`,
the call `pulumi.StackReference` makes; it works with the local file backend) as a synchronous
invoke, not through a `StackReference` resource: its Outputs resolve only after the program has
run, too late to refuse a missing platform or user before any resource is declared. What comes
back is input like a stack file, so it is validated against `PlatformFacts`.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pydantic import ValidationError

from tfk8s.contract import PlatformFacts

READ_STACK_OUTPUTS = "pulumi:pulumi:readStackOutputs"
OUTPUT = "platform"


class PlatformUnavailable(pulumi.RunError):
    """The platform stack, or the user in it, is not there; the message names both and the fix."""


def qualified(ref: str) -> str:
    """`platform-dev` -> `<organization>/<project>/platform-dev`; qualified names pass unchanged."""
    return ref if ref.count("/") == 2 else f"{pulumi.get_organization()}/{pulumi.get_project()}/{ref}"


def read_outputs(name: str) -> dict[str, Any]:
    result = pulumi.runtime.invoke(READ_STACK_OUTPUTS, {"name": name})  # raises on an unknown stack
    return dict((result.value or {}).get("outputs") or {})


def platform_facts(ref: str, user: str, read: Any = read_outputs) -> PlatformFacts:
    name = qualified(ref)
    deploy = f"deploy it first (`pulumi up --stack {ref}`) or fix tfk8s:platformStack"
    try:
        outputs = read(name)
    except Exception as error:  # the engine's own error: unknown stack, unreadable backend, ...
        raise PlatformUnavailable(f"tfk8s:platformStack: cannot read the platform stack {name!r} ({error}); {deploy}") from None
    raw = outputs.get(OUTPUT)
    if raw is None:
        raise PlatformUnavailable(
            f"tfk8s:platformStack: stack {name!r} has no {OUTPUT!r} output: it is not a deployed tfk8s platform stack; {deploy}"
        )
    try:
        facts = PlatformFacts.model_validate(raw, strict=False)  # outputs carry JSON numbers (2222.0)
    except ValidationError as error:
        raise PlatformUnavailable(
            f"tfk8s:platformStack: the {OUTPUT!r} output of {name!r} is not what this tfk8s expects "
            f"({error.error_count()} problem(s), first: {error.errors()[0]['msg']}); `pulumi up` the platform stack "
            "with this version of tfk8s"
        ) from None
    if user not in facts.users:
        raise PlatformUnavailable(
            f"tfk8s:user: the platform stack {name!r} has no user {user!r} (it has {sorted(facts.users)}); ask the "
            f"platform team to add {user!r} to its tfk8s:users and `pulumi up` it, or fix tfk8s:user"
        )
    return facts
