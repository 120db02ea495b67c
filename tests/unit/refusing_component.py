"""A component whose constructor raises what it is given, hosted by tests/unit/test_pulumi_internals.py.

No `from __future__ import annotations` here: the SDK's schema analyzer reads annotations as
types, and cannot read them as strings.
"""

from typing import TypedDict

import pulumi


class RefusingArgs(TypedDict):
    reason: pulumi.Input[str]
    """What the constructor raises: `value` (a ValueError) or anything else (a KeyError)."""


class Refusing(pulumi.ComponentResource):
    """Raises before it registers anything, as a refused TrainingCluster does."""

    def __init__(self, name: str, args: RefusingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        if args["reason"] == "value":
            raise ValueError(f"{name}: refused")
        raise KeyError(name)
