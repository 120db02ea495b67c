"""The ownership read checks what the program creates: every object declared under a fixed name is
one its component claims (tfk8s.specs.ownership.Claimed), and every claim is an object the program declares.

So a new fixed-name object is checked by being listed where its component names it, and a list
that drifted from the names the components create fails here, on every stack the golden
manifests cover.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
from mocked_program import PLATFORM_OWNER, after, run_program, tenant_of, tenant_owner
from test_golden_manifests import CASES
from tfk8s.specs import ownership

Identity = tuple[str, str | None, str]  # kind, namespace, name

# Patches change an object that exists, never create one: a NodePatch the User Node (tfk8s.components.user_node
# checks its taints' managers), a DeploymentPatch a PS Deployment the same program declares.
PATCHES = {"kubernetes:core/v1:NodePatch", "kubernetes:apps/v1:DeploymentPatch"}


def declared_under_fixed_names(resources: list[Any]) -> set[Identity]:
    found = set()
    for r in resources:
        meta = r.inputs.get("metadata") or {}
        if r.typ.startswith("kubernetes:") and r.typ not in PATCHES and isinstance(meta.get("name"), str):
            found.add((r.typ.rsplit(":", 1)[1], meta.get("namespace"), meta["name"]))
    return found


def unclaimed(declared: set[Identity], claims: set[Identity]) -> set[Identity]:
    """Declared objects no claim covers. Covered without a claim of their own: whatever lives in a
    namespace the stack claims (a tenant's objects), and a PS Deployment, named after its
    claimed Service plus the run id (only that Service's other owner could collide with it)."""
    namespaces = {name for kind, _, name in claims if kind == "Namespace"}
    services = {(ns, name) for kind, ns, name in claims if kind == "Service"}
    return {
        (kind, ns, name)
        for kind, ns, name in declared - claims
        if ns not in namespaces and not (kind == "Deployment" and (ns, name.rsplit("-", 1)[0]) in services)
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_object_created_under_a_fixed_name_is_claimed(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    raw, platform, secrets = CASES[case]
    claims: set[Identity] = set()

    def record(found: list[ownership.Claimed], read: Any, owner: str, fix: str) -> list[str]:
        claims.update((c.kind.kind, c.namespace, c.name) for c in found)
        return []

    monkeypatch.setattr(ownership, "refusals", record)
    # Everything exists as the stack's it builds on: an experiment's namespace check passes (its
    # tenant's), `existing` classes are there.
    stack = raw()
    builds_on = tenant_owner(tenant_of(stack["namespace"])) if stack["kind"] == "experiment" else PLATFORM_OWNER
    theirs = {"metadata": {"annotations": {ownership.OWNER: builds_on}}}

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(stack, secrets=secrets, platform=platform(), stack=case, read=lambda path: theirs)

        def check() -> None:
            declared = declared_under_fixed_names(d.mocks.resources)
            assert claims, "the program read no claims"
            assert claims <= declared, f"claimed but never declared: {sorted(claims - declared, key=str)}"
            assert not unclaimed(declared, claims), f"declared under a fixed name, never claimed: {unclaimed(declared, claims)}"

        return after(d, check)

    run()
