"""One encryption salt for a platform and the tenants the pipeline creates on it.

With Pulumi's passphrase provider every distinct salt costs each command a key derivation
(1,000,000 PBKDF2 rounds, ~0.15 CPU-s), and a tenant's `up` reads its platform's outputs, which the
engine decrypts under the platform's salt: a tenant with a salt of its own pays two derivations per
command, one sharing its platform's pays one (the engine keeps its secrets managers by salt). Both
stacks are the platform team's, under its one passphrase, so sharing the salt shares nothing else:
the passphrase is what protects the secrets, and a salt is not secret. The same rule as `make up`'s
demo stacks (hack/project.py share-salt; docs/guide/usage.md "Secrets and the passphrase"), taken
here from the platform's state when the checkout's stack file holds no salt (the CLI writes it only
into the workspace's copy). Experiments keep salts of their own: they read no other stack, and run
under their tenant's passphrase.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

SALT_KEY = "encryptionsalt"
PASSPHRASE = "passphrase"


def of_file(stack_file: Path) -> str | None:
    """The salt a stack file holds, if any."""
    document = (yaml.safe_load(stack_file.read_text()) if stack_file.exists() else None) or {}
    salt = document.get(SALT_KEY)
    return salt if isinstance(salt, str) and salt else None


def of_export(exported: dict[str, Any]) -> str | None:
    """The salt of a stack's state (`pulumi stack export`), if its secrets provider is the passphrase's."""
    provider = (exported.get("deployment") or {}).get("secrets_providers") or {}
    salt = (provider.get("state") or {}).get("salt") if provider.get("type") == PASSPHRASE else None
    return salt if isinstance(salt, str) and salt else None


def give(stack_file: Path, salt: str) -> bool:
    """Put `salt` into a stack file that holds none (before `pulumi stack init`, which would write a
    new one); whether it did."""
    if not stack_file.exists() or of_file(stack_file) is not None:
        return False
    stack_file.write_text(f"{SALT_KEY}: {salt}\n" + stack_file.read_text())
    return True


def drop(stack_file: Path) -> None:
    """Take the salt out of a stack file (a workspace's copy), so that `pulumi stack init` writes one
    for the passphrase it runs under (tfk8s_gitops.recorded_state: not the team's)."""
    if of_file(stack_file) is None:
        return
    document = yaml.safe_load(stack_file.read_text())
    document.pop(SALT_KEY)
    stack_file.write_text(yaml.safe_dump(document, sort_keys=False))
