"""The running stack's `tfk8s:` configuration, read into its model once, before any resource exists.

`pulumi.Config` values become the model of the stack's kind (`tfk8s.schema`), or a `ConfigError`
listing every problem (`tfk8s.config_errors`). Secrets are read on their own and never enter the
models: here, the platform's `jupyterTokens`; the storage backends' in `tfk8s.backends`.
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
from tfk8s.schema_platform import PlatformStack, PlatformUser

# Secret keys: read on their own with require_secret/is_config_secret, never part of the models.
SECRET_KEYS = frozenset({"jupyterTokens", *backends.SECRET_CONFIG_KEYS})
KIND_FIX = (
    "set `tfk8s:kind: platform` (storage, the User Node, users' namespaces, volumes, Jupyter and TensorBoard) or "
    "`tfk8s:kind: experiment` (one user's training clusters); see README 'Two kinds of stack'"
)


def validate(raw: Mapping[str, Any]) -> PlatformStack | ExperimentStack:
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


def load() -> PlatformStack | ExperimentStack:
    return validate(stack_values(pulumi.runtime.config.get_config_env() | dict(pulumi.runtime.config.CONFIG.get())))


JUPYTER_TOKENS_KEY = f"{NAMESPACE}:jupyterTokens"
MIN_TOKEN_LENGTH = 16


def parse_jupyter_tokens(raw: str | None, is_secret: bool, users: tuple[PlatformUser, ...]) -> dict[str, str]:
    """`tfk8s:jupyterTokens` (platform stacks): optional `{user: token}`, set with `config set --secret --path`.

    Checked before any resource exists; the values never enter the models (callers wrap them
    in `pulumi.Output.secret` at once). A token stored in plain text in the stack file is refused.
    """
    if raw is None:
        return {}
    fix = f"set it with `pulumi config set --secret --path '{JUPYTER_TOKENS_KEY}.<user>' <token>`"
    if not is_secret:
        raise ConfigError([f"{JUPYTER_TOKENS_KEY}: is stored in plain text in the stack file; remove it and {fix}"])
    try:
        tokens = json.loads(raw)
    except ValueError:
        tokens = None
    if not isinstance(tokens, dict):
        raise ConfigError([f"{JUPYTER_TOKENS_KEY}: must be a map of user name to token; {fix}"])
    known = {u.name for u in users}
    problems = []
    for user, token in tokens.items():
        key = f"{JUPYTER_TOKENS_KEY}.{user}"
        if user not in known:
            problems.append(f"{key}: no user {user!r} in tfk8s:users; remove it or add the user")
        elif not isinstance(token, str) or len(token) < MIN_TOKEN_LENGTH:
            problems.append(f"{key}: must be a string of at least {MIN_TOKEN_LENGTH} characters (e.g. `openssl rand -hex 24`)")
    if problems:
        raise ConfigError(problems)
    return tokens


def jupyter_tokens(users: tuple[PlatformUser, ...]) -> dict[str, pulumi.Output[str]]:
    """The users' chosen Jupyter tokens from the running stack, as secrets (users without one get a generated token)."""
    raw = pulumi.runtime.get_config(JUPYTER_TOKENS_KEY)
    tokens = parse_jupyter_tokens(raw, pulumi.runtime.is_config_secret(JUPYTER_TOKENS_KEY), users)
    return {user: pulumi.Output.secret(token) for user, token in tokens.items()}
