"""The git side of GitOps: what changed between two commits, and the stack files at a commit.

Everything is read from git objects (`git show <commit>:<path>`), never from the working tree, so
a plan of `base..head` is the same whatever is checked out.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from tfk8s.errors import Refusal, Tfk8sError
from tfk8s.settings import NAMESPACE
from tfk8s.settings.platform import PlatformSettings

# A commit id of zeros: GitHub's `before` of a branch's first push. Nothing came before it.
NO_COMMIT = "0" * 40
STACK_FILE_PREFIX, STACK_FILE_SUFFIX = "Pulumi.", ".yaml"
# What the program is made of besides the stack files: a change of any of these may change every
# stack's resources (infra/ is the program, training/ is shipped into pods by it, the pack's rules
# decide what passes, the requirements pin the SDK and provider), so every stack is previewed.
PROGRAM_PATHS = ("Pulumi.yaml", "infra/", "training/", "policies/", "requirements.txt", "pyproject.toml")


class GitError(Tfk8sError):
    """A git command failed; the message has git's own words."""


# The platform team's declaration of its own stacks, beside the stack files (`stacks/team.yaml`):
# the platforms and tenants the pipeline runs with its own credentials. Every other stack acts as
# an identity of its own (tfk8s_gitops.identity). Read from the commit a change is made against,
# never from the change (tfk8s_gitops.plan): a stack file's own `tfk8s:kind` chooses nothing.
TEAM_FILE = "team.yaml"
TEAM_KINDS = {"platforms": "platform", "tenants": "tenant"}


class TeamFileError(Refusal):
    """The team file is not what it must be; the message names the key and the fix."""


@dataclass(frozen=True)
class TeamStacks:
    """The stacks one commit's team file declares the platform team's, by kind."""

    path: str
    commit: str
    kinds: dict[str, str]
    """stack -> `platform` or `tenant`."""

    def kind_of(self, stack: str) -> str | None:
        return self.kinds.get(stack)


@dataclass(frozen=True)
class StackFile:
    """One stack file as the plan needs it: its kind and the stack it builds on (None: a platform, a
    reference to another project's stack, or an experiment in a namespace no tenant stack of this
    repository holds: none of these does this repository order)."""

    name: str
    path: str
    kind: str | None
    upstream: str | None
    config: dict[str, Any]


