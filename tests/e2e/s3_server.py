"""A real S3 server on loopback for the tests' state stores: versitygw (hack/tools.sh versitygw)
serving a directory, a bucket per sub-directory, with its own accounts when asked (its internal IAM
and admin API): what a team's object store gives each tenant, a bucket only its keys open."""

from __future__ import annotations

import contextlib
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import toolenv

REGION = "us-east-1"


@dataclass(frozen=True)
class Keys:
    access: str
    secret: str


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    root: Path
    """The directory served: <bucket>/.pulumi/... is a Pulumi backend's own layout."""
    admin: Keys
    admin_endpoint: str | None

    def env(self, bucket: str, keys: Keys | None = None) -> dict[str, str]:
        """What a pipeline or a person needs to use `bucket` as Pulumi's backend with `keys` (the admin's by default)."""
        keys = keys or self.admin
        return {
            "PULUMI_BACKEND_URL": f"s3://{bucket}?endpoint={self.endpoint}&s3ForcePathStyle=true&region={REGION}",
            "AWS_ACCESS_KEY_ID": keys.access,
            "AWS_SECRET_ACCESS_KEY": keys.secret,
            "AWS_REGION": REGION,
        }

    def account(self, name: str) -> Keys:
        """A new account (role `user`: it sees the buckets it owns, nothing else)."""
        keys = Keys(name, secrets.token_urlsafe(18))
        self._admin("create-user", "--access", keys.access, "--secret", keys.secret, "--role", "user")
        return keys

    def bucket(self, name: str, owner: Keys | None = None) -> str:
        if owner is None:
            (self.root / name).mkdir()
        else:
            self._admin("create-bucket", "--bucket", name, "--owner", owner.access)
        return name

    def _admin(self, *args: str) -> None:
        if self.admin_endpoint is None:
            raise RuntimeError("this S3 server has no accounts: start it with accounts=True")
        base = [str(toolenv.BIN / "versitygw"), "admin", "--access", self.admin.access, "--secret", self.admin.secret]
        subprocess.run([*base, "--endpoint-url", self.admin_endpoint, *args], check=True, capture_output=True, text=True)


@contextlib.contextmanager
def s3_server(directory: Path, accounts: bool = False) -> Iterator[S3Server]:
    """versitygw serving `directory/data` until the block ends; with `accounts`, its IAM (in
    `directory/iam`) and admin API, for buckets owned by accounts of their own."""
    data = directory / "data"
    data.mkdir(parents=True)
    admin = Keys("tfk8s", secrets.token_urlsafe(18))
    port, admin_port = toolenv.free_port(), toolenv.free_port()
    command = [toolenv.tool("versitygw"), "--access", admin.access, "--secret", admin.secret, "--port", f"127.0.0.1:{port}"]
    if accounts:
        (directory / "iam").mkdir()
        command += ["--admin-port", f"127.0.0.1:{admin_port}", "--iam-dir", str(directory / "iam")]
    server = subprocess.Popen([*command, "posix", str(data)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for listening in [port, *([admin_port] if accounts else [])]:
            toolenv.wait_for_port(server, listening, "versitygw")
        yield S3Server(f"http://127.0.0.1:{port}", data, admin, f"http://127.0.0.1:{admin_port}" if accounts else None)
    finally:
        server.terminate()
        server.wait(timeout=30)
