"""The running stack's `tfk8s:` configuration, read into its model once, before any resource exists.

`pulumi.Config` values become the model of the stack's kind (`tfk8s.schema`), or a `ConfigError`
listing every problem (`tfk8s.schema.problems`). Secrets are read on their own and never enter the
models: a tenant's `jupyterToken` and a storage backend's key (`tfk8s.specs.backends`), each checked here
(`parse_secret`) and allowed on its kind of stack alone (`SECRETS_BY_KIND`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import pulumi
from pydantic import ValidationError

from tfk8s import pulumi_internals
from tfk8s.errors import ConfigError
from tfk8s.schema import NAMESPACE, STACK_KINDS
from tfk8s.schema.experiment import ExperimentStack
from tfk8s.schema.platform import PlatformStack
from tfk8s.schema.problems import schema_problems
from tfk8s.schema.tenant import TenantStack
from tfk8s.specs import backends

# Secret keys, by the kind of stack that reads them: read on their own (is_config_secret), never part
# of the models. One set on a stack of another kind is an error, as any key of the other kind is.
SECRETS_BY_KIND: dict[str, frozenset[str]] = {
    "platform": backends.SECRET_CONFIG_KEYS,
    "tenant": frozenset({"jupyterToken"}),
    "experiment": frozenset(),
}
SECRET_KEYS = frozenset().union(*SECRETS_BY_KIND.values())
KIND_FIX = (
    "set `tfk8s:kind: platform` (storage, the User Node, what tenants share), `tfk8s:kind: tenant` (one user's "
    "namespace, volumes, Jupyter, TensorBoard, quota and identities) or `tfk8s:kind: experiment` (one tenant's "
    "training clusters); see docs/concepts/stacks.md"
)


def validate(raw: Mapping[str, Any], secrets: Iterable[str] = ()) -> PlatformStack | TenantStack | ExperimentStack:
    """Raw `tfk8s:` values (without the prefix) -> the stack's model, or ConfigError. `secrets`: the
    secret keys the stack sets, by name alone (`secret_keys`): each must be one its kind reads."""
    kind = raw.get("kind")
    if kind not in STACK_KINDS:
        got = "it is missing" if kind is None else f"got {kind!r}"
        raise ConfigError([f"{NAMESPACE}:kind: {got}; {KIND_FIX}"])
    model = STACK_KINDS[kind]
    secrets = sorted(set(secrets))
    problems = []
    for key in secrets:
        if key not in SECRETS_BY_KIND[kind]:
            owner = " or ".join(k for k, keys in SECRETS_BY_KIND.items() if key in keys)
            problems.append(
                f"{NAMESPACE}:{key}: is a secret of {owner} stacks, not of {kind} stacks; remove it: "
                f"`pulumi config rm {NAMESPACE}:{key}`"
            )
    try:
        # JSON mode: arrays become tuples, and strict mode refuses `count: "2"` and `count: true`.
        stack = model.model_validate_json(json.dumps(dict(raw)))
    except ValidationError as error:
        raise ConfigError(schema_problems(model, error) + problems) from None
    if isinstance(stack, PlatformStack):
        needed = backends.backend_of(stack.platform.storage).secret
        problems += [
            f"{NAMESPACE}:{key}: storage backend {stack.platform.storage.backend!r} reads no {key}; remove it: "
            f"`pulumi config rm {NAMESPACE}:{key}`"
            for key in secrets
            if key in backends.SECRET_CONFIG_KEYS and (needed is None or needed.config_key != key)
        ]
    if problems:
        raise ConfigError(problems)
    return stack  # type: ignore[return-value]


def stack_values(config: Mapping[str, Any]) -> dict[str, Any]:
    """The `tfk8s:` keys of the running stack (secrets apart), objects decoded from their JSON."""
    values: dict[str, Any] = {}
    for full_key, value in config.items():
        namespace, _, key = full_key.partition(":")
        if namespace != NAMESPACE or key in SECRET_KEYS:
            continue
        if isinstance(value, str) and value.startswith(("{", "[")):
            # `--path` keys are stored as JSON; a plain string that merely starts like it stays one,
            # and the schema says what is wrong with it.
            try:
                value = json.loads(value)
            except ValueError:
                pass
        values[key] = value
    return values


def secret_keys(config: Mapping[str, Any]) -> set[str]:
    """The secret keys (`SECRET_KEYS`) the running stack sets, by name: never their values."""
    return {full_key.removeprefix(f"{NAMESPACE}:") for full_key in config if full_key.startswith(f"{NAMESPACE}:")} & SECRET_KEYS


def load() -> PlatformStack | TenantStack | ExperimentStack:
    config = pulumi_internals.all_config()
    return validate(stack_values(config), secret_keys(config))


JUPYTER_TOKEN_KEY = f"{NAMESPACE}:jupyterToken"
MIN_TOKEN_LENGTH = 16


def parse_secret(
    key: str, raw: str | None, is_secret: bool, *, min_length: int = 1, placeholder: str = "<value>", hint: str = ""
) -> str | None:
    """A secret config value (`tfk8s:<key>`), checked before any resource exists: set with `pulumi
    config set --secret` (one stored in plain text in the stack file is refused), at least
    `min_length` characters, no surrounding spaces, no line break or other control character (it
    reaches an HTTP header or an environment variable). The value never enters the models: callers
    wrap it in `pulumi.Output.secret` at once."""
    if raw is None:
        return None
    full = f"{NAMESPACE}:{key}"
    fix = f"set it with `pulumi config set --secret {full} {placeholder}`{hint}"
    if not is_secret:
        raise ConfigError([f"{full}: is stored in plain text in the stack file; remove it and {fix}"])
    if len(raw) < min_length or raw != raw.strip():
        raise ConfigError([f"{full}: must be at least {min_length} characters without surrounding spaces; {fix}"])
    if any(ord(c) < 32 or ord(c) == 127 for c in raw):
        raise ConfigError([f"{full}: holds a line break or another control character; {fix}, on one line"])
    return raw


# How a tenant's Jupyter token is checked: long enough not to be guessed.
JUPYTER_TOKEN_RULES: dict[str, Any] = {
    "min_length": MIN_TOKEN_LENGTH,
    "placeholder": "<token>",
    "hint": " (e.g. `openssl rand -hex 24`)",
}


def parse_jupyter_token(raw: str | None, is_secret: bool) -> str | None:
    """`tfk8s:jupyterToken` (tenant stacks): optional, a secret of at least 16 characters."""
    return parse_secret("jupyterToken", raw, is_secret, **JUPYTER_TOKEN_RULES)


def secret_config(key: str, **rules: Any) -> pulumi.Output[str] | None:
    """The running stack's secret `tfk8s:<key>`, checked by `parse_secret`, as a secret (None: unset)."""
    full = f"{NAMESPACE}:{key}"
    value = parse_secret(key, pulumi_internals.raw_config(full), pulumi_internals.is_config_secret(full), **rules)
    return pulumi.Output.secret(value) if value is not None else None


def jupyter_token() -> pulumi.Output[str] | None:
    """The tenant's chosen Jupyter token from the running stack, as a secret (None: a generated token)."""
    return secret_config("jupyterToken", **JUPYTER_TOKEN_RULES)
