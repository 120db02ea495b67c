"""Nothing stateful is replaced by an upgrade (issue 55): for every golden case, each stateful
object's URN and the fields that make the Kubernetes provider replace it, recorded in
tests/unit/golden/stateful/ and compared with what this tree declares.

A namespace, a volume claim or volume, a Secret (the tenant's Jupyter token), a StorageClass, the
platform's CRDs and their objects (the Tenant registrations, the Layouts) lose their data or their
identity when `pulumi up` deletes and creates them again. That happens when the URN changes (a
renamed resource, another parent or type) with no alias to the old one, or when a field the
provider cannot update changes (its forceNew table, provider/pkg/provider/diff.go of
pulumi-kubernetes, mirrored in FORCE_NEW). The guard fails on either unless the CHANGELOG's
Unreleased Migration notes name the object (its logical name) and say why. `make golden` rewrites
the records, and refuses to while a change is unjustified.

The URNs are the mocks' (pulumi.runtime.mocks): their type part names the direct parent's type
only, where the engine's names the whole chain, so a change of a grandparent's type alone goes
unseen here; a change of name, type or direct parent does not.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pulumi
import pytest
from mocked_program import run_program, settled
from test_golden_manifests import CASES, GOLDEN, UPDATE, _digest
from tfk8s import release

RECORDS = GOLDEN / "stateful"
CHANGELOG = Path(__file__).resolve().parents[2] / "CHANGELOG.md"

# What the provider replaces an object for, besides metadata.name and metadata.namespace (its
# forceNew table; a Secret's data too, the provider's enableSecretMutable being off).
VOLUME_SOURCES = (
    "awsElasticBlockStore azureDisk azureFile cephfs cinder csi fc flexVolume flocker gcePersistentDisk glusterfs "
    "hostPath iscsi local nfs photonPersistentDisk portworxVolume quobyte rbd scaleIO storageos vsphereVolume"
).split()
FORCE_NEW: Mapping[str, tuple[str, ...]] = {
    "PersistentVolume": tuple(f"spec.{source}" for source in VOLUME_SOURCES),
    "PersistentVolumeClaim": ("spec.accessModes", "spec.selector", "spec.storageClassName", "spec.volumeName"),
    "Secret": ("type", "stringData", "data"),
    "StorageClass": ("parameters", "provisioner"),
}


def kind_of(type_token: str) -> str:
    return type_token.rsplit(":", 1)[1]


def _at(inputs: Mapping[str, Any], path: str) -> Any:
    value: Any = inputs
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def forcing(type_token: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The fields whose change replaces the object, as recorded (long or secret values digested)."""
    paths = ("metadata.name", "metadata.namespace", *FORCE_NEW.get(kind_of(type_token), ()))
    return {path: _digest(_at(inputs, path)) for path in paths if _at(inputs, path) is not None}


def within_stack(urn: str) -> str:
    """A URN without its stack and project (`urn:pulumi:<stack>::<project>::`): the case's own
    stack is the same before and after an upgrade, and the mocks' settings vary with the tests run before."""
    return urn.split("::", 2)[2]


