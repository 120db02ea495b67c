"""Which Python runs a project, and how its dependencies get installed: Pulumi.yaml's runtime options.

Honours the options the official host documents for `runtime: {name: python, options: ...}`:
`toolchain` (`pip`, the default, or `uv`) and `virtualenv` (relative to the project root). With
`uv` and no `virtualenv`, uv's own default `.venv` is used. Without a virtualenv the program runs
with `PULUMI_PYTHON_CMD` or `python3` from PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOOLCHAINS = ("pip", "uv")
# pip's toolchain installs from this file only (as Pulumi's does); tfk8s generates it from
# pyproject.toml (hack/requirements.py) and a test keeps it current.
REQUIREMENTS = "requirements.txt"


class ToolchainError(RuntimeError):
    """The project's Python cannot be found or set up; the message says what to do."""


@dataclass(frozen=True, kw_only=True)
class Plugin:
    name: str
    version: str
    server: str = ""
    kind: str = "resource"


@dataclass(frozen=True, kw_only=True)
class Program:
    root: Path
    directory: Path
    entry_point: str = "."
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def toolchain(self) -> str:
        name = str(self.options.get("toolchain") or "pip")
        if name not in TOOLCHAINS:
            raise ToolchainError(
                f"runtime.options.toolchain {name!r} in {self.root / 'Pulumi.yaml'} is not supported by tfk8s's "
                f"language host: use one of {', '.join(TOOLCHAINS)}, or the official Pulumi installers"
            )
        return name

    def virtualenv(self) -> Path | None:
        configured = self.options.get("virtualenv")
        if not configured and self.toolchain == "uv":
            configured = ".venv"
        if not configured:
            return None
        path = Path(str(configured))
        return path if path.is_absolute() else self.root / path

    def python(self) -> Path:
        venv = self.virtualenv()
        if venv is None:
            found = shutil.which(os.environ.get("PULUMI_PYTHON_CMD") or "python3")
            if not found:
                raise ToolchainError("no python3 on PATH: install Python 3 or set runtime.options.virtualenv in Pulumi.yaml")
            return Path(found)
        python = venv / "bin" / "python"
        if not python.exists():
            raise ToolchainError(
                f"the project's virtualenv {venv} does not exist: run `pulumi install` (or `make venv`) in {self.root}"
            )
        return python

    def resource_plugins(self) -> list[Plugin]:
        """Resource plugins the installed SDKs ask for (each ships a pulumi-plugin.json), as the official host reports them."""
        venv = self.virtualenv()
        if venv is not None:  # a virtualenv's layout is fixed: no interpreter start needed to find it
            directories = [str(d) for d in sorted(venv.glob("lib/python3*/site-packages"))]
        else:
            script = "import json, site; print(json.dumps(site.getsitepackages() + [site.getusersitepackages()]))"
            out = subprocess.run([str(self.python()), "-c", script], capture_output=True, text=True, check=True).stdout
            directories = json.loads(out)
        plugins: dict[str, Plugin] = {}
        for directory in directories:
            for manifest in sorted(Path(directory).glob("*/pulumi-plugin.json")):
                data = json.loads(manifest.read_text())
                if data.get("resource") and data.get("name"):
                    version = str(data.get("version") or "")
                    plugins[data["name"]] = Plugin(
                        name=data["name"],
                        version=version if version.startswith("v") or not version else f"v{version}",
                        server=str(data.get("server") or ""),
                    )
        return list(plugins.values())

    def install_commands(self) -> list[list[str]]:
        """What `pulumi install` runs for this toolchain."""
        if self.toolchain == "uv":
            return [["uv", "sync"]]
        venv = self.virtualenv()
        requirements = self.root / REQUIREMENTS
        if not requirements.exists():
            raise ToolchainError(f"{requirements} is missing: the pip toolchain installs from it")
        commands: list[list[str]] = []
        python = "python3"
        if venv is not None:
            if not (venv / "bin" / "python").exists():
                commands.append([shutil.which("python3") or "python3", "-m", "venv", str(venv)])
            python = str(venv / "bin" / "python")
        return [*commands, [python, "-m", "pip", "install", "-r", str(requirements)]]
