"""@pulumi/tfk8s, the TypeScript SDK generated from package/schema.json: compiled by its own
tsconfig, and `tsc --noEmit` on a program that declares a TrainingCluster; the same program with
one mistake must fail. The npm packages are installed once into tfk8s's cache, never the checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from toolenv import CACHE, pinned

# What the scratch project installs. typescript 4.9: the newest release the SDK's package.json
# accepts (^4.7.0, pkg/v3 codegen/nodejs/gen.go:56), so the SDK compiles as its own build would.
NPM_PACKAGES = {"@pulumi/pulumi": pinned("PULUMI_VERSION"), "typescript": "4.9.5", "@types/node": "20.19.43"}

PROGRAM = """\
import * as pulumi from "@pulumi/pulumi";
import * as tfk8s from "./tfk8s";

const mnist = new tfk8s.TrainingCluster("mnist", {
    namespace: "tfk8s-alice",
    cluster: {
        name: "mnist",
        image: "tensorflow/tensorflow:2.21.0",
        replication: tfk8s.Replication.BetweenGraph,
        training: tfk8s.TrainingMode.Sync,
        ps: { count: 1, cpu: "500m" },
        workers: {
            count: 2,
            memory: "1Gi",
            tolerations: [{ key: "tfk8s.io/user-node", operator: tfk8s.TolerationOperator.Exists }],
        },
        code: { source: tfk8s.CodeSource.Url, url: "https://example.com/trainer.tar.gz", addresses: ["203.0.113.7/32"] },
    },
});
export const ready: pulumi.Output<boolean> = mnist.ready;
export const spec: pulumi.Output<{ [role: string]: string[] }> = mnist.clusterSpec;
"""

# Each: the program with one mistake (old -> new), and what tsc reports.
MISTAKES = [
    (
        'namespace: "tfk8s-alice",',
        "namespace: 42,",
        "TS2322: Type 'number' is not assignable to type 'string'",
        "a number for the namespace",
    ),
    (
        'namespace: "tfk8s-alice",',
        'namspace: "tfk8s-alice",',
        "'namspace' does not exist in type 'TrainingClusterArgs'",
        "a misspelled argument",
    ),
    ('namespace: "tfk8s-alice",\n', "", "Property 'namespace' is missing", "no namespace"),
    ("count: 2,", 'count: "two",', "TS2322: Type 'string' is not assignable to type 'number'", "a string for the workers' count"),
    (
        'memory: "1Gi",',
        'memroy: "1Gi",',
        "'memroy' does not exist in type 'WorkersArgs'",
        "a misspelled key of the nested workers",
    ),
    (
        "tfk8s.TrainingMode.Sync",
        '"synchronous"',
        "Type '\"synchronous\"' is not assignable to type 'TrainingMode",
        "a string outside the enum",
    ),
]


def npm_install(directory: Path) -> None:
    """NPM_PACKAGES into directory/node_modules, installed beside it and moved in when complete,
    so a run that stops half way or runs beside another leaves no half-installed cache."""
    partial = directory.with_name(f"{directory.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    (partial / "package.json").write_text(json.dumps({"private": True, "dependencies": NPM_PACKAGES}, indent=2))
    # --ignore-scripts: nothing here needs an install script; tsc only reads the packages' types.
    npm = ["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"]
    subprocess.run(npm, cwd=partial, check=True, timeout=900)
    try:
        partial.rename(directory)
    except OSError:  # another run finished first: keep its copy
        shutil.rmtree(partial)


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """The npm packages the check needs, in tfk8s's cache (hack/tools.sh's $TFK8S_CACHE), keyed by
    their versions: downloaded on the first run only."""
    if shutil.which("npm") is None:
        pytest.fail("the TypeScript SDK check needs node and npm (Node.js 20 or newer) on PATH")
    key = "-".join(f"{name.replace('@', '').replace('/', '-')}-{version}" for name, version in NPM_PACKAGES.items())
    directory = CACHE / "npm-sdk-check" / key
    if not (directory / "node_modules" / ".bin" / "tsc").exists():
        npm_install(directory)
    return directory / "node_modules"


@pytest.fixture
def project(sdks: Path, node_modules: Path, tmp_path: Path) -> Path:
    """A scratch project: the cached node_modules (linked), the generated SDK in tfk8s/, and a
    tsconfig with the SDK's own compiler options."""
    (tmp_path / "node_modules").symlink_to(node_modules)
    shutil.copytree(sdks / "nodejs", tmp_path / "tfk8s")
    options = json.loads(strip_comments((tmp_path / "tfk8s" / "tsconfig.json").read_text()))["compilerOptions"]
    (tmp_path / "tsconfig.json").write_text(json.dumps({"compilerOptions": options, "files": ["index.ts"]}, indent=2))
    return tmp_path


def strip_comments(tsconfig: str) -> str:
    """The generated tsconfig.json has `// Output`-style line comments (tsc reads JSON with comments)."""
    return "\n".join(line for line in tsconfig.splitlines() if not line.strip().startswith("//"))


def tsc(project: Path, config: Path) -> subprocess.CompletedProcess[str]:
    command = [str(project / "node_modules" / ".bin" / "tsc"), "--noEmit", "--pretty", "false", "-p", str(config)]
    return subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=600)


def test_the_sdk_compiles_with_its_own_tsconfig(project: Path) -> None:
    done = tsc(project, project / "tfk8s" / "tsconfig.json")
    assert done.returncode == 0, done.stdout + done.stderr


def test_tsc_passes_a_program_that_declares_a_training_cluster(project: Path) -> None:
    (project / "index.ts").write_text(PROGRAM)
    done = tsc(project, project / "tsconfig.json")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(("old", "new", "reported"), [m[:3] for m in MISTAKES], ids=[m[3] for m in MISTAKES])
def test_tsc_fails_the_program_with_one_mistake(project: Path, old: str, new: str, reported: str) -> None:
    assert PROGRAM.count(old) == 1, f"{old!r} is not in the program once"
    (project / "index.ts").write_text(PROGRAM.replace(old, new))
    done = tsc(project, project / "tsconfig.json")
    assert done.returncode != 0, done.stdout + done.stderr
    assert reported in done.stdout
