"""The program under recording mocks, as the unit tests run it: stack files as raw config, the
contracts a tenant or an experiment reads, and one run's record. (Not in conftest.py: pytest imports every
test directory's conftest under the same module name, so `from conftest import` finds whichever came first.)"""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.error
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from mocks import LiveHook, RecordingMocks, StatusHook, healthy_status, plain_nodes, through_the_engine

DEPLOYMENT, JOB, SERVICE = "kubernetes:apps/v1:Deployment", "kubernetes:batch/v1:Job", "kubernetes:core/v1:Service"
DEPLOYMENT_PATCH = "kubernetes:apps/v1:DeploymentPatch"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"


def pod_spec(resource: Any) -> dict[str, Any]:
    return resource.inputs["spec"]["template"]["spec"]


def pod_labels(resource: Any) -> dict[str, str]:
    return resource.inputs["spec"]["template"]["metadata"]["labels"]


def env_of(resource: Any) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in pod_spec(resource)["containers"][0]["env"]}


ROOT = Path(__file__).resolve().parents[2]


def stack_config(stack: str) -> dict[str, Any]:
    """The `tfk8s:` keys of stacks/Pulumi.<stack>.yaml, without the prefix, as raw values."""
    raw = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    return {k.removeprefix("tfk8s:"): v for k, v in raw.items() if k.startswith("tfk8s:")}


PLATFORM_OWNER = "organization/tfk8s/platform-dev@test"


TEST_GROUP = "ptest.layouts.tfk8s.io"
PREVIEW_ROLE = "preview-identity-role-test"  # the auto-named ClusterRole a test platform publishes
USER_NODE_ADDRESS = "10.0.0.10"


def facts_for(platform_raw: dict[str, Any]) -> dict[str, Any]:
    """The `platform` output a deployed platform stack of `platform_raw` publishes, built like the
    platform builds it (its owner, API group and User Node address the ones a test platform has)."""
    from tfk8s.checks.context import check_platform
    from tfk8s.components import guard
    from tfk8s.settings.stack_file import validate
    from tfk8s.specs import backends
    from tfk8s.stack_kinds import platform as platform_stack

    stack = check_platform(validate(platform_raw), None)  # type: ignore[arg-type]
    p = stack.platform
    contract = platform_stack.facts(
        p,
        owner=PLATFORM_OWNER,
        group=TEST_GROUP,
        storage_class=p.storage.class_name,
        scratch_storage_class=backends.scratch_class(p.storage),
        user_node_address=USER_NODE_ADDRESS,
        experimenter_role=guard.experimenter_role(TEST_GROUP),
        preview_role=PREVIEW_ROLE if p.gitops.preview_identity else None,
    )
    return through_the_engine(contract.published())


def tenant_owner(stack: str) -> str:
    return f"organization/tfk8s/{stack}@test"


