"""Which release of tfk8s this code is, and which releases it works with.

Semantic versioning: while the major version is 0, a minor release may break, and its changelog
entry says how (docs/operations/releases.md). Between two releases main carries the next one's
version with `-dev.0` (PEP 440 and Pulumi's Python SDKs both read it as X.Y.Z.dev0).

Written once, here: pyproject.toml reads it (the wheel's version), the component package serves it
(its schema's version), `tfk8s --version` prints it, every stack exports it (`tfk8sVersion`), and
the platform's and tenant's contracts carry it (`release`), so that a reader knows which release
wrote what it reads. Each release cut is recorded with its commit in releases.toml at the root, and
described in CHANGELOG.md; tests/unit/test_releases.py keeps the three in step.

**The window.** A platform, its tenants and their experiments upgrade in that order, one stack at
a time, so a stack reads facts published by a release one line older (not upgraded yet) or one
line newer (upgraded before it). Every reader accepts facts within one line of its own release
and refuses the rest before anything is declared, naming both releases and what to upgrade first
(`outside_window`). A line is what may break from one release to the next: the minor version while
the major is 0, the major after.
"""

from __future__ import annotations

import re

VERSION = "0.5.0-dev.0"

# What facts published before releases were recorded are read as: every such commit said 0.2.0.
UNRECORDED = "0.2.0"
# How many lines apart a reader and the facts it reads may be.
WINDOW = 1

_SEMVER = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:-[0-9A-Za-z.-]+)?")


def line(version: str) -> tuple[int, int]:
    """The release line of `version` (`0.4.0-dev.0` is on 0.4's, `1.2.3` on 1's)."""
    found = _SEMVER.fullmatch(version)
    if found is None:
        raise ValueError(f"{version!r} is not a tfk8s release (semantic versioning: 0.3.0, 0.4.0-dev.0)")
    major, minor = int(found[1]), int(found[2])
    return (0, minor) if major == 0 else (major, 0)


def lines_apart(a: str, b: str) -> int:
    """How many lines separate two releases (0.9 and 1.0 are one apart)."""
    (major_a, minor_a), (major_b, minor_b) = line(a), line(b)
    if major_a == 0 and major_b == 0:
        return abs(minor_a - minor_b)
    return abs(major_a - major_b)


def outside_window(reader: str, written: str | None, *, what: str, upgrade_first: str) -> str | None:
    """Why the facts `what` (published by release `written`; None: before releases were recorded)
    are outside this release's window, or None when they are inside it. `reader` names the stack
    that reads them; `upgrade_first` what to `pulumi up` first when they are too old."""
    ours, published = VERSION, written or UNRECORDED
    try:
        apart = lines_apart(ours, published)
    except ValueError:
        return f"{what} says it was published by release {published!r}, which is not a tfk8s release; {upgrade_first}"
    if apart <= WINDOW:
        return None
    said = f"published by tfk8s {published}" if written else "published before tfk8s 0.3.0 (an unrecorded release)"
    if line(published) < line(ours):
        return (
            f"{what} was {said}, {apart} release lines before this {reader}'s tfk8s {ours}; a stack reads facts "
            f"at most {WINDOW} line apart. Upgrade in order: {upgrade_first} with a release of tfk8s at most "
            f"{WINDOW} line before {ours}, then this {reader}"
        )
    return (
        f"{what} was {said}, {apart} release lines after this {reader}'s tfk8s {ours}; a stack reads facts at "
        f"most {WINDOW} line apart. Upgrade this {reader}'s tfk8s first, to a release at most {WINDOW} line "
        f"before {published}"
    )


# What an upgrade must never replace or delete without saying so (its changelog's Migration notes):
# the kinds whose objects hold data or identity, by the last part of their Pulumi type. A namespace,
# a volume claim or volume, a Secret (the tenant's Jupyter token), a StorageClass, the platform's
# CRDs and their objects (Tenant registrations, Layouts). tests/unit/test_stateful_identity.py
# guards them in the golden stacks, tests/e2e/test_upgrade.py in a real upgrade.
STATEFUL_KINDS = frozenset(
    {
        "Namespace",
        "PersistentVolumeClaim",
        "PersistentVolume",
        "Secret",
        "StorageClass",
        "CustomResourceDefinition",
        "Tenant",
        "Layout",
    }
)
