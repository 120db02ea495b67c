"""Every component follows Pulumi's contract (docs/contributing.md, STYLE "Components follow Pulumi's
contract"): `Class(name, args: XArgs, opts=None)` with a dataclass of arguments, children parented
to it, typed output attributes registered under the same keys, and no child after `register_outputs`."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import typing
from typing import Any

import pulumi
import pytest
import tfk8s.components
from mocked_program import after, facts_for, run_program, stack_config


def components() -> list[type[pulumi.ComponentResource]]:
    found = []
    for module in pkgutil.iter_modules(tfk8s.components.__path__):
        loaded = importlib.import_module(f"tfk8s.components.{module.name}")
        found += [
            c
            for c in vars(loaded).values()
            if inspect.isclass(c)
            and issubclass(c, pulumi.ComponentResource)
            and c.__module__ == loaded.__name__
            and "__init__" in vars(c)  # not a body a component shares (TrainingClusterBody)
        ]
    return sorted(found, key=lambda c: c.__name__)


COMPONENTS = components()


def annotated(component: type) -> dict[str, str]:
    """The attributes a component's own class annotates (Pulumi's base classes annotate theirs too: `urn`)."""
    return dict(vars(component).get("__annotations__", {}))


def output_attributes(component: type) -> set[str]:
    """The attributes a component's class annotates as `pulumi.Output[...]`: its typed outputs."""
    return {name for name, hint in annotated(component).items() if str(hint).startswith("pulumi.Output[")}


def test_every_component_is_found() -> None:
    assert [c.__name__ for c in COMPONENTS] == [
        "Experiment",
        "MonitoringFence",
        "PlatformGuard",
        "PreviewIdentity",
        "QueueingPlatform",
        "SharedStorage",
        "TenantAdmission",
        "TenantQueues",
        "TrainingCluster",
        "TrainingScrape",
        "UserEnvironment",
        "UserNode",
    ]


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda c: c.__name__)
def test_every_component_takes_a_name_an_args_dataclass_and_options(component: type) -> None:
    signature = inspect.signature(component.__init__)
    assert list(signature.parameters) == ["self", "name", "args", "opts"]
    assert signature.parameters["opts"].default is None
    args_type = typing.get_type_hints(component.__init__)["args"]
    assert dataclasses.is_dataclass(args_type) and args_type.__name__ == f"{component.__name__}Args"
    assert args_type.__module__ == component.__module__


def run_recording(raw: dict[str, Any], **kwargs: Any) -> tuple[Any, list[tuple[str, Any, Any]]]:
    """Run the program of `raw`, recording in order every resource's construction (with its parent)
    and every component's `register_outputs` (with the keys it registered)."""
    events: list[tuple[str, Any, Any]] = []
    resource_init = pulumi.Resource.__init__
    register = pulumi.ComponentResource.register_outputs

    def init(
        self: pulumi.Resource, t: str, name: str, custom: bool, props: Any = None, opts: Any = None, *a: Any, **k: Any
    ) -> None:
        events.append(("resource", self, opts.parent if opts is not None else None))
        resource_init(self, t, name, custom, props, opts, *a, **k)

    def register_outputs(self: pulumi.ComponentResource, outputs: Any) -> None:
        events.append(("outputs", self, set(outputs)))
        register(self, outputs)

    pulumi.Resource.__init__ = init  # type: ignore[method-assign]
    pulumi.ComponentResource.register_outputs = register_outputs  # type: ignore[method-assign]
    try:
        d = run_program(raw, **kwargs)
    finally:
        pulumi.Resource.__init__ = resource_init  # type: ignore[method-assign]
        pulumi.ComponentResource.register_outputs = register  # type: ignore[method-assign]
    return d, events


def check_contract(events: list[tuple[str, Any, Any]]) -> set[str]:
    """The contract's checks over one run; the names of the components that registered outputs."""
    registered: dict[Any, set[str]] = {}
    seen = set()
    for event, resource, detail in events:
        if event == "outputs":
            registered[resource] = detail
            continue
        parent = detail
        assert parent not in registered, (
            f"{type(resource).__name__} created under {type(parent).__name__} after its register_outputs"
        )
        if parent is not None and not isinstance(parent, pulumi.ComponentResource):
            raise AssertionError(f"{type(resource).__name__} has a plain resource ({type(parent).__name__}) as its parent")
    for component, keys in registered.items():
        seen.add(type(component).__name__)
        kind = type(component)
        # Every typed output is registered; what else is registered is a typed attribute too (a
        # TrainingCluster's `spec`, known before anything is created, is a plain dict).
        assert output_attributes(kind) <= keys <= set(annotated(kind)), f"{kind.__name__}: register_outputs keys"
        for key in keys:
            assert hasattr(component, key), f"{kind.__name__}.{key}"
    return seen


STACKS = ["platform-dev", "tenant-alice", "dev"]


@pytest.mark.parametrize("stack", STACKS)
def test_no_component_creates_a_child_after_registering_its_outputs(stack: str) -> None:
    d, events = run_recording(stack_config(stack))
    seen = check_contract(events)
    assert seen, "no component registered its outputs"

    @pulumi.runtime.test
    def settled() -> pulumi.Output[Any]:
        return after(d, lambda: None)

    settled()


def monitored_platform() -> dict[str, Any]:
    """platform-dev with a Prometheus to scrape for (its TrainingScrape exists only then) and its pod
    network named (its MonitoringFence exists only then)."""
    raw = stack_config("platform-dev")
    raw["platform"]["monitoring"] = {"namespace": "monitoring", "scrape": "scrapeConfig"}
    raw["platform"]["network"]["podCidrs"] = ["10.244.0.0/16"]
    return raw


def queueing_platform() -> dict[str, Any]:
    """platform-dev with queueing on (its QueueingPlatform exists only then)."""
    raw = stack_config("platform-dev")
    raw["platform"]["queueing"] = {"enabled": True, "capacity": {"cpu": "64", "memory": "256Gi", "gpus": 8}}
    return raw


def previewing_platform() -> dict[str, Any]:
    """platform-dev with the pull requests' preview identity (its PreviewIdentity exists only then)."""
    raw = stack_config("platform-dev")
    raw["platform"]["gitops"] = {"previewIdentity": True}
    return raw


def test_a_queueing_platforms_components_follow_the_contract() -> None:
    d, events = run_recording(queueing_platform())
    assert "QueueingPlatform" in check_contract(events)

    @pulumi.runtime.test
    def settled() -> pulumi.Output[Any]:
        return after(d, lambda: None)

    settled()


def test_a_monitored_platforms_components_follow_the_contract() -> None:
    d, events = run_recording(monitored_platform())
    assert {"TrainingScrape", "MonitoringFence"} <= check_contract(events)

    @pulumi.runtime.test
    def settled() -> pulumi.Output[Any]:
        return after(d, lambda: None)

    settled()


def test_every_component_registers_its_outputs_in_some_stack() -> None:
    seen: set[str] = set()
    runs: list[tuple[dict[str, Any], dict[str, Any]]] = [
        (stack_config("platform-dev"), {}),
        (monitored_platform(), {}),
        (queueing_platform(), {}),
        (previewing_platform(), {}),
        (stack_config("tenant-alice"), {}),
        (stack_config("tenant-alice"), {"platform": facts_for(queueing_platform())}),  # its TenantQueues
        (stack_config("dev"), {}),
    ]
    for raw, kwargs in runs:
        d, events = run_recording(raw, **kwargs)
        seen |= check_contract(events)
    assert seen == {c.__name__ for c in COMPONENTS}
