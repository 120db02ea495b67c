"""The program under recording mocks, as the unit tests run it: stack files as raw config, the
platform output an experiment reads, and one run's record. (Not in conftest.py: pytest imports every
test directory's conftest under the same module name, so `from conftest import` finds whichever came first.)"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from mocks import LiveHook, RecordingMocks, StatusHook, healthy_status, plain_nodes

DEPLOYMENT, JOB, SERVICE = "kubernetes:apps/v1:Deployment", "kubernetes:batch/v1:Job", "kubernetes:core/v1:Service"
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


def through_the_engine(value: Any) -> Any:
    """`value` as a stack output comes back from the engine: every number a JSON float (2222 -> 2222.0)."""
    if isinstance(value, dict):
        return {k: through_the_engine(v) for k, v in value.items()}
    if isinstance(value, list):
        return [through_the_engine(v) for v in value]
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def facts_for(platform_raw: dict[str, Any]) -> dict[str, Any]:
    """The `platform` output a deployed platform stack of `platform_raw` publishes, built like the
    platform builds it (its owner, Layout group and app URLs the ones a test platform has)."""
    from tfk8s import backends, guard, platform_stack, user_env
    from tfk8s.context_checks import check_platform
    from tfk8s.stack_config import validate

    stack = check_platform(validate(platform_raw), None)  # type: ignore[arg-type]
    p = stack.platform
    contract = platform_stack.facts(
        p,
        owner=PLATFORM_OWNER,
        layouts=guard.layout_kind_in("ptest.layouts.tfk8s.io"),
        storage_class=p.storage.class_name,
        scratch_storage_class=backends.scratch_class(p.storage),
        users={
            u.name: user_env.user_facts(
                p, u.name, jupyter_url="http://10.0.0.10:30001/", tensorboard_url="http://10.0.0.10:30002/"
            )
            for u in stack.users
        },
    )
    return through_the_engine(platform_stack.published(contract))


SCRATCH_CLASS = "tfk8s-shared-scratch"


def facts_with_scratch() -> dict[str, Any]:
    """platform-dev's output as if its backend offered a scratch class (its `local` offers none)."""
    return {**facts_for(stack_config("platform-dev")), "scratchStorageClass": SCRATCH_CLASS}


@dataclass
class Deployment:
    """One program run under mocks: what was created, with which options."""

    mocks: RecordingMocks
    components: dict[str, Any]
    options: dict[str, pulumi.ResourceOptions] = field(default_factory=dict)


def run_program(
    raw: dict[str, Any],
    status_hook: StatusHook = healthy_status,
    secrets: dict[str, str] | None = None,
    live_hook: LiveHook = plain_nodes,
    platform: dict[str, Any] | None = None,
    read: Any = None,
    stack: str | None = None,
    read_whole: Any = None,
) -> Deployment:
    """Validate `raw` like the real program and declare everything under fresh mocks.

    Experiments read `platform` (default: the facts of stacks/Pulumi.platform-dev.yaml) as their
    platform stack's `platform` output; `read(path)` stands for the cluster's ownership reads,
    `read_whole(path)` for an experiment's whole-object reads (its quota and its own objects).
    """
    from tfk8s import program
    from tfk8s.stack_config import validate

    kind = raw.get("kind")
    mocks = RecordingMocks(status_hook, live_hook)
    pulumi.runtime.set_mocks(
        mocks,
        project="tfk8s",
        stack=stack or ("platform-dev" if kind == "platform" else "dev"),
        preview=False,
        organization="organization",
    )
    pulumi.runtime.set_all_config(
        {f"tfk8s:{k}": v for k, v in (secrets or {}).items()}, secret_keys=[f"tfk8s:{k}" for k in (secrets or {})]
    )
    options: dict[str, pulumi.ResourceOptions] = {}

    def record(args: pulumi.ResourceTransformationArgs) -> None:
        options[f"{args.type_}::{args.name}"] = args.opts
        return None

    pulumi.runtime.register_stack_transformation(record)
    validated = validate(raw)
    environ = {"PULUMI_BACKEND_URL": "file:///test-state"}
    if kind == "platform":
        components = program.run_platform(validated, None, read, environ, ROOT)  # type: ignore[arg-type]
    else:
        facts = platform if platform is not None else facts_for(stack_config("platform-dev"))
        components = program.run_experiment(
            validated,  # type: ignore[arg-type]
            None,
            read,
            environ,
            ROOT,
            read_outputs=lambda name: {"platform": facts},
            read_whole=read_whole,
        )
    return Deployment(mocks=mocks, components=components, options=options)


def after(d: Deployment, check: Any) -> pulumi.Output[Any]:
    """Run `check` once readiness resolved and every declared resource has reached the mocks.

    Readiness does not depend on every resource (a RoleBinding feeds nothing), so its resolving
    alone does not prove the rest were registered; checks that count resources need both.
    """

    async def settle_then_check() -> None:
        deadline = asyncio.get_running_loop().time() + 10
        while len(d.mocks.resources) + len(d.mocks.reads) < len(d.options):
            if asyncio.get_running_loop().time() > deadline:
                seen = {f"{r.typ}::{r.name}" for r in d.mocks.resources + d.mocks.reads}
                raise AssertionError(f"declared but never registered: {sorted(set(d.options) - seen)}")
            await asyncio.sleep(0.01)
        check()

    return d.components["readiness"].apply(lambda _: asyncio.ensure_future(settle_then_check()))
