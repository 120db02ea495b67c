"""hack/env.sh sets Go's collector for pulumi and its plugins (GOGC, GOMEMLIMIT: docs/benchmarks.md
"Fixed cost"), keeps a user's own values, and gives values every Go program of the toolchain accepts."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from toolenv import BIN, exported


def _env(cache: Path, **mine: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("GOGC", "GOMEMLIMIT")} | mine
    return exported({"TFK8S_CACHE": str(cache)}, base=base)


def test_pulumi_collects_less_often_with_a_cap_on_the_heap(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert env["GOGC"] == "1000"
    assert env["GOMEMLIMIT"] == "1GiB"


def test_a_users_own_go_settings_are_kept(tmp_path: Path) -> None:
    env = _env(tmp_path, GOGC="50", GOMEMLIMIT="300MiB")
    assert (env["GOGC"], env["GOMEMLIMIT"]) == ("50", "300MiB")


def test_the_toolchains_go_programs_start_with_them(tmp_path: Path) -> None:
    """A value the Go runtime cannot parse stops every Go program before main (`GOMEMLIMIT=1GB`:
    'malformed GOMEMLIMIT'), pulumi and kubectl among them."""
    if not (BIN / "pulumi").exists():
        pytest.fail("the toolchain is not built: run `make tools` (hack/tools.sh) first")
    env = {**os.environ, **{k: v for k, v in _env(tmp_path).items() if k in ("GOGC", "GOMEMLIMIT")}}
    for tool in (["pulumi", "version"], ["kubectl", "version", "--client"]):
        done = subprocess.run([str(BIN / tool[0]), *tool[1:]], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    broken = subprocess.run([str(BIN / "pulumi"), "version"], env={**env, "GOMEMLIMIT": "1GB"}, capture_output=True, text=True)
    assert broken.returncode != 0 and "GOMEMLIMIT" in broken.stderr  # the check above can fail
