"""Reading the stacks a stack builds on ahead, while the program imports (tfk8s.stack_kinds.outputs)."""

from __future__ import annotations

import threading
from typing import Any

import pulumi
import pytest
from mocks import RecordingMocks
from tfk8s.stack_kinds import outputs as stack_outputs
from tfk8s.stack_kinds.outputs import ReadAhead

TENANT = "organization/tfk8s/tenant-alice"
PLATFORM = "organization/tfk8s/platform-dev"
STACKS = {PLATFORM: {"platform": {"x": 1.0}}}


class Engine:
    """The engine's readStackOutputs: answers from STACKS, records every call and its thread."""

    def __init__(self, fail: set[str] | None = None, gate: threading.Event | None = None) -> None:
        self.asked: list[tuple[str, str]] = []
        self.fail = fail or set()
        self.gate = gate

    def __call__(self, name: str, monitor: Any) -> dict[str, Any]:
        if self.gate is not None:
            self.gate.wait(10)
        self.asked.append((name, threading.current_thread().name))
        if name in self.fail or name not in STACKS:
            raise RuntimeError(f"unknown stack {name}")
        return {"name": name, "outputs": STACKS[name]}


@pytest.fixture(autouse=True)
def tenant_config() -> Any:
    pulumi.runtime.set_mocks(RecordingMocks(), project="tfk8s", stack="tenant-alice", organization="organization")
    pulumi.runtime.set_all_config({"tfk8s:kind": "tenant", "tfk8s:platformStack": "platform-dev"})
    yield
    pulumi.runtime.set_all_config({})


def test_a_tenant_reads_its_platform_ahead_in_a_thread_of_its_own() -> None:
    gate = threading.Event()
    engine = Engine(gate=gate)
    ahead = ReadAhead(engine)
    stack_outputs.prefetch(ahead)
    assert engine.asked == []  # the program goes on while the thread waits for the engine
    gate.set()
    assert ahead.read(PLATFORM) == STACKS[PLATFORM] and ahead.read(PLATFORM) == STACKS[PLATFORM]
    assert engine.asked == [(PLATFORM, "tfk8s-stack-outputs")]  # once
    with pytest.raises(RuntimeError, match="unknown stack organization/tfk8s/other"):
        ahead.read("organization/tfk8s/other")  # not read ahead: read now, the engine's error
    assert engine.asked[-1] == ("organization/tfk8s/other", threading.current_thread().name)


def test_a_read_ahead_that_failed_is_made_again_and_its_error_is_the_engines() -> None:
    engine = Engine(fail={PLATFORM})
    ahead = ReadAhead(engine)
    stack_outputs.prefetch(ahead)
    with pytest.raises(RuntimeError, match=f"unknown stack {PLATFORM}"):
        ahead.read(PLATFORM)
    assert [name for name, _ in engine.asked] == [PLATFORM, PLATFORM]


@pytest.mark.parametrize(
    "config",
    [{"tfk8s:kind": "platform"}, {"tfk8s:kind": "experiment", "tfk8s:namespace": "tfk8s-alice"}],
    ids=["platform", "experiment"],
)
def test_a_platform_and_an_experiment_read_no_stack(config: dict[str, str]) -> None:
    """An experiment reads its tenant's contract from the cluster (tfk8s.stack_kinds.tenant_contract), no other stack's state."""
    pulumi.runtime.set_all_config(config)
    nothing = Engine()
    stack_outputs.prefetch(ReadAhead(nothing))
    assert nothing.asked == []


def test_names_are_qualified_with_this_programs_organization_and_project_unless_given() -> None:
    assert stack_outputs.qualified("tenant-alice") == TENANT
    assert stack_outputs.qualified("tenant-alice", "org", "proj") == "org/proj/tenant-alice"
    assert stack_outputs.qualified("a/b/c", "org", "proj") == "a/b/c"
    # project/stack, as the schema's messages offer it: the file backend's organization is `organization`.
    assert stack_outputs.qualified("tfk8s/tenant-alice") == TENANT
    assert stack_outputs.qualified("other/tenant-alice", "org", "proj") == "org/other/tenant-alice"
