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
    """`tfk8s:platform` and `tfk8s:users` of stacks/Pulumi.<stack>.yaml, as raw values."""
    raw = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    return {"platform": raw["tfk8s:platform"], "users": raw["tfk8s:users"]}


@pytest.fixture
def dev_config() -> dict[str, Any]:
    return copy.deepcopy(stack_config("dev"))


@pytest.fixture
def imagenet_config() -> dict[str, Any]:
    return copy.deepcopy(stack_config("imagenet"))


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
) -> Deployment:
    """Parse `raw` like the real program and declare everything under fresh mocks."""
    from tfk8s import config, program

    mocks = RecordingMocks(status_hook, live_hook)
    pulumi.runtime.set_mocks(mocks, project="tfk8s", stack="test", preview=False)
    pulumi.runtime.set_all_config(
        {f"tfk8s:{k}": v for k, v in (secrets or {}).items()}, secret_keys=[f"tfk8s:{k}" for k in (secrets or {})]
    )
    options: dict[str, pulumi.ResourceOptions] = {}

    def record(args: pulumi.ResourceTransformationArgs) -> None:
        options[f"{args.type_}::{args.name}"] = args.opts
        return None

    pulumi.runtime.register_stack_transformation(record)
    settings = config.parse(raw["platform"], raw["users"], ROOT)
    return Deployment(mocks=mocks, components=program.build(settings, ROOT), options=options)
