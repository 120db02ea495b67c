"""Write docs/reference/<kind>.md: the configuration reference of each kind of stack file, from the models.

The models in infra/tfk8s/settings/ are the one schema (`tfk8s.settings.STACK_KINDS`); hack/schema.py
publishes it as JSON Schema for editors, this renders it as Markdown for the docs site: one page per
kind, one section per object of the stack file, one row per key (its path, type, default and the
field's documentation). `python hack/docs_reference.py` rewrites the pages (`make docs-reference`);
`--check` fails if they are stale (a unit test runs that).
"""

from __future__ import annotations

import inspect
import json
import sys
import types
import typing
from dataclasses import dataclass, field
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

# hack/schema.py sets the models up to read their field docstrings before they are built, and owns
# the secret keys (read apart from the models); importing it does both for this process too.
from schema import ROOT, SECRETS, settings, write_or_check  # noqa: I001  (hack/ is this script's sys.path[0])

TARGET_DIR = ROOT / "docs" / "reference"
TITLES = {"platform": "Platform stack", "tenant": "Tenant stack", "experiment": "Experiment stack"}
SOURCES = {kind: f"infra/tfk8s/settings/{kind}.py" for kind in TITLES}
# The platform's storage, monitoring and queueing settings are models of their own modules.
SOURCES["platform"] += " (storage.py, monitoring.py, queueing.py beside it)"
KIND_TEXT = "which kind of stack the file is, its first key: `platform`, `tenant` or `experiment` (each has a page here)"

# What a value type of tfk8s.settings.types (or a kind's own check) accepts, by its validator's name.
VALIDATOR_TYPES = {
    "dns_name": "DNS-1123 label, ≤ 40 characters",
    "dns_subdomain": "DNS-1123 subdomain",
    "namespace_name": "namespace name",
    "service_name": "DNS-1035 label, ≤ 40 characters",
    "_label_key": "label key",
    "_label_value": "label value",
    "_image": "image reference",
    "_namespace_prefix": "namespace prefix",
    "_linux_id": "Linux user or group id",
    "_quantity": "Kubernetes quantity",
    "_byte_quantity": "with a unit (`10Gi`)",
    "_relative_path": "relative path",
    "_absolute_path": "absolute path",
    "_cidr": "CIDR",
    "_stack_reference": "stack reference",
    "_user": "user name",
    "_group": "group name",
}


@dataclass
class Row:
    key: str
    type: str
    default: str
    description: str


@dataclass
class Section:
    path: str
    anchor: str
    text: str
    rows: list[Row] = field(default_factory=list)


def one_line(text: str | None) -> str:
    """A docstring as one table cell: its lines joined, pipes escaped."""
    if not text:
        return ""
    return " ".join(line.strip() for line in inspect.cleandoc(text).splitlines() if line.strip()).replace("|", "\\|")


def _validator_names(metadata: list[Any]) -> list[str]:
    names = []
    for item in metadata:
        func = getattr(item, "func", None)
        if func is None:
            continue
        if func.__qualname__ == "_at_least.<locals>.check":
            names.append(f"≥ {inspect.getclosurevars(func).nonlocals['minimum']}")
        elif func.__qualname__ == "_http_url.<locals>.check":
            names.append("http(s) URL")
        elif func.__name__ in VALIDATOR_TYPES:
            names.append(VALIDATOR_TYPES[func.__name__])
    return names


def _bounds(metadata: list[Any]) -> list[str]:
    found = []
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            found.append(f"≥ {item.ge}")
        elif isinstance(item, annotated_types.Le):
            found.append(f"≤ {item.le}")
        elif isinstance(item, annotated_types.MinLen) and item.min_length:
            found.append(f"at least {item.min_length}")
        elif getattr(item, "pattern", None):
            found.append(f"matching `{item.pattern}`")
    return found


