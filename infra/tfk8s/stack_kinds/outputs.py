"""Other stacks' outputs through the engine (`pulumi:pulumi:readStackOutputs`), read ahead.

A tenant reads its platform's outputs (tfk8s.stack_kinds.ref; an experiment reads its tenant's contract
from the cluster instead, tfk8s.stack_kinds.tenant_contract). The platform's name is in the tenant's config,
so `prefetch` starts that read in a thread of its own at the program's first line, while the
program imports its modules (~0.12 s), and `read` then answers from it. The same request, the same deserialization as the
SDK's `pulumi.runtime.invoke` (tfk8s.pulumi_internals.invoke); a read ahead that failed, or never
started, is simply made again by `read`, so its error is the engine's own, as before.

Light on purpose: imported before the program's own modules (tfk8s.entry), so only `pulumi`,
tfk8s.pulumi_internals and the standard library.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pulumi

from tfk8s import pulumi_internals

READ_STACK_OUTPUTS = "pulumi:pulumi:readStackOutputs"
# Where a tenant's config names the platform it builds on.
UPSTREAM_KEY = {"tenant": "tfk8s:platformStack"}

Monitor = pulumi_internals.ResourceMonitor
Invoke = Callable[[str, Monitor | None], dict[str, Any]]  # (stack name, monitor) -> invoke's answer


def qualified(ref: str, organization: str | None = None, project: str | None = None) -> str:
    """`platform-dev` -> `<organization>/<project>/platform-dev`, `other/platform-dev` ->
    `<organization>/other/platform-dev`; qualified names pass unchanged (the file backend's
    organization is `organization`). This program's organization and project unless given (a
    thread of its own must give them: the SDK keeps its settings per context, and a new thread
    sees its placeholders, project `project`; tfk8s.pulumi_internals)."""
    parts = ref.count("/")
    if parts == 2:
        return ref
    if parts == 1:
        return f"{organization or pulumi.get_organization()}/{ref}"
    return f"{organization or pulumi.get_organization()}/{project or pulumi.get_project()}/{ref}"


def invoke(name: str, monitor: Monitor | None = None) -> dict[str, Any]:
    """The stack's outputs, as `pulumi.runtime.invoke` returns them, from any thread: the SDK's
    call needs the program's event loop, which a thread started before the program has not got.
    `monitor`: the engine's, taken in the program's own thread (see `qualified`)."""
    monitor = monitor or pulumi_internals.resource_monitor()
    if monitor is None:
        raise RuntimeError("no resource monitor: not run by the Pulumi engine")
    return pulumi_internals.invoke(monitor, READ_STACK_OUTPUTS, {"name": name})


def _outputs(result: dict[str, Any]) -> dict[str, Any]:
    return dict(result.get("outputs") or {})


class ReadAhead:
    """A read of a named stack, started in a thread of its own, waited for by name."""

    def __init__(self, invoke: Invoke = invoke) -> None:
        self._invoke = invoke
        self._done = threading.Event()
        self._found: dict[str, dict[str, Any]] = {}
        self._thread: threading.Thread | None = None

    def start(self, name: str) -> None:
        """Read stack `name`."""
        monitor = pulumi_internals.resource_monitor()  # here: a new thread does not see the program's settings

        def run() -> None:
            try:
                self._found[name] = _outputs(self._invoke(name, monitor))
            except Exception:  # noqa: BLE001 -- `read` reads again and reports the engine's error
                pass
            finally:
                self._done.set()

        self._thread = threading.Thread(target=run, name="tfk8s-stack-outputs", daemon=True)
        self._thread.start()

    def read(self, name: str) -> dict[str, Any]:
        """The stack's outputs: read ahead if that read succeeded, read now otherwise."""
        if self._thread is not None:
            self._done.wait()
            if name in self._found:
                return self._found[name]
        return _outputs(self._invoke(name, None))


AHEAD = ReadAhead()


def prefetch(ahead: ReadAhead = AHEAD) -> None:
    """Start reading what this stack builds on: a tenant's platform. Raw config: the stack file is
    validated later (tfk8s.stack_kinds.config); a name that fails validation is read for nothing, and
    never used."""
    kind = pulumi_internals.raw_config("tfk8s:kind")
    ref = pulumi_internals.raw_config(UPSTREAM_KEY.get(str(kind), ""))
    if not isinstance(ref, str) or not ref:
        return
    ahead.start(qualified(ref))


def read(name: str) -> dict[str, Any]:
    """A stack's outputs by its qualified name (raises the engine's error for an unknown stack)."""
    return AHEAD.read(name)
