"""Who owns what: every object tfk8s creates carries its stack's mark, and nothing foreign is adopted.

The provider's create is an upsert under server-side apply, so without a check two stacks (or a
stack and another tool) silently co-own an object, and the first `destroy` deletes what the other
still uses. So every object gets
  * labels `tfk8s.io/stack` (the stack name) and `tfk8s.io/stack-kind` (platform | experiment),
    which policies and pipelines can select on;
  * the annotation `tfk8s.io/owner: <org>/<project>/<stack>@<state>`, where <state> hashes the
    Pulumi backend URL: the same stack name deployed from a second checkout (its own state) is
    someone else too;
and before anything is declared the program reads each object it would create under a fixed name,
as the components creating them list those (`Claimed`): one that exists with another owner, or
with none (`foreign`), stops preview/up with the object, its manager and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tfk8s.kube.api_paths import NAMESPACE, ApiKind

STACK = "tfk8s.io/stack"
STACK_KIND = "tfk8s.io/stack-kind"
OWNER = "tfk8s.io/owner"


def label_value(text: str) -> str:
    """A label-safe form of a stack name: at most 63 of [A-Za-z0-9._-], alphanumeric at both ends."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", text)[:63].strip("-._") or "stack"


@dataclass(frozen=True, kw_only=True)
class Owner:
    organization: str
    project: str
    stack: str
    kind: str  # "platform" | "experiment"
    state: str | None = None

    @property
    def annotation(self) -> str:
        name = f"{self.organization}/{self.project}/{self.stack}"
        return f"{name}@{self.state}" if self.state else name

    def labels(self) -> dict[str, str]:
        return {STACK: label_value(self.stack), STACK_KIND: self.kind}

    def annotations(self) -> dict[str, str]:
        return {OWNER: self.annotation}


def _metadata(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def foreign(live: Mapping[str, Any] | None, owner: str) -> str | None:
    """Who else manages `live` (None: absent, or ours). `owner` is the expected annotation."""
    if live is None:
        return None
    meta = _metadata(live)
    theirs = (meta.get("annotations") or {}).get(OWNER)
    if theirs == owner:
        return None
    if theirs:
        same_name = theirs.split("@")[0] == owner.split("@")[0]
        return (
            f"tfk8s stack {theirs}, the same stack name in another Pulumi state (another checkout or backend)"
            if same_name
            else f"tfk8s stack {theirs}"
        )
    managers = sorted({e.get("manager") or "?" for e in meta.get("managedFields") or []})
    by = (meta.get("labels") or {}).get("app.kubernetes.io/managed-by")
    return "another tool" + (f" ({by})" if by else "") + (f", field managers {', '.join(managers)}" if managers else "")


@dataclass(frozen=True, kw_only=True)
class Claimed:
    """An object a stack will create under a fixed name, as the component creating it lists it.

    Listed before anything is declared, from the same names the components create: a training
    cluster's and a tenant's in tfk8s.specs.fixed_names, the platform's components' beside each of
    them (`fixed_objects`); `refusals` reads each one at its kind's API path (tfk8s.kube.api_paths).
    """

    kind: ApiKind
    name: str
    namespace: str | None = None  # None for cluster-scoped kinds
    key: str  # the config key that chose the name, for the message

    @property
    def what(self) -> str:
        """The object as messages name it: `namespace 'tfk8s-alice'`, `StorageClass 'nfs'`, `Service ns/name`."""
        if self.namespace is not None:
            return f"{self.kind.kind} {self.namespace}/{self.name}"
        noun = "namespace" if self.kind == NAMESPACE else self.kind.kind  # as users say it
        return f"{noun} {self.name!r}"

    @property
    def path(self) -> str:
        return self.kind.path(self.name, self.namespace)


def refusals(claims: Sequence[Claimed], read: Any, owner: str, fix: str) -> list[str]:
    """Every claimed object that someone else manages, as one message each (`read(path)` GETs it)."""
    problems = []
    for claim in claims:
        other = foreign(read(claim.path), owner)
        if other:
            problems.append(f"{claim.key}: {claim.what} already exists, managed by {other}; tfk8s will not adopt it. {fix}")
    return problems