def tenant_facts_for(tenant_stack: str, platform_output: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `tenant` output of stacks/Pulumi.<tenant_stack>.yaml, deployed on `platform_output`
    (default: its own platform stack file's facts), its app URLs the ones a test tenant has."""
    from tfk8s.settings.contract import PlatformFacts
    from tfk8s.settings.stack_file import validate
    from tfk8s.stack_kinds import tenant as tenants

    stack = validate(stack_config(tenant_stack))
    platform = PlatformFacts.model_validate(
        platform_output if platform_output is not None else facts_for(stack_config(stack.platform_stack)),  # type: ignore[union-attr]
        strict=False,
    )
    contract = tenants.facts(
        stack.tenant,  # type: ignore[union-attr]
        platform,
        platform_stack=f"organization/tfk8s/{stack.platform_stack}",  # type: ignore[union-attr]
        owner=tenant_owner(tenant_stack),
        jupyter_url=f"http://{USER_NODE_ADDRESS}:30001/",
        tensorboard_url=f"http://{USER_NODE_ADDRESS}:30002/",
    )
    return through_the_engine(contract.published())


SCRATCH_CLASS = "tfk8s-shared-scratch"


def tenant_of(namespace: str) -> str:
    """The tenant stack of stacks/ that holds `namespace` (an experiment's `tfk8s:namespace`)."""
    for path in sorted((ROOT / "stacks").glob("Pulumi.*.yaml")):
        name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        raw = stack_config(name)
        if raw["kind"] == "tenant":
            prefix = stack_config(raw["platformStack"])["platform"].get("namespacePrefix", "tfk8s-")
            if f"{prefix}{raw['tenant']['name']}" == namespace:
                return name
    raise LookupError(f"no tenant stack in stacks/ holds namespace {namespace!r}")


def platform_of(stack: str) -> str:
    """The platform stack a repo stack builds on: a tenant's own, an experiment's tenant's."""
    raw = stack_config(stack)
    return raw["platformStack"] if raw["kind"] == "tenant" else platform_of(tenant_of(raw["namespace"]))


def contract_metadata(namespace: str, owner: str) -> dict[str, Any]:
    """The contract ConfigMap's metadata as its tenant stack writes it: its labels and owner mark."""
    from tfk8s.specs import ownership
    from tfk8s.stack_kinds import tenant_contract

    return {
        "name": tenant_contract.NAME,
        "namespace": namespace,
        "labels": {ownership.STACK_KIND: "tenant"},
        "annotations": {ownership.OWNER: owner},
    }


def with_contract(namespace: str, tenant: dict[str, Any], platform: dict[str, Any], read_whole: Any) -> Any:
    """`read_whole` (None: the cluster has nothing else) that also answers the tenant's contract
    ConfigMap in `namespace`, as the tenant stack publishes it (tfk8s.stack_kinds.tenant_contract)."""
    from tfk8s.kube import api_paths
    from tfk8s.stack_kinds import tenant_contract

    path = api_paths.CONFIG_MAP.path(tenant_contract.NAME, namespace)
    data = {tenant_contract.TENANT_DATA: json.dumps(tenant), tenant_contract.PLATFORM_DATA: json.dumps(platform)}

    def whole(asked: str) -> Any:
        if asked == path:
            return {"metadata": contract_metadata(namespace, tenant["owner"]), "data": data}
        return read_whole(asked) if read_whole is not None else None

    return whole


def facts_with_scratch() -> dict[str, Any]:
    """platform-dev's output as if its backend offered a scratch class (its `local` offers none)."""
    return {**facts_for(stack_config("platform-dev")), "scratchStorageClass": SCRATCH_CLASS}


def no_gate(request: Any, timeout: float) -> Any:
    """A TensorBoard gate that never answers (without the network)."""
    raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused (no gate in unit tests)"))


@dataclass
class Deployment:
    """One program run under mocks: what was created, with which options, as which objects (each
    keyed `type::name`; their `urn`s resolve under the mocks as the engine would make them)."""

    mocks: RecordingMocks
    components: dict[str, Any]
    options: dict[str, pulumi.ResourceOptions] = field(default_factory=dict)
    declared: dict[str, pulumi.Resource] = field(default_factory=dict)


def run_program(
    raw: dict[str, Any],
    status_hook: StatusHook = healthy_status,
    secrets: dict[str, str] | None = None,
    live_hook: LiveHook = plain_nodes,
    platform: dict[str, Any] | None = None,
    read: Any = None,
    stack: str | None = None,
    read_whole: Any = None,
    tenant: dict[str, Any] | None = None,
    post: Any = None,
    open_gate: Any = None,
    preview: bool = False,
) -> Deployment:
    """Validate `raw` like the real program and declare everything under fresh mocks.

    Tenants read `platform` (default: the facts of the platform stack file they build on) as their
    platform stack's `platform` output; experiments read it and `tenant` (default: the facts of the
    tenant stack file of their namespace) from their tenant's contract ConfigMap. `read(path)` stands for the cluster's
    ownership reads, `read_whole(path)` for whole-object reads (the User Node, a quota, own objects),
    `post(path, body)` for an experiment's access reviews (None: not asked, as without credentials),
    `open_gate(request, timeout)` for the tenant's TensorBoard gate an experiment's readiness asks
    for progress (None: no gate answers; no unit test reaches the network). `preview`: a preview's run.
    """
    from tfk8s import program
    from tfk8s.settings.stack_file import validate

    kind = raw.get("kind")
    mocks = RecordingMocks(status_hook, live_hook)
    pulumi.runtime.set_mocks(
        mocks,
        project="tfk8s",
        stack=stack or {"platform": "platform-dev", "tenant": "tenant-alice"}.get(str(kind), "dev"),
        preview=preview,
        organization="organization",
    )
    pulumi.runtime.set_all_config(
        {f"tfk8s:{k}": v for k, v in (secrets or {}).items()}, secret_keys=[f"tfk8s:{k}" for k in (secrets or {})]
    )
    options: dict[str, pulumi.ResourceOptions] = {}
    declared: dict[str, pulumi.Resource] = {}

    def record(args: pulumi.ResourceTransformationArgs) -> None:
        options[f"{args.type_}::{args.name}"] = args.opts
        declared[f"{args.type_}::{args.name}"] = args.resource
        return None

    pulumi.runtime.register_stack_transformation(record)
    validated = validate(raw)
    environ = {"PULUMI_BACKEND_URL": "file:///test-state"}
    if kind == "platform":
        components = program.run_platform(validated, None, read, environ, read_whole=read_whole)  # type: ignore[arg-type]
    elif kind == "tenant":
        facts = platform if platform is not None else facts_for(stack_config(raw["platformStack"]))
        components = program.run_tenant(
            validated,  # type: ignore[arg-type]
            None,
            read,
            environ,
            ROOT,
            read_outputs=lambda name: {"platform": facts},
            read_whole=read_whole,
        )
    else:
        namespace = raw["namespace"]
        facts = platform if platform is not None else facts_for(stack_config(platform_of(tenant_of(namespace))))
        tenant_output = tenant if tenant is not None else tenant_facts_for(tenant_of(namespace), facts)
        components = program.run_experiment(
            validated,  # type: ignore[arg-type]
            None,
            read,
            environ,
            ROOT,
            read_whole=with_contract(namespace, tenant_output, facts, read_whole),
            post=post,
            open_gate=open_gate or no_gate,
        )
    return Deployment(mocks=mocks, components=components, options=options, declared=declared)


@contextlib.contextmanager
def declared_types() -> Iterator[list[str]]:
    """The types of the resources any program declares (or reads) while inside: for programs that
    stop before returning their Deployment."""
    declared: list[str] = []
    original = RecordingMocks.new_resource

    def recording(self: RecordingMocks, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        declared.append(args.typ)
        return original(self, args)

    RecordingMocks.new_resource = recording  # type: ignore[method-assign]
    try:
        yield declared
    finally:
        RecordingMocks.new_resource = original  # type: ignore[method-assign]


def after(d: Deployment, check: Any) -> pulumi.Output[Any]:
    """Run `check` once readiness resolved and every declared resource has reached the mocks.

    Readiness does not depend on every resource (a RoleBinding feeds nothing), so its resolving
    alone does not prove the rest were registered; checks that count resources need both.
    """

    async def settle_then_check() -> None:
        await settled(d)
        check()

    return d.components["readiness"].apply(lambda _: asyncio.ensure_future(settle_then_check()))


async def settled(d: Deployment) -> None:
    """Until every resource declared so far has reached the mocks (10 s at most)."""
    deadline = asyncio.get_running_loop().time() + 10
    while len(d.mocks.resources) + len(d.mocks.reads) < len(d.options):
        if asyncio.get_running_loop().time() > deadline:
            seen = {f"{r.typ}::{r.name}" for r in d.mocks.resources + d.mocks.reads}
            raise AssertionError(f"declared but never registered: {sorted(set(d.options) - seen)}")
        await asyncio.sleep(0.01)
