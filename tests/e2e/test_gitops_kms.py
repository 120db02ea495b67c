"""A team whose pipeline encrypts its stacks' secrets with a KMS key instead of a passphrase
(`TFK8S_SECRETS_PROVIDER=awskms://...`, docs/guide/gitops.md): the AWS KMS API of local-kms
(lab/kms.py), the pipeline command exactly as CI runs it (`hack/gitops.sh apply`), a file backend
and a kwok cluster of its own.

  first push  a platform and a tenant: each stack's state on the KMS provider, its data key
              encrypted by the KMS, the tenant ready, its Jupyter token in the state as ciphertext
  KMS gone    the next commit changes the tenant: its apply fails naming the KMS, although the
              machine's own passphrase is there (hack/env.sh gives one), and nothing in the cluster
              or the state changes
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from drivers import CLUSTER, ROOT, Kube, team_platform
from kms import Kms, local_kms

import toolenv

PLATFORM, TENANT, USER = "kms-platform", "tenant-kim", "kim"
NAMESPACE = f"tfk8s-{USER}"
NO_COMMIT = "0" * 40


@pytest.fixture(scope="module")
def cluster() -> Iterator[Kube]:
    name = f"{CLUSTER}-kms"
    with toolenv.throwaway_cluster(name) as kubeconfig:
        yield Kube(kubeconfig, cluster=name)


def _stack_file(repo: Path, stack: str, config: dict[str, Any]) -> None:
    (repo / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": config}, sort_keys=False))


def _tenant(users: list[str]) -> dict[str, Any]:
    return {
        "tfk8s:kind": "tenant",
        "tfk8s:platformStack": PLATFORM,
        "tfk8s:tenant": {"name": USER, "identities": {"users": users}, "volumes": {"dataSize": "1Gi", "logSize": "1Gi"}},
    }


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, message: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def _apply(repo: Path, env: dict[str, str], base: str, head: str, summary: Path) -> subprocess.CompletedProcess[str]:
    command = [str(ROOT / "hack" / "gitops.sh"), "apply", "--base", base, "--head", head, "--parallel", "2"]
    command += ["--policy-pack", "none", "--summary", str(summary)]
    return subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=900)


def _state(repo: Path, stack: str) -> dict[str, Any]:
    """The stack's checkpoint as the backend keeps it (file backend: .pulumi/stacks/<project>/<stack>.json)."""
    (checkpoint,) = (repo / "state" / ".pulumi" / "stacks").glob(f"*/{stack}.json")
    state: dict[str, Any] = json.loads(checkpoint.read_text())
    return state


def _versions(kube: Kube) -> dict[str, str]:
    kinds = "deployments,services,configmaps,secrets,networkpolicies,serviceaccounts,roles,rolebindings,resourcequotas"
    items = json.loads(kube.run("get", kinds, "-n", NAMESPACE, "-o", "json"))["items"]
    return {f"{i['kind']}/{i['metadata']['name']}": i["metadata"]["resourceVersion"] for i in items}


def test_a_team_on_a_kms_key_needs_no_passphrase_and_no_passphrase_opens_its_stacks(tmp_path: Path, cluster: Kube) -> None:
    repo = toolenv.project_copy(tmp_path / "team")
    for stack_file in (repo / "stacks").glob("Pulumi.*.yaml"):
        stack_file.unlink()
    volumes = tmp_path / "volumes"
    volumes.mkdir()
    _stack_file(repo, PLATFORM, team_platform(volumes, "tfk8s-kms-local"))
    _stack_file(repo, TENANT, _tenant([USER]))
    (repo / "stacks" / "team.yaml").write_text(yaml.safe_dump({"platforms": [PLATFORM], "tenants": [TENANT]}))
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "platform@example.com")
    _git(repo, "config", "user.name", "platform team")
    first = _commit(repo, "a platform and its first tenant")

    with local_kms(tmp_path / "kms") as kms:
        env = _team_env(repo, cluster, kms)
        done = _apply(repo, env, NO_COMMIT, first, tmp_path / "first.md")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        summary = (tmp_path / "first.md").read_text()
        rows = [line for line in summary.splitlines() if any(f"| `{stack}` |" in line for stack in (PLATFORM, TENANT))]
        assert len(rows) == 2 and all("✅ ok" in row and "| yes |" in row for row in rows), summary

        for stack in (PLATFORM, TENANT):  # the pipeline's workspace is a scratch copy: the state says which
            provider = _state(repo, stack)["checkpoint"]["latest"]["secrets_providers"]
            assert provider["type"] == "cloud" and provider["state"]["url"] == kms.secrets_provider, provider
            assert provider["state"]["encryptedkey"], provider
        assert "Encryption called" in (tmp_path / "kms" / "local-kms.log").read_text()

        ready = subprocess.run(
            ["pulumi", "stack", "output", "ready", "--stack", TENANT, "--cwd", str(repo)],
            env={**env, **toolenv.exported(base=env)},
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        assert ready == "true"
        encoded = json.loads(cluster.run("get", "secret", "-n", NAMESPACE, "-o", "json"))["items"]
        tokens = [base64.b64decode(v).decode() for s in encoded for k, v in (s.get("data") or {}).items() if k == "token"]
        assert tokens, [s["metadata"]["name"] for s in encoded]
        checkpoint = json.dumps(_state(repo, TENANT))
        for token in tokens:
            assert token not in checkpoint and base64.b64encode(token.encode()).decode() not in checkpoint
        assert "4dabf18193072939515e22adb298388d" in checkpoint  # Pulumi's secret signature: the token is there, encrypted

    # The KMS is gone (the team's CI lost its key, or an attacker runs the pipeline with the
    # repository and the state but not the key): the machine's passphrase is all it has.
    before, state_before = _versions(cluster), _state(repo, TENANT)
    _stack_file(repo, TENANT, _tenant([USER, "kim-ci"]))
    second = _commit(repo, "kim's CI account")
    done = _apply(repo, env, first, second, tmp_path / "second.md")
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert 'secrets manager of type "cloud"' in output and "KMS: Decrypt" in output, output[-3000:]
    assert _versions(cluster) == before
    assert _state(repo, TENANT) == state_before


def _team_env(repo: Path, cluster: Kube, kms: Kms) -> dict[str, str]:
    """The pipeline's environment: the KMS's URL and credentials, a file backend, the cluster, and
    no passphrase of the team's (hack/env.sh makes one of this machine's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PULUMI_", "AWS_", "TFK8S_SECRETS"))}
    env.update(kms.env)
    env.update(
        {
            "TFK8S_SECRETS_PROVIDER": kms.secrets_provider,
            "PULUMI_BACKEND_URL": f"file://{repo / 'state'}",
            "KUBECONFIG": str(cluster.kubeconfig),
        }
    )
    return env
