"""A stack file's `tfk8s:` keys, read into the model of its kind, or a `ConfigError` listing every
problem (tfk8s.settings.problems words them), before anything is declared.

Secrets never enter the models: a tenant's `jupyterToken` and a storage backend's key
(`BACKEND_SECRET_KEYS`) are named here, by kind of stack (`SECRETS_BY_KIND`), and read on their own
by the program (tfk8s.stack_kinds.config). Nothing here touches Pulumi: the program, the doctor and
GitOps (which checks stack files of a commit without running them) validate alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from tfk8s.errors import ConfigError
from tfk8s.settings import NAMESPACE, STACK_KINDS
from tfk8s.settings.experiment import ExperimentStack
from tfk8s.settings.platform import PlatformStack
from tfk8s.settings.problems import schema_problems
from tfk8s.settings.storage import BACKEND_SECRET_KEYS
from tfk8s.settings.tenant import TenantStack

# Secret keys, by the kind of stack that reads them: read on their own (is_config_secret), never part
# of the models. One set on a stack of another kind is an error, as any key of the other kind is.
SECRETS_BY_KIND: dict[str, frozenset[str]] = {
    "platform": frozenset(BACKEND_SECRET_KEYS.values()),
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
        needed = BACKEND_SECRET_KEYS.get(stack.platform.storage.backend)
        problems += [
            f"{NAMESPACE}:{key}: storage backend {stack.platform.storage.backend!r} reads no {key}; remove it: "
            f"`pulumi config rm {NAMESPACE}:{key}`"
            for key in secrets
            if key in SECRETS_BY_KIND["platform"] and key != needed
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
