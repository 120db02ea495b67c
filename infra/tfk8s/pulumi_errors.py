"""tfk8s's errors on their way to the Pulumi SDK: a `pulumi.RunError`, which the CLI shows as its
message alone.

tfk8s.errors imports no Pulumi, so the layers without the SDK (the schema, the Kubernetes client,
the commands, GitOps) raise the project's own errors too. The SDK shows any exception that is not
a RunError as a bug, with a Python traceback, so each door through which a `Tfk8sError` can reach
the SDK turns it into one: the program's entry (tfk8s.entry), a callback of an Output that runs a
check (the User Node's taints), and the component package's constructor (tfk8s.component_package).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

import pulumi

from tfk8s.errors import Tfk8sError

P = ParamSpec("P")
R = TypeVar("R")


class Shown(pulumi.RunError):
    """A `Tfk8sError` for the Pulumi SDK; its message is the error's, and the error is its `__cause__`."""


@contextmanager
def shown_by_pulumi() -> Iterator[None]:
    """A `Tfk8sError` raised inside leaves as `Shown`; anything else leaves as it came (a bug)."""
    try:
        yield
    except Tfk8sError as error:
        raise Shown(str(error)) from error


def shown_when_raised(function: Callable[P, R]) -> Callable[P, R]:
    """`function`, whose `Tfk8sError`s leave as `Shown`: for a callback the SDK calls (`Output.apply`)."""

    @functools.wraps(function)
    def called(*args: P.args, **kwargs: P.kwargs) -> R:
        with shown_by_pulumi():
            return function(*args, **kwargs)

    return called
