"""The shell blocks of the README and the docs site: what a reader copies into a terminal.

Read by the tests that run them as written (tests/e2e/command_blocks.py) and by the test that
holds every block to account: run by a named test, or said why it cannot run here
(tests/unit/test_docs_blocks_accounted.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# A fence a reader runs in a shell; ```text, ```yaml and the rest are shown, not run.
SHELL_FENCE = re.compile(r"^```(?:sh|bash)\n(.*?)^```", flags=re.DOTALL | re.MULTILINE)
ANY_FENCE = re.compile(r"^```.*?^```", flags=re.DOTALL | re.MULTILINE)
HEADING = re.compile(r"^#{1,6} (.+)$", flags=re.MULTILINE)


@dataclass(frozen=True)
class Block:
    markdown: Path
    heading: str  # the nearest heading above it ("" before the first)
    text: str

    @property
    def first_command(self) -> str:
        """Its first line that is not a comment, without its trailing comment or runs of blanks:
        what names the block (a change to it is a change a reviewer should see)."""
        for line in self.text.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                return " ".join(line.split("  #")[0].split())
        raise ValueError(f"{self.markdown}: a shell block under {self.heading!r} runs nothing")


def shell_blocks(markdown: Path) -> list[Block]:
    """Every shell block of `markdown`, in order."""
    text = markdown.read_text()
    fenced = [found.span() for found in ANY_FENCE.finditer(text)]  # a shell comment is no heading
    headings = [
        (found.start(), re.sub(r"\s*\{#[^}]*\}$", "", found.group(1).strip()))
        for found in HEADING.finditer(text)
        if not any(start < found.start() < end for start, end in fenced)
    ]
    blocks = []
    for found in SHELL_FENCE.finditer(text):
        above = [title for at, title in headings if at < found.start()]
        blocks.append(Block(markdown, above[-1] if above else "", found.group(1)))
    return blocks


def block_after(markdown: Path, heading: str, *, containing: str = "") -> str:
    """The text of the first shell block under the heading `heading` that contains `containing`."""
    for block in shell_blocks(markdown):
        if block.heading == heading and containing in block.text:
            return block.text
    raise AssertionError(f"no sh block with {containing!r} under {heading!r} in {markdown}")
