"""Write requirements.txt from pyproject.toml's [project].dependencies (the program's own dependencies).

Why a generated file: Pulumi's pip toolchain (`pulumi install`, the official Python host) installs
from requirements.txt only, while pyproject.toml is where this project declares dependencies.
`python hack/requirements.py` rewrites it; `--check` fails if it is stale (a unit test runs that).
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADER = (
    "# Generated from pyproject.toml [project].dependencies by hack/requirements.py: do not edit.\n"
    "# The Pulumi program's own dependencies; `pulumi install` (pip toolchain) installs from this file.\n"
)


def render(pyproject: Path = ROOT / "pyproject.toml") -> str:
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return HEADER + "".join(f"{d}\n" for d in dependencies)


def main(argv: list[str]) -> int:
    target = ROOT / "requirements.txt"
    wanted = render()
    if "--check" in argv:
        if not target.exists() or target.read_text() != wanted:
            print("requirements.txt is stale: run `python hack/requirements.py`", file=sys.stderr)
            return 1
        return 0
    target.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
