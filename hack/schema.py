"""Write schema/<kind>.schema.json: the JSON Schema of each kind of stack file, from the models.

The models in infra/tfk8s/settings/ are the one schema (`tfk8s.settings.STACK_KINDS`: each kind's
model); this publishes it for editors (the stack files name it in a `yaml-language-server:
$schema=` comment), each field's documentation included. `python hack/schema.py` rewrites
the files; `--check` fails if they are stale (a unit test runs that).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "infra"))
# The field docstrings are the schema's documentation; only this process has the models read them
# (tfk8s.settings.types.PUBLISH_DOCSTRINGS_ENV, set before the models are built).
os.environ["TFK8S_SCHEMA_DOCSTRINGS"] = "1"

from tfk8s import settings  # noqa: E402

SECURE = {"type": "object", "properties": {"secure": {"type": "string"}}, "required": ["secure"], "additionalProperties": False}
# Secrets are read on their own (never part of the models); the file holds them encrypted.
SECRETS: dict[str, dict[str, dict[str, Any]]] = {
    "platform": {
        "tfk8s:heketiAdminKey": {**SECURE, "description": "glusterfs: the Heketi admin key (`pulumi config set --secret`)"},
    },
    "tenant": {
        "tfk8s:jupyterToken": {**SECURE, "description": "optional: the tenant's Jupyter token (`pulumi config set --secret`)"},
    },
    "experiment": {},
}


def stack_file_schema(kind: str) -> dict[str, Any]:
    model = settings.STACK_KINDS[kind]
    inner = model.model_json_schema(by_alias=True, mode="validation")
    properties = {f"tfk8s:{key}": value for key, value in inner["properties"].items()} | SECRETS[kind]
    config = {
        "type": "object",
        "properties": properties,
        "required": [f"tfk8s:{key}" for key in inner.get("required", [])],
        # Other namespaces (kubernetes:, pulumi:) are free; an unknown tfk8s: key is a typo.
        "propertyNames": {"anyOf": [{"enum": sorted(properties)}, {"not": {"pattern": "^tfk8s:"}}]},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"tfk8s {kind} stack file (stacks/Pulumi.<stack>.yaml)",
        "description": inner.get("description", ""),
        "type": "object",
        "properties": {
            "config": config,
            "encryptionsalt": {"type": "string"},
            "secretsprovider": {"type": "string"},
            "encryptedkey": {"type": "string"},
        },
        "required": ["config"],
        "$defs": inner.get("$defs", {}),
    }


def render(kind: str) -> str:
    return json.dumps(stack_file_schema(kind), indent=2, sort_keys=True) + "\n"


def write_or_check(generated: dict[Path, str], *, check: bool, remedy: str) -> int:
    """Write each generated file, or with `check` only compare: 1 and the stale files' names, with
    the `make` target that regenerates them, when one differs."""
    stale = []
    for target, wanted in generated.items():
        if check:
            if not target.exists() or target.read_text() != wanted:
                stale.append(str(target.relative_to(ROOT)))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(wanted)
    if stale:
        print(f"stale: {', '.join(stale)}; run `{remedy}`", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    generated = {ROOT / "schema" / f"{kind}.schema.json": render(kind) for kind in settings.STACK_KINDS}
    return write_or_check(generated, check="--check" in argv, remedy="make schema")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