def type_name(annotation: Any, metadata: list[Any] = []) -> str:  # noqa: B006  (never mutated)
    """How a reader should write the value: its base type, refined by what its checks accept."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_name(args[0], [*metadata, *annotation.__metadata__])
    for item in metadata:  # Annotated[int, Field(ge=1)] keeps its bounds in a FieldInfo
        if isinstance(item, FieldInfo):
            metadata = [*metadata, *item.metadata]
    refined = _validator_names(metadata) + _bounds(metadata)
    if origin is typing.Literal:
        base = " \\| ".join(f"`{json.dumps(a)}`" for a in args)
    elif origin in (typing.Union, types.UnionType):
        kept = [a for a in args if a is not type(None)]
        base = " or ".join(type_name(a) for a in kept)
    elif origin in (list, tuple):
        base = f"list of {type_name(args[0])}"
    elif origin is dict:
        base = f"map of {type_name(args[0])} to {type_name(args[1])}"
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        base = "object"
    else:
        base = {str: "string", int: "integer", bool: "boolean", float: "number"}.get(annotation, str(annotation))
    return f"{base}: {', '.join(refined)}" if refined else base


def default_text(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    value = info.default_factory() if info.default_factory is not None else info.default  # type: ignore[call-arg]
    if value is PydanticUndefined or value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "(its keys' defaults)"
    if isinstance(value, tuple):
        value = list(value)
    return f"`{json.dumps(value, ensure_ascii=False)}`".replace("|", "\\|")


def _models_in(annotation: Any) -> list[tuple[type[BaseModel], bool]]:
    """The models a field holds, each with whether it is a list item."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, False)]
    listed = typing.get_origin(annotation) in (list, tuple)
    return [(model, listed or inner) for arg in typing.get_args(annotation) for model, inner in _models_in(arg)]


def anchor(path: str) -> str:
    """A section's id: its key path without the namespace, e.g. `platform-storage-glusterfs`."""
    return path.replace("tfk8s:", "").replace("[]", "").replace(".", "-").lower() or "keys"


def sections(model: type[BaseModel], path: str, text: str, found: list[Section]) -> list[Section]:
    """`model`'s section (at `path` of the stack file) and every nested object's after it."""
    section = Section(path, anchor(path), text)
    found.append(section)
    nested = []
    for name, info in model.model_fields.items():
        key = info.alias or name
        full = f"{path}.{key}" if path else f"tfk8s:{key}"
        models = _models_in(info.annotation)
        type_ = type_name(info.annotation, info.metadata)
        for sub, listed in models:
            sub_path = f"{full}[]" if listed else full
            sub_text = " ".join(t for t in (one_line(info.description), one_line(sub.__doc__)) if t)
            nested.append((sub, sub_path, sub_text))
            type_ = type_.replace("object", f"[object](#{anchor(sub_path)})")
        description = one_line(info.description) or ("see below" if models else "")
        if not path and key == "kind":  # the discriminator: required, so its description would be its error's hint
            description = KIND_TEXT
        section.rows.append(Row(f"`{key}`" if path else f"`{full}`", type_, default_text(info), description))
    for sub, sub_path, sub_text in nested:
        sections(sub, sub_path, sub_text, found)
    return found


def render(kind: str) -> str:
    model = settings.STACK_KINDS[kind]
    lines = [
        f"<!-- Generated by hack/docs_reference.py from the models in {SOURCES[kind]}: do not edit;"
        " change the models and run `make docs-reference`. -->",
        "",
        f"# {TITLES[kind]} (`tfk8s:kind: {kind}`)",
        "",
        one_line(model.__doc__).replace("\\|", "|"),
        "",
        "Every key sits under the `tfk8s:` namespace of the stack file (`stacks/Pulumi.<stack>.yaml`);"
        " the general rules (unknown keys, quantities, stack references) are in the [reference's"
        " introduction](index.md).",
        "",
    ]
    for section in sections(model, "", "", []):
        heading = f"`{section.path}`" if section.path else "Top-level keys"
        lines += [f"## {heading} {{#{section.anchor}}}", ""]
        if section.text:
            lines += [section.text, ""]
        lines += ["| key | type | default | description |", "|---|---|---|---|"]
        lines += [f"| {r.key} | {r.type} | {r.default} | {r.description} |" for r in section.rows]
        lines.append("")
    if SECRETS[kind]:
        lines += ["## Secrets {#secrets}", "", "Set with `pulumi config set --secret`; never part of the models above.", ""]
        lines += ["| key | description |", "|---|---|"]
        lines += [f"| `{key}` | {one_line(value['description'])} |" for key, value in SECRETS[kind].items()]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    generated = {TARGET_DIR / f"{kind}.md": render(kind) for kind in settings.STACK_KINDS}
    return write_or_check(generated, check="--check" in argv, remedy="make docs-reference")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
