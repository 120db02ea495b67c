"""pulumi_tfk8s, the Python SDK generated from package/schema.json: installed into a scratch
virtualenv like any package (no index asked), imported, and checked by mypy on a program that
declares a TrainingCluster; the same program with one mistake must fail the check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from toolenv import ROOT, linked_venv

# A program as a user writes it: the nested arguments as dicts (the SDK's TypedDicts), then as the
# SDK's classes, and the outputs with their types.
PROGRAM = """\
from collections.abc import Mapping, Sequence

import pulumi
import pulumi_tfk8s as tfk8s

mnist = tfk8s.TrainingCluster(
    "mnist",
    namespace="tfk8s-alice",
    cluster={
        "name": "mnist",
        "image": "tensorflow/tensorflow:2.21.0",
        "replication": tfk8s.Replication.BETWEEN_GRAPH,  # not BETWEE_N_GRAPH: hack/package_args.py _member
        "training": tfk8s.TrainingMode.SYNC,
        "ps": {"count": 1, "cpu": "500m"},
        "workers": {
            "count": 2,
            "memory": "1Gi",
            "tolerations": [{"key": "tfk8s.io/user-node", "operator": tfk8s.TolerationOperator.EXISTS}],
        },
        "code": {"source": tfk8s.CodeSource.URL, "url": "https://example.com/trainer.tar.gz", "addresses": ["203.0.113.7/32"]},
    },
)
typed = tfk8s.TrainingCluster(
    "typed",
    tfk8s.TrainingClusterArgs(
        namespace="tfk8s-alice",
        cluster=tfk8s.ClusterArgs(name="typed", workers=tfk8s.WorkersArgs(count=2)),
    ),
)
ready: pulumi.Output[bool] = mnist.ready
spec: pulumi.Output[Mapping[str, Sequence[str]]] = typed.cluster_spec
"""

# Each: the program with one mistake (old -> new), and what mypy reports. A mistake in the dicts
# fails the overloaded constructor as a whole, at the declaration: mypy names no key there.
DECLARATION = f"program.py:{PROGRAM.splitlines().index('mnist = tfk8s.TrainingCluster(') + 1}: error: "
NO_OVERLOAD = DECLARATION + 'No overload variant of "TrainingCluster" matches argument types'
MISTAKES = [
    (
        'namespace="tfk8s-alice",\n    cluster={',
        "namespace=42,\n    cluster={",
        f'{NO_OVERLOAD} "str", "int"',
        "a number for the namespace",
    ),
    (
        'namespace="tfk8s-alice",\n    cluster={',
        'namspace="tfk8s-alice",\n    cluster={',
        'Unexpected keyword argument "namspace"',
        "a misspelled argument",
    ),
    ('"count": 2,', '"count": "two",', NO_OVERLOAD, "a string for the workers' count in a dict"),
    ('"memory": "1Gi",', '"memroy": "1Gi",', NO_OVERLOAD, "a misspelled key in a dict"),
    ("tfk8s.TrainingMode.SYNC", '"synchronous"', NO_OVERLOAD, "a string outside the enum"),
    (
        "WorkersArgs(count=2)",
        'WorkersArgs(count="two")',
        'Argument "count" to "WorkersArgs" has incompatible type "str"',
        "a string for the count in an args class",
    ),
    (
        'ClusterArgs(name="typed"',
        'ClusterArgs(nmae="typed"',
        'Unexpected keyword argument "nmae" for "ClusterArgs"',
        "a misspelled field of an args class",
    ),
]


@pytest.fixture(scope="module")
def venv(sdks: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a scratch virtualenv with the generated SDK pip-installed from its directory:
    no index, no dependencies installed (pulumi, parver, semver come from the project's virtualenv,
    a path entry), as tests/e2e/test_example_program.py installs the tfk8s wheel."""
    venv = tmp_path_factory.mktemp("venv")
    python = linked_venv(venv)
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index", "--no-deps"]
    subprocess.run([*install, "--no-build-isolation", str(sdks / "python")], check=True)
    return python


def mypy(venv: Path, program: str, directory: Path) -> subprocess.CompletedProcess[str]:
    """mypy --strict on `program` against the scratch virtualenv's packages, with no configuration
    of ours (pyproject's ignore_missing_imports would turn a missing SDK into Any and pass)."""
    (directory / "program.py").write_text(program)
    (directory / "mypy.ini").write_text("[mypy]\nstrict = True\n")
    command = [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--python-executable", str(venv)]
    # One cache for the module's runs: pulumi's own modules are analysed once.
    command += ["--cache-dir", str(venv.parents[1] / "mypy-cache"), "program.py"]
    return subprocess.run(command, cwd=directory, capture_output=True, text=True, timeout=600)


# What the scratch virtualenv's python reports of the installed SDK.
INSTALLED = """\
import importlib.metadata, importlib.resources, json, pulumi, pulumi_tfk8s
print(json.dumps({
    "component": issubclass(pulumi_tfk8s.TrainingCluster, pulumi.ComponentResource),
    "version": importlib.metadata.version("pulumi_tfk8s"),
    "plugin": json.loads(importlib.resources.files("pulumi_tfk8s").joinpath("pulumi-plugin.json").read_text()),
}))
"""


def test_the_installed_sdk_imports_as_a_component_of_the_package_version(venv: Path) -> None:
    done = subprocess.run([str(venv), "-c", INSTALLED], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    version = json.loads((ROOT / "package" / "schema.json").read_text())["version"]
    # pulumi-plugin.json tells the engine which plugin serves tfk8s:index:* resources.
    plugin = {"resource": True, "name": "tfk8s", "version": version}
    installed = json.loads(done.stdout)
    # The wheel's version in PEP 440's spelling (0.4.0-dev.0 is 0.4.0.dev0), the plugin's as the schema says.
    assert Version(installed.pop("version")) == Version(version)
    assert installed == {"component": True, "plugin": plugin}


def test_mypy_passes_a_program_that_declares_a_training_cluster(venv: Path, tmp_path: Path) -> None:
    done = mypy(venv, PROGRAM, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(("old", "new", "reported"), [m[:3] for m in MISTAKES], ids=[m[3] for m in MISTAKES])
def test_mypy_fails_the_program_with_one_mistake(venv: Path, tmp_path: Path, old: str, new: str, reported: str) -> None:
    assert PROGRAM.count(old) == 1, f"{old!r} is not in the program once"
    done = mypy(venv, PROGRAM.replace(old, new), tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert reported in done.stdout
