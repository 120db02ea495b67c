"""The running stack's `tfk8s:` configuration, read into its model once, before any resource exists.

`pulumi.Config` values become the model of the stack's kind (`tfk8s.schema`), or a `ConfigError`
listing every problem (`tfk8s.config_errors`). Secrets are read on their own and never enter the
models: here, a tenant's `jupyterToken`; the storage backends' in `tfk8s.backends`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pulumi
from pydantic import ValidationError

from tfk8s import backends
from tfk8s.config_errors import ConfigError, schema_problems
from tfk8s.schema import NAMESPACE, STACK_KINDS
from tfk8s.schema_experiment import ExperimentStack
from tfk8s.schema_platform import PlatformStack
from tfk8s.schema_tenant import TenantStack

# Secret keys: read on their own with require_secret/is_config_secret, never part of the models.
SECRET_KEYS = frozenset({"jupyterToken", *backends.SECRET_CONFIG_KEYS})
KIND_FIX = (
    "set `tfk8s:kind: platform` (storage, the User Node, what tenants share), `tfk8s:kind: tenant` (one user's "
    "namespace, volumes, Jupyter, TensorBoard, quota and identities) or `tfk8s:kind: experiment` (one tenant's "
    "training clusters); see README 'Three kinds of stack'"
)


def validate(raw: Mapping[str, Any]) -> PlatformStack | TenantStack | ExperimentStack:
    """Raw `tfk8s:` values (without the prefix) -> the stack's model, or ConfigError."""
    kind = raw.get("kind")
    if kind not in STACK_KINDS:
        got = "it is missing" if kind is None else f"got {kind!r}"
        raise ConfigError([f"{NAMESPACE}:kind: {got}; {KIND_FIX}"])
    model = STACK_KINDS[kind]
    try:
        # JSON mode: arrays become tuples, and strict mode refuses `count: "2"` and `count: true`.
        return model.model_validate_json(json.dumps(dict(raw)))  # type: ignore[return-value]
    except ValidationError as error:
        raise ConfigError(schema_problems(model, error)) from None


def stack_values(config: Mapping[str, Any]) -> dict[str, Any]:
    """The `tfk8s:` keys of the running stack (secrets apart), objects decoded from their JSON."""
    values: dict[str, Any] = {}
    for full_key, value in config.items():
        namespace, _, key = full_key.partition(":")
        if namespace != NAMESPACE or key in SECRET_KEYS:
            continue
        if isinstance(value, str) and value[:1] in "{[":
            value = json.loads(value)
        values[key] = value
    return values


def load() -> PlatformStack | TenantStack | ExperimentStack:
    return validate(stack_values(pulumi.runtime.config.get_config_env() | dict(pulumi.runtime.config.CONFIG.get())))


JUPYTER_TOKEN_KEY = f"{NAMESPACE}:jupyterToken"
MIN_TOKEN_LENGTH = 16


def parse_jupyter_token(raw: str | None, is_secret: bool) -> str | None:
    """`tfk8s:jupyterToken` (tenant stacks): optional, set with `pulumi config set --secret`.

    Checked before any resource exists; the value never enters the models (callers wrap it in
    `pulumi.Output.secret` at once). A token stored in plain text in the stack file is refused.
    """
    if raw is None:
        return None
    fix = f"set it with `pulumi config set --secret {JUPYTER_TOKEN_KEY} <token>` (e.g. `openssl rand -hex 24`)"
    if not is_secret:
        raise ConfigError([f"{JUPYTER_TOKEN_KEY}: is stored in plain text in the stack file; remove it and {fix}"])
    if len(raw) < MIN_TOKEN_LENGTH or raw != raw.strip():
        raise ConfigError(
            [f"{JUPYTER_TOKEN_KEY}: must be at least {MIN_TOKEN_LENGTH} characters without surrounding spaces; {fix}"]
        )
    return raw


def jupyter_token() -> pulumi.Output[str] | None:
    """The tenant's chosen Jupyter token from the running stack, as a secret (None: a generated token)."""
    token = parse_jupyter_token(pulumi.runtime.get_config(JUPYTER_TOKEN_KEY), pulumi.runtime.is_config_secret(JUPYTER_TOKEN_KEY))
    return pulumi.Output.secret(token) if token is not None else None
