"""The command blocks of the README and the guides, run as a user types them: each extracted from
the Markdown, in a fresh shell of its own (`set -e`: a command that fails fails the block), from a
checkout of its own (tests/e2e/test_docs_blocks.py, tests/e2e/test_real_demo.py,
tests/e2e/test_yaml_package.py). Which block each runs, and why the others run nowhere:
tests/unit/test_docs_blocks_accounted.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import toolenv
from doc_blocks import block_after

__all__ = ["block_after", "checkout", "run_block"]


def checkout(work: Path, *linked: str) -> Path:
    """A checkout of its own: the project copy (stack files copied, infra and .venv linked) and the
    scripts and Makefile the blocks run (with `linked`, more of the repository's folders), so that
    their commands write no file of the repository's: its .state is the checkout's."""
    toolenv.project_copy(work)
    for name in ("hack", "Makefile", *linked):
        (work / name).symlink_to(toolenv.ROOT / name)
    return work


def run_block(block: str, work: Path, env: dict[str, str], *, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block], cwd=work, env=env, capture_output=True, text=True, timeout=timeout
    )
