"""Stack configuration problems as users read them: each names its key as written in the stack file
(`tfk8s:clusters[1].workers.count`) and says how to fix it; all of them are reported together, in
one `tfk8s.errors.ConfigError`. Nothing here touches Pulumi."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from tfk8s.settings import NAMESPACE


def key_path(loc: tuple[int | str, ...]) -> str:
    """('clusters', 1, 'workers', 'count') -> 'tfk8s:clusters[1].workers.count'."""
    text = f"{NAMESPACE}:{loc[0]}"
    for part in loc[1:]:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def schema_problems(model: type[BaseModel], error: ValidationError) -> list[str]:
    """The schema's findings on a stack's values, one line each, keyed as in the stack file."""
    errors = error.errors()
    # A list whose items failed is also "too short" after validation: report the items only.
    failed_inside = [tuple(e["loc"]) for e in errors if e["type"] != "too_short"]
    return [
        f"{key_path(tuple(e['loc']))}: {_message(model, e)}"
        for e in errors
        if not (e["type"] == "too_short" and any(loc[: len(e["loc"])] == tuple(e["loc"]) for loc in failed_inside))
    ]


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class holding the mapping at `loc` (to list the keys it allows)."""
    current: Any = model
    for part in loc:
        while True:  # unwrap Optional, tuple[...] and dict[str, ...] down to a model
            args = [a for a in typing.get_args(current) if a is not type(None) and a is not Ellipsis]
            if isinstance(current, type) and issubclass(current, BaseModel):
                break
            if not args:
                return None
            current = args[-1]
        if isinstance(part, int):
            continue
        fields = {f.alias or n: f for n, f in current.model_fields.items()}
        if part not in fields:
            return None
        current = fields[part].annotation
    while not (isinstance(current, type) and issubclass(current, BaseModel)):
        args = [a for a in typing.get_args(current) if a is not type(None)]
        if not args or isinstance(current, types.GenericAlias) and typing.get_origin(current) is dict:
            return None
        current = args[-1]
    return current


# Keys an earlier tfk8s read that a newer one removed or replaced: the error says with what. Kept
# for at least one release after the one that removed the key (CHANGELOG.md's Migration notes).
REPLACED_KEYS = {
    "tenantStack": "no longer read: an experiment names its tenant's namespace instead, tfk8s:namespace: "
    "<the platform's namespacePrefix><tenant name> (e.g. tfk8s-alice), and reads its tenant's contract there "
    "with your own credentials",
    "waitForPodsReady": "no longer read (removed in 0.3.0): tfk8s never passed it to Kueue, whose own "
    "configuration decides it; delete the key",
}


def _hint(model: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """': <the field's description>' (what a required field is), or nothing."""
    holder = _model_at(model, loc[:-1])
    field = next((f for n, f in (holder.model_fields.items() if holder else []) if (f.alias or n) == loc[-1]), None)
    return f": {field.description}" if field is not None and field.description else ""


def _message(model: type[BaseModel], error: Any) -> str:
    kind, loc = error["type"], tuple(error["loc"])
    if kind == "missing":
        return f"is required{_hint(model, loc)}"
    if kind == "string_too_short" and error["input"] == "":
        return f"is empty{_hint(model, loc)}"
    if kind == "extra_forbidden":
        if loc[-1] in REPLACED_KEYS:
            return REPLACED_KEYS[str(loc[-1])]
        holder = _model_at(model, loc[:-1])
        allowed = sorted(f.alias or n for n, f in holder.model_fields.items()) if holder else []
        return f"unknown key; expected one of {allowed}"
    if kind == "value_error":
        return str(error["ctx"]["error"])
    if kind == "literal_error":
        return f"must be one of {error['ctx']['expected'].replace(' or ', ', ')}, got {error['input']!r}"
    if kind in {"int_type", "int_parsing", "string_type", "bool_type", "float_type"}:
        expected = {"int_type": "int", "int_parsing": "int", "string_type": "str", "bool_type": "bool"}.get(kind, "a number")
        if kind == "string_type" and isinstance(error["input"], bool | int | float):
            # `pulumi config set --path K true` stores a YAML boolean (and 1 a number): say how to keep it text.
            shown = str(error["input"]).lower() if isinstance(error["input"], bool) else error["input"]
            return (
                f"must be str, got {error['input']!r}: quote it in the stack file ('{shown}'), or set it with "
                "`pulumi config set --type string`"
            )
        return f"must be {expected}, got {error['input']!r}"
    if kind == "too_short":
        return "must be a non-empty list"
    if kind in {"less_than_equal", "greater_than_equal"} and len(loc) > 1 and loc[-2] == "ports":
        return f"must be a TCP port (1-65535), got {error['input']!r}"
    if kind == "string_pattern_mismatch" and loc[-1] == "kubernetesVersion":
        return f"must look like '1.34', got {error['input']!r}"
    if kind == "string_pattern_mismatch" and loc[-1] == "interval":
        return f"must be a duration such as 15s, 1m or 1h, got {error['input']!r}"
    return f"{error['msg'][0].lower()}{error['msg'][1:]}, got {error['input']!r}"
