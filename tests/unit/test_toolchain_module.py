"""The optimised Go tools of `make up` and the real node come from one build list (hack/tools.sh
"The toolchain module"; docs/operations/toolchain.md): every library two of them share is at one
version in both, so a cold machine compiles it once. Read from the binaries' own build information
(`go version -m`), replacements included, and their stamps."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from toolenv import BIN, CACHE

# What `make up` builds from the module (always there once `make tools` ran), then what the real
# node adds (there once `hack/tools.sh node` ran: make test builds it before its tests).
MAIN = ("pulumi", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
NODE = ("kubelet", "kube-proxy", "kube-router")


def provider() -> Path:
    found = sorted((CACHE / "pulumi-home" / "plugins").glob("resource-kubernetes-v*/pulumi-resource-kubernetes"))
    if not found:
        pytest.fail("the provider is not registered: run `make tools` (hack/tools.sh) first")
    return found[-1]


def modules(binary: Path) -> dict[str, str]:
    """Module path -> the version compiled in (a replacement's when there is one)."""
    done = subprocess.run(["go", "version", "-m", str(binary)], capture_output=True, text=True, check=True)
    found: dict[str, str] = {}
    last = ""
    for line in done.stdout.splitlines():
        fields = line.split()
        if fields[:1] == ["dep"]:
            last = fields[1]
            found[last] = fields[2]
        elif fields[:1] == ["=>"] and last:
            found[last] = fields[2] if len(fields) > 2 and not fields[1].startswith((".", "/")) else fields[1]
    return found


def built() -> dict[str, Path]:
    if not (BIN / "pulumi").exists():
        pytest.fail("the toolchain is not built: run `make tools` (hack/tools.sh) first")
    tools = {name: (BIN / name).resolve() for name in MAIN} | {"provider": provider()}
    tools |= {name: (BIN / name).resolve() for name in NODE if (BIN / name).exists()}
    return tools


def test_every_library_two_tools_share_is_compiled_at_one_version() -> None:
    seen: dict[str, dict[str, str]] = {}
    tools = built()
    for name, binary in tools.items():
        for module, version in modules(binary).items():
            seen.setdefault(module, {})[name] = version
    shared = {module: users for module, users in seen.items() if len(users) > 1}
    split = {module: users for module, users in shared.items() if len(set(users.values())) > 1}
    assert not split, f"built from more than one build list: {split}"
    # The check can fail: these libraries are in several tools (before the toolchain module the
    # provider's gRPC was 1.72.1 and the CLI's 1.83.1; its client-go 0.33.3, the control plane's 0.34.4).
    assert {"pulumi", "provider", "etcd", "kube-apiserver"} <= set(shared["google.golang.org/grpc"])
    assert {"provider", "kube-apiserver", "kubectl"} <= set(shared["k8s.io/client-go"])
    assert {"pulumi", "provider"} <= set(shared["github.com/pulumi/pulumi/sdk/v3"])


def test_each_module_built_tool_carries_the_stamp_of_one_module() -> None:
    """hack/tools.sh rebuilds a tool whose stamp is not the current module's key; the stamps of
    what is built now agree (one module, not some tools left from another)."""
    tools = built()
    stamps = {}
    for name in (*MAIN, *NODE):
        binary = tools.get(name)
        if binary is None:
            continue
        stamp = binary.parent / f".{binary.name}.toolchain"
        assert stamp.exists(), f"{binary} has no toolchain stamp"
        stamps[name] = stamp.read_text().strip()
    assert len(set(stamps.values())) == 1, stamps
