"""What `make up` runs its demo stacks from, and what a user runs for her own stack files: a copy
of this project to run plain `pulumi` commands in (`project-copy`), and a tenant stack file given
its platform's encryption salt (`share-salt`; docs/guide/usage.md "Secrets and the passphrase").

  python hack/project.py project-copy DIR        -> prints DIR
  python hack/project.py share-salt STACK_FILE   -> prints the salt the file has afterwards

The tests and benchmarks use the same functions through lab/toolenv.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "infra"))  # the one reader and writer of a stack file's salt, the pipeline's too

from tfk8s_gitops import salts  # noqa: E402


def tracked_stack_files() -> list[Path]:
    """The stack files a clone of this repository has: what git tracks under stacks/, as they are
    in the working tree. Not whatever else lies there (a user's own `pulumi stack init`, a copy a
    command left behind): a test or the demo must not depend on a machine's leftovers."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z", "--", "stacks"], check=True, capture_output=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an unpacked archive)
        return sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))
    return [ROOT / name for name in listed.split("\0") if name]


def project_copy(work: Path) -> Path:
    """A copy of this project to run plain `pulumi` commands in: Pulumi.yaml and the tracked stack
    files copied (commands edit stack files: Pulumi writes each stack's encryption salt there),
    infra/ and .venv linked, `state/` for PULUMI_BACKEND_URL=file://<work>/state.

    Copying into an existing copy refreshes Pulumi.yaml and the stack files from the repository
    and keeps the rest: `make up` runs the demo stacks from such a copy under .state/demo, whose
    salt Pulumi then recovers from the stack's state (PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER,
    hack/env.sh)."""
    (work / "stacks").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "Pulumi.yaml", work / "Pulumi.yaml")
    for stack_file in tracked_stack_files():
        shutil.copy(stack_file, work / "stacks" / stack_file.name)
    for linked in ("infra", ".venv"):  # Pulumi.yaml's `main` and runtime.options.virtualenv
        if not (work / linked).is_symlink():
            (work / linked).symlink_to(ROOT / linked)
    (work / "state").mkdir(exist_ok=True)
    return work


UPSTREAM_KEY = "tfk8s:platformStack"  # a tenant's platform


def share_salt(stack_file: Path) -> str | None:
    """Give a tenant's stack file without an encryption salt its platform's salt (found beside it),
    before `pulumi stack init` writes a new one. With the passphrase provider each distinct salt
    costs a 1,000,000-round PBKDF2 per command (about 0.17 s here), and a tenant's `up` reads its
    platform's outputs, which the engine decrypts with the platform's salt: one shared salt is one
    derivation (docs/benchmarks.md "Fixed cost"). Both are the platform team's, under its passphrase. An
    experiment reads no other stack (tfk8s.stack_kinds.tenant_contract) and keeps a salt of its own, under its
    tenant's passphrase. Salts are not secret; the passphrase stays what protects the secrets.
    Returns the salt the file has afterwards, if any."""
    own = salts.of_file(stack_file)
    document = (yaml.safe_load(stack_file.read_text()) if stack_file.exists() else None) or {}
    upstream = (document.get("config") or {}).get(UPSTREAM_KEY)
    if own or not isinstance(upstream, str) or not upstream:
        return own
    salt = share_salt(stack_file.parent / f"Pulumi.{upstream.rsplit('/', 1)[-1]}.yaml")
    if salt:
        salts.give(stack_file, salt)
    return salt


if __name__ == "__main__":  # `make up` & co: python hack/project.py project-copy .state/demo
    commands = {"project-copy": lambda arg: project_copy(Path(arg).resolve()), "share-salt": lambda arg: share_salt(Path(arg))}
    if len(sys.argv) != 3 or sys.argv[1] not in commands:
        sys.exit("usage: project.py project-copy DIR | share-salt STACK_FILE")
    print(commands[sys.argv[1]](sys.argv[2]) or "")
