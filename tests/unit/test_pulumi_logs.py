"""hack/env.sh runs Pulumi without its automatic logs (docs/benchmarks.md "Fixed cost"): a file stands where
Pulumi would make `$PULUMI_HOME/logs`, logs written before are kept, and TFK8S_PULUMI_LOGS=1 gives
Pulumi its directory back. On a scratch cache (TFK8S_CACHE): the machine's toolchain is not touched.
tests/e2e/test_cli.py checks what the real CLI then does."""

from __future__ import annotations

import os
from pathlib import Path

from toolenv import exported, turns_off_pulumi_logs

ROOT = Path(__file__).resolve().parents[2]


def _env(cache: Path, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("PULUMI_HOME", "TFK8S_PULUMI_LOGS")}
    return exported({"TFK8S_CACHE": str(cache), **extra}, base=base)


def test_a_new_toolchain_home_gets_a_file_where_pulumi_would_write_its_logs(tmp_path: Path) -> None:
    home = Path(_env(tmp_path)["PULUMI_HOME"])
    assert home == tmp_path / "pulumi-home"
    assert (home / "logs").is_file() and "TFK8S_PULUMI_LOGS=1" in (home / "logs").read_text()
    _env(tmp_path)  # again: nothing moves, nothing fails
    assert (home / "logs").is_file() and sorted(p.name for p in home.iterdir()) == ["logs"]


def test_logs_pulumi_wrote_before_are_kept_and_the_switch_brings_the_directory_back(tmp_path: Path) -> None:
    earlier = tmp_path / "pulumi-home" / "logs" / "pulumi-20261125T101010-1-up.log"
    earlier.parent.mkdir(parents=True)
    earlier.write_bytes(b"earlier log")
    home = Path(_env(tmp_path)["PULUMI_HOME"])
    (kept,) = home.glob("logs-kept-*")
    assert (kept / earlier.name).read_bytes() == b"earlier log"
    assert (home / "logs").is_file()
    _env(tmp_path, TFK8S_PULUMI_LOGS="1")
    assert not (home / "logs").exists()  # Pulumi makes its directory at its next command
    assert (kept / earlier.name).read_bytes() == b"earlier log"


def test_benches_know_which_revisions_ran_pulumi_with_its_logs() -> None:
    assert turns_off_pulumi_logs(ROOT)