class Repo:
    def __init__(self, root: Path) -> None:
        self.root = root

    def git(self, *args: str) -> str:
        done = subprocess.run(["git", "-C", str(self.root), *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise GitError(f"git {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def resolve(self, commit: str) -> str:
        return self.git("rev-parse", "--verify", f"{commit}^{{commit}}").strip()

    def project(self, commit: str) -> tuple[str, str]:
        """Pulumi.yaml's project name and `stackConfigDir` ("." for the project root) at `commit`."""
        project = yaml.safe_load(self.git("show", f"{commit}:Pulumi.yaml")) or {}
        return str(project.get("name") or ""), str(PurePosixPath(project.get("stackConfigDir") or "."))

    def changed_paths(self, base: str, head: str) -> set[str]:
        """Paths added, modified or removed from `base` to `head` (a rename is a removal and an addition)."""
        listed = self.git("diff", "--name-only", "--no-renames", "-z", base, head)
        return {p for p in listed.split("\0") if p}

    def team_stacks(self, commit: str) -> TeamStacks:
        """The team file at `commit` (none there: no team stacks)."""
        _, folder = self.project(commit)
        path = TEAM_FILE if folder == "." else f"{folder}/{TEAM_FILE}"
        if not self.git("ls-tree", "--name-only", commit, "--", path).strip():
            return TeamStacks(path, commit, {})
        where = f"{path} at {commit[:12]}"
        try:
            document = yaml.safe_load(self.git("show", f"{commit}:{path}"))
        except yaml.YAMLError as error:
            raise TeamFileError(f"{where} is not YAML: {error}") from None
        document = {} if document is None else document
        if not isinstance(document, dict) or set(document) - set(TEAM_KINDS):
            extra = sorted(set(document) - set(TEAM_KINDS)) if isinstance(document, dict) else [type(document).__name__]
            raise TeamFileError(f"{where}: only `platforms` and `tenants` (lists of stack names) belong there, not {extra}")
        kinds: dict[str, str] = {}
        for key, kind in TEAM_KINDS.items():
            names = document.get(key) or []
            if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
                raise TeamFileError(f"{where}: `{key}` must be a list of stack names, got {names!r}")
            for name in names:
                if kinds.setdefault(name, kind) != kind:
                    raise TeamFileError(f"{where}: {name} is declared both a platform and a tenant: keep one")
        return TeamStacks(path, commit, kinds)

    def removal_of(self, path: str, commit: str) -> str | None:
        """The last commit before or at `commit` that removed `path`, if any; refused on a shallow
        clone, whose history may hide one."""
        if self.git("rev-parse", "--is-shallow-repository").strip() == "true":
            raise GitError(
                f"the checkout is shallow: whether {path} existed before cannot be told; fetch the whole history (fetch-depth: 0)"
            )
        return self.git("log", "-1", "--diff-filter=D", "--format=%H", commit, "--", path).strip() or None

    def stack_files(self, commit: str) -> dict[str, StackFile]:
        """Every stack file at `commit`, by stack name."""
        project, folder = self.project(commit)
        prefix = "" if folder == "." else f"{folder}/"
        listed = self.git("ls-tree", "-z", "--name-only", commit, "--", prefix or ".").split("\0")
        found = {}
        for path in filter(None, listed):
            name = stack_name(path, prefix)
            if name is not None:
                found[name] = self._read(commit, path, name, project)
        tenants = tenant_namespaces(found)
        return {
            name: replace(file, upstream=tenants.get(str(file.config.get(EXPERIMENT_NAMESPACE_KEY))))
            if file.kind == "experiment"
            else file
            for name, file in found.items()
        }

    def _read(self, commit: str, path: str, name: str, project: str) -> StackFile:
        try:
            document = yaml.safe_load(self.git("show", f"{commit}:{path}")) or {}
        except yaml.YAMLError as error:
            raise GitError(f"{path} at {commit[:12]} is not YAML: {error}") from None
        config = document.get("config") if isinstance(document, dict) else None
        config = config if isinstance(config, dict) else {}
        kind = config.get(f"{NAMESPACE}:kind")
        return StackFile(name, path, kind if isinstance(kind, str) else None, _upstream(config, project), config)


def stack_name(path: str, prefix: str) -> str | None:
    """`stacks/Pulumi.dev.yaml` -> `dev`; None for any other path."""
    if not path.startswith(prefix):
        return None
    file = path[len(prefix) :]
    if "/" in file or not (file.startswith(STACK_FILE_PREFIX) and file.endswith(STACK_FILE_SUFFIX)):
        return None
    return file[len(STACK_FILE_PREFIX) : -len(STACK_FILE_SUFFIX)] or None


# A tenant names the stack it builds on; an experiment names its tenant's namespace, whose stack is
# the tenant stack of that user name on a platform with that namespace prefix (the schema's aliases, tfk8s.settings).
PLATFORM_STACK_KEY = f"{NAMESPACE}:platformStack"
EXPERIMENT_NAMESPACE_KEY = f"{NAMESPACE}:namespace"
DEFAULT_NAMESPACE_PREFIX = PlatformSettings.model_fields["namespace_prefix"].default


def tenant_namespaces(stacks: dict[str, StackFile]) -> dict[str, str]:
    """The tenant stacks of this repository by the namespace each one holds (tfk8s.specs.fixed_names.namespace_name)."""
    found = {}
    for name, file in stacks.items():
        tenant = file.config.get(f"{NAMESPACE}:tenant")
        if file.kind != "tenant" or not isinstance(tenant, dict) or not isinstance(tenant.get("name"), str):
            continue
        platform = stacks.get(file.upstream or "")
        settings = platform.config.get(f"{NAMESPACE}:platform") if platform else None
        prefix = settings.get("namespacePrefix") if isinstance(settings, dict) else None
        found[f"{prefix if isinstance(prefix, str) else DEFAULT_NAMESPACE_PREFIX}{tenant['name']}"] = name
    return found


def _upstream(config: dict[str, Any], project: str) -> str | None:
    ref = config.get(PLATFORM_STACK_KEY) if config.get(f"{NAMESPACE}:kind") == "tenant" else None
    if not isinstance(ref, str) or not ref:
        return None
    # `project/stack` and `org/project/stack` of this project order like `stack`; another project's stack is not ours.
    parts = ref.split("/")
    return parts[-1] if len(parts) == 1 or (len(parts) in (2, 3) and parts[-2] == project) else None


def is_program_path(path: str) -> bool:
    return any(path == p or (p.endswith("/") and path.startswith(p)) for p in PROGRAM_PATHS)