def identities(case: str) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The case's stateful objects under mocks: URN -> forcing fields, and each alias URN -> the URN
    of the object that declares it."""
    raw, platform, secrets = CASES[case]
    objects: dict[str, dict[str, Any]] = {}
    aliases: dict[str, str] = {}

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(raw(), secrets=secrets, platform=platform(), stack=case)

        async def collect() -> None:
            await settled(d)
            inputs = {f"{r.typ}::{r.name}": dict(r.inputs) for r in d.mocks.resources}
            for key, resource in d.declared.items():
                if kind_of(key.split("::")[0]) not in release.STATEFUL_KINDS:
                    continue
                urn = within_stack(await resource.urn.future())
                objects[urn] = forcing(key.split("::")[0], inputs[key])
                # The resource's aliases, collapsed to URNs by the SDK (no public accessor).
                for alias in resource._aliases:  # noqa: SLF001
                    aliases[within_stack(await alias.future())] = urn

        return d.components["readiness"].apply(lambda _: asyncio.ensure_future(collect()))

    run()
    return objects, aliases


def justified(urn: str, changelog: str) -> bool:
    """Whether the changelog's Unreleased Migration notes name the object (the URN's logical name)."""
    unreleased = re.split(r"^## ", changelog, flags=re.MULTILINE)[1]
    assert unreleased.startswith("Unreleased"), "CHANGELOG.md's first section is Unreleased"
    migration = unreleased.split("### Migration", 1)[1] if "### Migration" in unreleased else ""
    return re.search(rf"\b{re.escape(urn.rsplit('::', 1)[1])}\b", migration) is not None


def unjustified_changes(
    recorded: Mapping[str, Any], objects: Mapping[str, Any], aliases: Mapping[str, str], changelog: str
) -> list[str]:
    """What would replace or delete a recorded object, unless `changelog` (CHANGELOG.md's text) says so."""
    problems = []
    for urn, fields in recorded.items():
        now = urn if urn in objects else aliases.get(urn)
        if now is None:
            change = "would be deleted (no object of this URN, and none aliases it)"
        elif objects[now] != fields:
            moved = [path for path in sorted({*fields, *objects[now]}) if fields.get(path) != objects[now].get(path)]
            change = f"would be replaced: {', '.join(moved)} changed"
        else:
            continue
        if not justified(urn, changelog):
            problems.append(
                f"{urn} {change}; add an alias to its old URN, keep the field, or say so and why in CHANGELOG.md's "
                "Unreleased Migration notes (naming the object)"
            )
    return problems


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_stateful_object_is_replaced_or_deleted_without_an_alias_or_a_changelog_note(case: str) -> None:
    objects, aliases = identities(case)
    assert objects, f"{case}: no stateful object found: the guard would guard nothing"
    path = RECORDS / f"{case}.json"
    recorded = json.loads(path.read_text()) if path.is_file() else {}
    problems = unjustified_changes(recorded, objects, aliases, CHANGELOG.read_text())
    assert not problems, f"{case}:\n" + "\n".join(problems)
    if UPDATE:
        RECORDS.mkdir(exist_ok=True)
        path.write_text(json.dumps(objects, indent=1, sort_keys=True) + "\n")
    assert path.is_file(), f"no record of {case}'s stateful objects: `make golden` writes it"
    assert json.loads(path.read_text()) == objects, f"{case}: stateful objects added or changed with a note: `make golden`"


def test_every_record_belongs_to_a_case() -> None:
    assert {p.stem for p in RECORDS.glob("*.json")} == set(CASES)


URN = "tfk8s:index:Tenant$kubernetes:core/v1:PersistentVolumeClaim::alice-data"
CLAIM = {"metadata.name": "data", "metadata.namespace": "tfk8s-alice", "spec.storageClassName": "tfk8s-shared"}


@pytest.mark.parametrize(
    ("objects", "aliases", "problem"),
    [
        ({}, {}, "would be deleted"),
        ({URN: {**CLAIM, "spec.storageClassName": "other"}}, {}, "would be replaced: spec.storageClassName changed"),
        ({URN.replace("Tenant$", "User$"): CLAIM}, {}, "would be deleted"),  # a new parent, no alias
        ({URN.replace("Tenant$", "User$"): CLAIM}, {URN: URN.replace("Tenant$", "User$")}, None),  # aliased
        ({URN: CLAIM, URN + "-2": CLAIM}, {}, None),  # an addition
    ],
    ids=["deleted", "replaced-field", "reparented", "reparented-with-alias", "added"],
)
def test_the_guard_tells_a_deletion_or_replacement_from_an_alias_or_an_addition(
    objects: dict[str, Any], aliases: dict[str, str], problem: str | None
) -> None:
    found = unjustified_changes({URN: CLAIM}, objects, aliases, "## Unreleased\n\n## 0.3.0 - x\n")
    if problem is None:
        assert found == []
    else:
        assert len(found) == 1 and problem in found[0] and "CHANGELOG.md" in found[0]


def test_a_changelog_note_naming_the_object_justifies_it() -> None:
    noted = "# Changelog\n\n## Unreleased\n\n### Migration\n\n- `alice-data` is replaced: ...\n\n## 0.3.0 - x\n"
    assert unjustified_changes({URN: CLAIM}, {}, {}, noted) == []
    elsewhere = "# Changelog\n\n## Unreleased\n\n### Changed\n\n- alice-data\n\n## 0.3.0 - x\n### Migration\n- alice-data\n"
    assert len(unjustified_changes({URN: CLAIM}, {}, {}, elsewhere)) == 1  # not this release's migration note
