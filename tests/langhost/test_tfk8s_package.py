"""tfk8s's own component package (package/) as the real `pulumi` CLI runs it through our language
host: the schema it serves is the one committed (package/schema.json, which hack/package_args.py
writes in process and tests/unit/test_package.py keeps current), and the provider is gone when the
CLI is done. No cluster: `get-schema` declares nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from package_checkout import ROOT, package_checkout

from toolenv import BIN, cli_env, langhost_processes


def as_bound(schema: Any, inside: bool = False) -> Any:
    """A schema as the CLI prints it after binding: without empty or null entries, and without the
    descriptions the component provider repeats on array items and map values."""
    if isinstance(schema, dict):
        return {
            key: as_bound(value, inside or key in ("items", "additionalProperties"))
            for key, value in schema.items()
            if value not in (None, {}, []) and not (key == "description" and inside)
        }
    if isinstance(schema, list):
        return [as_bound(value, inside) for value in schema]
    return schema


def test_get_schema_of_the_package_is_the_committed_schema(tmp_path: Path) -> None:
    if not (BIN / "pulumi-language-python").exists():
        pytest.fail("the toolchain is not built: run `make tools` (hack/tools.sh) first")
    checkout = package_checkout(tmp_path / "tfk8s")
    env = cli_env(tmp_path / "state", PIP_NO_INDEX="1")
    done = subprocess.run(
        ["pulumi", "package", "get-schema", str(checkout / "package"), "--non-interactive", "--color", "never"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert as_bound(json.loads(done.stdout)) == as_bound(json.loads((ROOT / "package" / "schema.json").read_text()))
    left = langhost_processes(env["PULUMI_BACKEND_URL"], plugins=[checkout / "package"])
    assert not left, f"the host or the provider outlived the CLI: {left}"
