"""The AWS KMS API on loopback (local-kms, hack/tools.sh local-kms): what a team's pipeline encrypts
its stacks' secrets with instead of a passphrase (`TFK8S_SECRETS_PROVIDER=awskms://...`, see
docs/guide/gitops.md), for the GitOps tests and the fleet bench.

It stands in for AWS KMS or Vault's transit engine and is never one: it checks no credentials and
listens on every interface (local-kms has no option to bind loopback only), so it holds throwaway
keys of a test, nothing else. What Pulumi does with it is what it does with AWS KMS: one Encrypt of
a stack's data key at `stack init`, one Decrypt per command that opens the stack's secrets.
"""

from __future__ import annotations

import contextlib
import secrets
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

import toolenv

REGION = "us-east-1"


@dataclass(frozen=True)
class Kms:
    endpoint: str
    alias: str

    @property
    def secrets_provider(self) -> str:
        """The `--secrets-provider` (TFK8S_SECRETS_PROVIDER) of a stack whose data key this KMS's key encrypts."""
        return f"awskms://{self.alias}?region={REGION}&endpoint={self.endpoint}"

    @property
    def env(self) -> dict[str, str]:
        """What a pipeline needs besides the URL: credentials of the AWS SDK's shape (local-kms checks none)."""
        return {"AWS_ACCESS_KEY_ID": "tfk8s", "AWS_SECRET_ACCESS_KEY": "local-kms-checks-none", "AWS_REGION": REGION}


@contextlib.contextmanager
def local_kms(directory: Path, alias: str = "alias/tfk8s-team") -> Iterator[Kms]:
    """local-kms with one AES key of random bytes under `alias`, its database in `directory`, until the block ends."""
    directory.mkdir(parents=True, exist_ok=True)
    key_id = str(uuid.uuid4())
    seed = {
        "Keys": {"Symmetric": {"Aes": [{"Metadata": {"KeyId": key_id}, "BackingKeys": [secrets.token_hex(32)]}]}},
        "Aliases": [{"AliasName": alias, "TargetKeyId": key_id}],
    }
    (directory / "seed.yaml").write_text(yaml.safe_dump(seed))
    port = toolenv.free_port()
    env = {
        "PORT": str(port),
        "KMS_REGION": REGION,
        "KMS_DATA_PATH": str(directory / "data"),
        "KMS_SEED_PATH": str(directory / "seed.yaml"),
    }
    log = (directory / "local-kms.log").open("wb")
    server = subprocess.Popen([toolenv.tool("local-kms")], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        try:
            toolenv.wait_for_port(server, port, "local-kms")
        except RuntimeError as error:
            raise RuntimeError(f"{error}:\n{(directory / 'local-kms.log').read_text()[-2000:]}") from None
        yield Kms(f"http://127.0.0.1:{port}", alias)
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
