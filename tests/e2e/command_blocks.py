"""The command blocks of the README and the guides, run as a user types them: each extracted from
the Markdown, in a fresh shell of its own (`set -e`: a command that fails fails the block), from a
checkout of its own (tests/e2e/test_docs_blocks.py, tests/e2e/test_real_demo.py)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import toolenv


def block_after(markdown: Path, heading: str, *, containing: str = "") -> str:
    """The first ```sh block after the heading `heading` that contains `containing`."""
    text = markdown.read_text()
    start = text.index(f"\n## {heading}\n")
    for found in re.finditer(r"```sh\n(.*?)```", text[start:], flags=re.DOTALL):
        if containing in found.group(1):
            return found.group(1)
    raise AssertionError(f"no sh block with {containing!r} after {heading!r} in {markdown}")


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
