"""Drive the Pulumi engine for a tfk8s stack: `python -m tfk8s.automation up|preview|destroy|outputs STACK`.

Why not plain `pulumi up`: the Pulumi Python language host ships only in Pulumi's release
archives, and the Go module proxy this project builds its toolchain from does not serve it. The
Automation API hosts the program in this process instead, and the real `pulumi` CLI and engine
do everything else (same Pulumi.yaml, same stacks/*.yaml, same state). With the official
installers, `pulumi up -s dev` works as well.

Everything stays inside this checkout and the tool cache: state in `.state/` (a local file
backend), plugins in `$TFK8S_CACHE/pulumi-home`, a generated passphrase file in the cache, and
the local cluster's own kubeconfig.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pulumi.automation as auto
import yaml

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("TFK8S_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tfk8s")


def versions() -> dict[str, str]:
    """hack/versions.sh, the one place toolchain versions are pinned."""
    result = {}
    for line in (ROOT / "hack" / "versions.sh").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            result[key.strip()] = value.strip()
    return result


def engine_env() -> dict[str, str]:
    passphrase = CACHE / "passphrase"
    if not passphrase.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        passphrase.write_text(secrets.token_urlsafe(32))
        passphrase.chmod(0o600)
    (ROOT / ".state" / "backend").mkdir(parents=True, exist_ok=True)
    env = {
        # Only the CLI's own directory: a provider binary on PATH would shadow the registered plugin.
        "PATH": f"{CACHE / 'tools' / ('pulumi-' + versions()['PULUMI_VERSION'])}{os.pathsep}{os.environ.get('PATH', '')}",
        "PULUMI_HOME": str(CACHE / "pulumi-home"),
        "PULUMI_BACKEND_URL": os.environ.get("PULUMI_BACKEND_URL", f"file://{ROOT / '.state' / 'backend'}"),
        "PULUMI_CONFIG_PASSPHRASE_FILE": os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE", str(passphrase)),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "KUBECONFIG": os.environ.get("KUBECONFIG", str(CACHE / "kwok" / "tfk8s.kubeconfig")),
    }
    os.environ.update(env)  # the inline program and the CLI subprocesses see the same world
    return env


def ensure_provider_plugin(env: dict[str, str]) -> None:
    """Register the locally built Kubernetes provider under the version the SDK asks for."""
    version = versions()["K8S_PROVIDER_VERSION"]
    binary = CACHE / "bin" / "pulumi-resource-kubernetes"
    plugin_dir = Path(env["PULUMI_HOME"]) / "plugins" / f"resource-kubernetes-v{version}"
    if (plugin_dir / "pulumi-resource-kubernetes").exists() or not binary.exists():
        return
    subprocess.run(
        ["pulumi", "plugin", "install", "resource", "kubernetes", version, "--file", str(binary.resolve())],
        check=True,
        env={**os.environ, **env},
    )


def sync_workdir(name: str, work_dir: Path) -> Path:
    """A project directory for the engine: Pulumi.yaml, infra/ and the stack file from this repo.

    Pulumi writes the passphrase salt (`encryptionsalt`) into the stack file it uses. The salt
    belongs to this machine's generated passphrase, so it must not land in the tracked
    stacks/ file: the engine gets a copy, refreshed from stacks/ on every run, salt preserved.
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    for entry in ("Pulumi.yaml", "infra"):
        link = work_dir / entry
        if not link.exists():
            link.symlink_to(ROOT / entry)
    (work_dir / "stacks").mkdir(exist_ok=True)
    tracked = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{name}.yaml").read_text()) or {}
    copy = work_dir / "stacks" / f"Pulumi.{name}.yaml"
    if copy.exists():
        salt = (yaml.safe_load(copy.read_text()) or {}).get("encryptionsalt")
        if salt:
            tracked["encryptionsalt"] = salt
    copy.write_text(yaml.safe_dump(tracked, sort_keys=False))
    return work_dir


def stack(name: str, work_dir: Path | None = None) -> auto.Stack:
    """The stack `name`, program in-process; `work_dir` (default: a synced copy in .state/) holds
    Pulumi.yaml and stacks/."""
    sys.path.insert(0, str(ROOT / "infra"))
    from tfk8s.program import main

    env = engine_env()
    ensure_provider_plugin(env)
    work_dir = work_dir or sync_workdir(name, ROOT / ".state" / "project")
    options = auto.LocalWorkspaceOptions(work_dir=str(work_dir), env_vars=env, pulumi_home=env["PULUMI_HOME"])
    return auto.create_or_select_stack(stack_name=name, project_name="tfk8s", program=main, work_dir=str(work_dir), opts=options)


def plain_outputs(outputs: Mapping[str, auto.OutputValue]) -> dict[str, Any]:
    """Stack outputs with secrets masked: never print a secret in plain text."""
    return {key: "[secret]" if value.secret else value.value for key, value in outputs.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tfk8s.automation", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["up", "preview", "destroy", "outputs", "refresh"])
    parser.add_argument("stack", nargs="?", default="dev")
    parser.add_argument("--refresh", action="store_true", help="read live state first, so readiness is current")
    args = parser.parse_args(argv)
    s = stack(args.stack)
    result: Mapping[str, auto.OutputValue] | None = None
    if args.command == "up":
        result = s.up(refresh=args.refresh, on_output=print, color="never").outputs  # already read: no second `stack output`
    elif args.command == "preview":
        s.preview(on_output=print, color="never")
    elif args.command == "refresh":
        s.refresh(on_output=print, color="never")
    elif args.command == "destroy":
        s.destroy(on_output=print, color="never")
        return 0
    outputs = plain_outputs(result if result is not None else s.outputs())
    print(json.dumps({"ready": outputs.get("ready"), "readiness": outputs.get("readiness")}, indent=2))
    return 0 if args.command != "up" or outputs.get("ready") else 3


if __name__ == "__main__":
    sys.exit(main())
