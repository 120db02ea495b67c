"""The Go SDK generated from package/schema.json, in a scratch module beside a program that
declares a TrainingCluster: `go vet` passes it, and fails it with one mistake. The module requires
what `make up`'s tools were built with (align_with_the_toolchain), so the Pulumi Go SDK's packages
come from the build cache even on a fresh machine: the generated SDK is compiled, little else."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from toolenv import ROOT, pinned

# The scratch module's path, and the SDK's import path inside it.
MODULE = "tfk8s.local/sdkcheck"

PROGRAM = """\
package main

import (
\t"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
\t"tfk8s.local/sdkcheck/tfk8s"
)

func main() {
\tpulumi.Run(func(ctx *pulumi.Context) error {
\t\tsync := tfk8s.TrainingModeSync
\t\tmnist, err := tfk8s.NewTrainingCluster(ctx, "mnist", &tfk8s.TrainingClusterArgs{
\t\t\tNamespace: "tfk8s-alice",
\t\t\tCluster: tfk8s.ClusterArgs{
\t\t\t\tName:     "mnist",
\t\t\t\tTraining: &sync,
\t\t\t\tWorkers:  &tfk8s.WorkersArgs{Count: pulumi.IntRef(2), Memory: pulumi.StringRef("1Gi")},
\t\t\t},
\t\t})
\t\tif err != nil {
\t\t\treturn err
\t\t}
\t\tctx.Export("ready", mnist.Ready)
\t\tctx.Export("clusterSpec", mnist.ClusterSpec)
\t\treturn nil
\t})
}
"""

MISTAKES = [
    ('Namespace: "tfk8s-alice",', "Namespace: 42,", "cannot use 42", "a number for the namespace"),
    ('Namespace: "tfk8s-alice",', 'Namspace: "tfk8s-alice",', "unknown field Namspace", "a misspelled field"),
    ("pulumi.IntRef(2)", 'pulumi.IntRef("two")', 'cannot use "two"', "a string for the workers' count"),
]


@pytest.fixture
def module(gensdk: Path, tmp_path: Path) -> Path:
    generated = tmp_path / "generated"
    schema = ROOT / "package" / "schema.json"
    command = [str(gensdk), "--schema", str(schema), "--out", str(generated), "--language", "go"]
    subprocess.run([*command, "--go-import-base", f"{MODULE}/tfk8s"], check=True)
    module = tmp_path / "module"
    shutil.copytree(generated / "go" / "tfk8s", module / "tfk8s")
    require = f"require github.com/pulumi/pulumi/sdk/v3 v{pinned('PULUMI_VERSION')}"
    (module / "go.mod").write_text(f"module {MODULE}\n\ngo 1.25\n\n{require}\n")
    (module / "main.go").write_text("package main\n")
    # go.sum from the module cache (hack/tools.sh's builds filled it), written here, not in the checkout.
    subprocess.run(["go", "mod", "tidy"], cwd=module, env=go_env(), check=True, timeout=600)
    align_with_the_toolchain(module)
    return module


def requirements(module: Path) -> dict[str, str]:
    edit = subprocess.run(["go", "mod", "edit", "-json"], cwd=module, env=go_env(), check=True, capture_output=True, text=True)
    return {r["Path"]: r["Version"] for r in json.loads(edit.stdout).get("Require") or []}


def align_with_the_toolchain(module: Path) -> None:
    """Every module the program needs at the version hack/tools.sh built the CLI and the provider
    with: their packages (the Pulumi SDK, gRPC, protobuf...) are in the build cache already, so a
    cold machine compiles the generated SDK alone, not the Pulumi SDK's graph a second time."""
    toolchain = subprocess.run([str(ROOT / "hack" / "tools.sh"), "toolchain-module"], capture_output=True, text=True)
    if toolchain.returncode != 0 or not toolchain.stdout.strip():
        return  # no toolchain built here (a PATH install of the CLI): the versions tidy chose
    built = requirements(Path(toolchain.stdout.strip()))
    ours = requirements(module)
    edits = [f"-require={path}@{built[path]}" for path, version in ours.items() if built.get(path, version) != version]
    if edits:
        subprocess.run(["go", "mod", "edit", *edits], cwd=module, env=go_env(), check=True)
        subprocess.run(["go", "mod", "tidy"], cwd=module, env=go_env(), check=True, timeout=600)


def go_env() -> dict[str, str]:
    # As hack/tools.sh builds: no checksum database (some pinned modules have no entry), no cgo, and
    # its compiler flags, which the build cache's keys include (-trimpath, no DWARF).
    flags = "-mod=mod -trimpath -gcflags=all=-dwarf=false"
    return {**os.environ, "GOFLAGS": flags, "GOSUMDB": "off", "CGO_ENABLED": "0"}


def vet(module: Path, program: str) -> subprocess.CompletedProcess[str]:
    (module / "main.go").write_text(program)
    return subprocess.run(["go", "vet", "./..."], cwd=module, env=go_env(), capture_output=True, text=True, timeout=900)


def test_go_vet_passes_a_program_that_declares_a_training_cluster(module: Path) -> None:
    done = vet(module, PROGRAM)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("old", "new", "reported"), [m[:3] for m in MISTAKES], ids=[m[3] for m in MISTAKES])
def test_go_vet_fails_the_program_with_one_mistake(module: Path, old: str, new: str, reported: str) -> None:
    assert PROGRAM.count(old) == 1, f"{old!r} is not in the program once"
    done = vet(module, PROGRAM.replace(old, new))
    assert done.returncode != 0, done.stderr
    assert reported in done.stderr
