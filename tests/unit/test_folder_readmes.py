"""hack/ and lab/ say what each of their files is: one line of their README's table per file or
folder, none for a file that is gone (issue 58: the tables had fallen behind their folders)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| `([^`]+)` \|", re.M)


@pytest.mark.parametrize("folder", ["hack", "lab"])
def test_the_readme_has_one_line_per_entry_of_its_folder(folder: str) -> None:
    readme = (ROOT / folder / "README.md").read_text()
    listed = ROW.findall(readme)
    assert len(listed) == len(set(listed)), f"{folder}/README.md lists an entry twice"
    tracked = subprocess.run(["git", "ls-files", folder], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    present = {path.split("/")[1] + ("/" if path.count("/") > 1 else "") for path in tracked} - {"README.md"}
    missing, gone = sorted(present - set(listed)), sorted(set(listed) - present)
    assert (missing, gone) == ([], []), f"{folder}/README.md: missing {missing}, gone {gone}"
