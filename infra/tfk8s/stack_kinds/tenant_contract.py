"""The contract a tenant publishes for its experiments, in its own namespace: its facts and its
platform's (tfk8s.settings.contract) as of the tenant's last `up`, in one ConfigMap the tenant stack owns.

Why in the cluster and not only in the tenant stack's outputs: an experiment then reads no other
stack's state and needs no other stack's secrets provider. Its experimenter reads the contract with
her own Kubernetes credentials, which reach her tenant's namespace alone (the experimenter role's
`get` on ConfigMaps), so each tenant can have its own passphrase and state store, and a kubeconfig
that reaches one tenant reaches one contract. The ConfigMap carries the tenant stack's labels and
owner mark: admission lets only the platform team create or change such an object
(tfk8s.components.tenant_admission), and a reader trusts a contract only with both.

The platform's facts are those the tenant's last `up` read: after a platform change, `pulumi up`
its tenants (GitOps does, in that order) before their experiments rely on it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from tfk8s import release
from tfk8s.errors import ContractUnavailable, unchanged
from tfk8s.kube import api_paths
from tfk8s.kube.api_error import KubeApiError
from tfk8s.settings import NAMESPACE
from tfk8s.settings.contract import Facts, PlatformFacts, TenantFacts
from tfk8s.specs import ownership
from tfk8s.specs.ownership import Claimed

NAME = "tfk8s-contract"
TENANT_DATA, PLATFORM_DATA = "tenant.json", "platform.json"
KEY = f"{NAMESPACE}:namespace"

Reader = Callable[[str], Mapping[str, Any] | None]


UNREADABLE = (
    f"{KEY}: an experiment reads its tenant's contract from the cluster with the kubeconfig's credentials, and "
    "tfk8s cannot use these (kubernetes:kubeconfig in the stack's config): set KUBECONFIG to your kubeconfig file "
    "instead"
)


def data(tenant: TenantFacts, platform: PlatformFacts) -> dict[str, str]:
    """The ConfigMap's data: each contract as JSON, by alias (what `read` parses back)."""
    return {
        TENANT_DATA: json.dumps(tenant.published(), sort_keys=True),
        PLATFORM_DATA: json.dumps(platform.published(), sort_keys=True),
    }


def claim(namespace: str, key: str) -> Claimed:
    return Claimed(kind=api_paths.CONFIG_MAP, name=NAME, namespace=namespace, key=key)


def _parsed(raw: str | None, model: type[Facts], namespace: str, what: str) -> Any:
    fix = f"`pulumi up` the tenant stack of {namespace!r} with this version of tfk8s"
    if raw is None:
        raise ContractUnavailable(f"{KEY}: the contract in {namespace!r} has no {what}; {fix}")
    try:
        return model.model_validate(json.loads(raw), strict=False)
    except (ValueError, ValidationError) as error:
        first = error.errors()[0]["msg"] if isinstance(error, ValidationError) else str(error)
        raise ContractUnavailable(
            f"{KEY}: the {what} in {namespace!r}'s contract is not what this tfk8s expects ({first}); {fix}"
        ) from None


def read(namespace: str, get: Reader, identity: Callable[[], str]) -> tuple[TenantFacts, PlatformFacts]:
    """The tenant's facts and its platform's, read with the caller's own credentials (`get`: a GET
    of whole objects). Refuses, naming the key and the fix, when the namespace has no tenant, when
    the caller may not read it (`identity` names who asked), or when the contract does not parse."""
    try:
        found = get(api_paths.CONFIG_MAP.path(NAME, namespace))
    except KubeApiError as error:
        if error.status != 403:
            raise
        raise ContractUnavailable(
            unchanged(
                f"{KEY}: {identity()} may not read the tenant contract in namespace {namespace!r} (ConfigMap {NAME}): "
                "it is not one of that tenant's identities. Run the experiment with your own tenant's namespace, or "
                "ask the platform team to add you to the tenant's identities"
            )
        ) from None
    if found is None:
        raise ContractUnavailable(
            f"{KEY}: namespace {namespace!r} has no tfk8s tenant contract (ConfigMap {NAME}): it is not a tenant's "
            "namespace, or its tenant stack is not deployed. Fix the namespace, or `pulumi up` the tenant stack first"
        )
    raw = found.get("data") or {}
    tenant: TenantFacts = _parsed(raw.get(TENANT_DATA), TenantFacts, namespace, "tenant's facts")
    platform: PlatformFacts = _parsed(raw.get(PLATFORM_DATA), PlatformFacts, namespace, "platform's facts")
    written_by_another = ownership.foreign(found, tenant.owner)
    kind = ((found.get("metadata") or {}).get("labels") or {}).get(ownership.STACK_KIND)
    if written_by_another or kind != "tenant":
        # Admission refuses a tenant's create of an object labelled as the tenant stack's, so the label
        # and the owner mark the facts name are what only the platform team's `up` could have written.
        raise ContractUnavailable(
            f"{KEY}: the contract in {namespace!r} was not written by its tenant stack ({tenant.owner}): "
            f"{written_by_another or 'it lacks the tenant stack label ' + ownership.STACK_KIND + ': tenant'}. "
            f"Ask the platform team to delete it and `pulumi up` the tenant stack of {namespace!r}"
        )
    if tenant.namespace != namespace:
        raise ContractUnavailable(
            f"{KEY}: the contract in {namespace!r} is tenant {tenant.name!r}'s of namespace {tenant.namespace!r}; "
            "`pulumi up` the tenant stack of this namespace again"
        )
    tenant_stack = f"the tenant stack of {namespace!r}"
    for facts, what, upgrade_first in (
        (tenant, f"the tenant's contract in {namespace!r}", tenant_stack),
        (
            platform,
            f"the platform's facts in {namespace!r}'s contract",
            f"the platform stack {tenant.platform_stack!r}, then {tenant_stack}",
        ),
    ):
        problem = release.outside_window("experiment", facts.release, what=what, upgrade_first=upgrade_first)
        if problem:
            raise ContractUnavailable(f"{KEY}: {problem}")
    return tenant, platform
