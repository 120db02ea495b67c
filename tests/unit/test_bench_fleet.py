"""bench/fleet.py's floor: a program of as many plain Kubernetes objects as the fleet's tenant has,
so that the floor is what any Pulumi program of a tenant's size costs a fleet."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pulumi
from mocked_program import after, run_program
from mocks import RecordingMocks

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from fleet import FLOOR_OBJECTS, FLOOR_PROGRAM, fleet_tenant  # noqa: E402


def kubernetes_objects(types: list[str]) -> int:
    return sum(1 for typ in types if typ.startswith("kubernetes:"))


@pulumi.runtime.test
def test_a_fleet_tenant_declares_floor_objects_kubernetes_objects() -> None:
    raw: dict[str, Any] = {key.removeprefix("tfk8s:"): value for key, value in fleet_tenant("floor").items()}
    d = run_program(raw)

    def check() -> None:
        assert kubernetes_objects([r.typ for r in d.mocks.resources]) == FLOOR_OBJECTS

    return after(d, check)


def test_the_floor_program_declares_as_many_plain_ones() -> None:
    pulumi.runtime.set_mocks(RecordingMocks(), project="fleet-floor", stack="floor-2-10-0")
    declared: list[str] = []

    def record(args: pulumi.ResourceTransformationArgs) -> None:
        declared.append(args.type_)

    pulumi.runtime.register_stack_transformation(record)
    exec(compile(FLOOR_PROGRAM, "fleet-floor", "exec"), {"__name__": "__main__"})  # noqa: S102 -- the bench's own program
    assert kubernetes_objects(declared) == FLOOR_OBJECTS
    # No more kinds than the policy pack asks every namespace for, and ConfigMaps.
    assert set(declared) - {"pulumi:pulumi:Stack"} == {
        "kubernetes:core/v1:Namespace",
        "kubernetes:networking.k8s.io/v1:NetworkPolicy",
        "kubernetes:core/v1:ResourceQuota",
        "kubernetes:core/v1:ConfigMap",
    }
