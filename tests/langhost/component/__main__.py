"""One trivial component, hosted as tfk8s's package hosts its own (tests/langhost/test_host.py).

No `from __future__ import annotations` here: the schema analyzer reads annotations as types, and
cannot read them as strings.
"""

from typing import TypedDict

import pulumi
from pulumi.provider.experimental import component_provider_host


class GreetingArgs(TypedDict):
    message: pulumi.Input[str]
    """What the greeting says."""


class Greeting(pulumi.ComponentResource):
    """A greeting: a component without children."""

    message: pulumi.Output[str]

    def __init__(self, name: str, args: GreetingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("hostcheck:index:Greeting", name, {}, opts)
        self.message = pulumi.Output.from_input(args["message"])
        self.register_outputs({"message": self.message})


if __name__ == "__main__":
    component_provider_host(components=[Greeting], name="hostcheck")
