"""Fixtures for the mock layer: stack files as raw config, and a program run under recording mocks."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from mocks import LiveHook, RecordingMocks, StatusHook, healthy_status, plain_nodes

ROOT = Path(__file__).resolve().parents[2]


def stack_config(stack: str) -> dict[str, Any]:
    """The `tfk8s:` keys of stacks/Pulumi.<stack>.yaml, without the prefix, as raw values."""
    raw = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    return {k.removeprefix("tfk8s:"): v for k, v in raw.items() if k.startswith("tfk8s:")}


@pytest.fixture
def dev_config() -> dict[str, Any]:
    """The `dev` experiment (alice's mnist)."""
    return copy.deepcopy(stack_config("dev"))


@pytest.fixture
def platform_config() -> dict[str, Any]:
    return copy.deepcopy(stack_config("platform-dev"))


@pytest.fixture
def imagenet_config() -> dict[str, Any]:
    return copy.deepcopy(stack_config("imagenet"))


@pytest.fixture
def imagenet_platform_config() -> dict[str, Any]:
    return copy.deepcopy(stack_config("imagenet-platform"))


PLATFORM_OWNER = "organization/tfk8s/platform-dev@test"


def facts_for(platform_raw: dict[str, Any]) -> dict[str, Any]:
    """The `platform` output a deployed platform stack of `platform_raw` publishes (as JSON numbers)."""
    from tfk8s import config, user_env

    stack = config.check_platform(config.validate(platform_raw), None)  # type: ignore[arg-type]
    p = stack.platform
    return {
        "schemaVersion": 1.0,
        "owner": PLATFORM_OWNER,
        "kubernetesVersion": p.kubernetes_version,
        "storageClass": p.storage.class_name,
        "userNode": {"taintKey": p.user_node.taint_key},
        "layouts": {"group": "ptest.layouts.tfk8s.io", "version": "v1", "kind": "Layout", "plural": "layouts"},
        "images": p.images.model_dump(by_alias=True),
        "ports": {k: float(v) for k, v in p.ports.model_dump(by_alias=True).items()},
        "allowPsGpus": p.allow_ps_gpus,
        "awaitTimeoutSeconds": float(p.await_timeout_seconds),
        "users": {
            u.name: {
                "namespace": user_env.namespace_name(p, u.name),
                "dataClaim": user_env.DATA_CLAIM,
                "logClaim": user_env.LOG_CLAIM,
                "notebookHost": f"{user_env.NOTEBOOK_SERVICE}:{p.ports.tensorflow}",
                "jupyterUrl": "http://10.0.0.10:30001/",
                "tensorboardUrl": "http://10.0.0.10:30002/",
            }
            for u in stack.users
        },
    }


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
) -> Deployment:
    """Validate `raw` like the real program and declare everything under fresh mocks.

    Experiments read `platform` (default: the facts of stacks/Pulumi.platform-dev.yaml) as their
    platform stack's `platform` output; `read(path)` stands for the cluster's ownership reads.
    """
    from tfk8s import config, program

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
    validated = config.validate(raw)
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
        )
    return Deployment(mocks=mocks, components=components, options=options)
