"""A source-based component provider (a plugin directory with PulumiPlugin.yaml and __main__.py, as
tfk8s's package/ will be) run by the real `pulumi` CLI through our language host: InstallDependencies
with IsPlugin, then RunPlugin(kind=resource). The host's Go tests (hack/langhost/plugin_test.go) pin
the argv, directory and environment, the venv default, and the kill on cancel.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from toolenv import BIN, cli_env, langhost_processes, linked_venv

HERE = Path(__file__).resolve().parent


@dataclass
class Plugin:
    directory: Path
    env: dict[str, str]

    def pulumi(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["pulumi", *args, "--non-interactive", "--color", "never"],
            cwd=self.directory.parent,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )


@pytest.fixture
def plugin(tmp_path: Path) -> Iterator[Plugin]:
    """A copy of tests/langhost/component with its `venv` made as the e2e tests make the example's:
    a virtualenv of its own whose site-packages lead to this interpreter's (a path entry), so the
    CLI's `pip install -r requirements.txt` finds `pulumi` installed, and with no index to ask
    (PIP_NO_INDEX) it fails rather than reach the network. Afterwards no process of the host, or of
    the provider it ran, works on this test's state."""
    if not (BIN / "pulumi-language-python").exists():
        pytest.fail("the toolchain is not built: run `make tools` (hack/tools.sh) first")
    directory = tmp_path / "component"
    shutil.copytree(HERE / "component", directory)
    linked_venv(directory / "venv")
    env = cli_env(tmp_path / "state", PIP_NO_INDEX="1")
    p = Plugin(directory, env)
    yield p
    assert not langhost_processes(env["PULUMI_BACKEND_URL"], plugins=[directory]), "the host or the provider outlived the CLI"


def test_get_schema_runs_the_plugins_main_and_reads_its_component(plugin: Plugin) -> None:
    done = plugin.pulumi("package", "get-schema", str(plugin.directory))
    assert done.returncode == 0, done.stdout + done.stderr
    schema = json.loads(done.stdout)
    greeting = schema["resources"]["hostcheck:index:Greeting"]
    assert greeting["isComponent"] is True
    assert greeting["description"] == "A greeting: a component without children."
    assert greeting["inputProperties"] == {"message": {"type": "string", "description": "What the greeting says."}}
    assert greeting["requiredInputs"] == ["message"]


def test_a_provider_that_fails_to_start_is_shown_with_its_stderr(plugin: Plugin) -> None:
    (plugin.directory / "__main__.py").write_text(
        'import sys\n\nprint("hostcheck: the provider cannot start: no config", file=sys.stderr)\nsys.exit(3)\n'
    )
    done = plugin.pulumi("package", "get-schema", str(plugin.directory))
    text = done.stdout + done.stderr
    assert done.returncode != 0
    assert "hostcheck: the provider cannot start: no config" in text, text
    assert "exit status 3" in text, text
