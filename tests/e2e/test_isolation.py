"""Tenants kept apart on the real API server, with real per-user credentials.

alice arrives with a client certificate the local cluster's CA signed (hack/cluster.sh
user-kubeconfig), as a user of a real cluster arrives with their organisation's credentials; her
tenant stack (tenant-alice) names her. With her own kubeconfig she runs her experiment's `up` and
`destroy`; bob's experiment is refused by the program before anything exists, and every kind tfk8s
creates in bob's namespace, Secrets included, is refused to her by the API server itself. A tenant's
second experiment that would not fit its quota is refused at preview with the numbers, and the
first is left as it was.

Runs before test_local_cluster.py (file order) and leaves the session's tenants as it found them.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from pathlib import Path

import pytest
from drivers import SMALL_CLUSTER, Cli, Kube, user_kube, wait_until
from s3_server import s3_server

ALICE, BOB = "tfk8s-alice", "tfk8s-bob"
GROUP = "tfk8s-users"
# What tfk8s creates in a tenant's namespace (tenant and experiment stacks), and what it reads.
KINDS = (
    "configmaps",
    "secrets",
    "services",
    "persistentvolumeclaims",
    "serviceaccounts",
    "pods",
    "deployments.apps",
    "jobs.batch",
    "roles.rbac.authorization.k8s.io",
    "rolebindings.rbac.authorization.k8s.io",
    "resourcequotas",
    "limitranges",
    "networkpolicies.networking.k8s.io",
)


@pytest.fixture(scope="module")
def alice(kube: Kube) -> Kube:
    return user_kube(kube, "alice", [GROUP])


def as_user(user: Kube) -> dict[str, str]:
    """The environment of a user whose kubeconfig is theirs alone (not the admin's)."""
    return {**os.environ, "KUBECONFIG": str(user.kubeconfig)}


def layout_resource(kube: Kube) -> str:
    (crd,) = [c["metadata"]["name"] for c in kube.get("crd") if c["spec"]["names"]["kind"] == "Layout"]
    return crd


def kubernetes_objects(cli: Cli, stack: str) -> list[str]:
    """The Kubernetes objects in the stack's state (not the provider, which the program warms up at its start)."""
    state = json.loads(cli("stack", "export", "--stack", stack).stdout)["deployment"].get("resources") or []
    return [r["type"] for r in state if r["type"].startswith("kubernetes:")]


def test_alice_runs_her_experiment_with_her_own_credentials(cli: Cli, alice: Kube, tenants: dict[str, str]) -> None:
    whoami = json.loads(alice.run("auth", "whoami", "-o", "json"))["status"]["userInfo"]
    assert whoami["username"] == "alice" and GROUP in whoami["groups"]
    cli.init_experiment("iso-alice", tenant=tenants["alice"], settings=SMALL_CLUSTER)
    try:
        cli("up", "--stack", "iso-alice", "--yes", "--skip-preview", env=as_user(alice))
        assert cli.outputs("iso-alice")["ready"] is True
        cli("preview", "--stack", "iso-alice", "--expect-no-changes", env=as_user(alice))
    finally:
        cli("destroy", "--stack", "iso-alice", "--yes", env=as_user(alice))
        cli("stack", "rm", "iso-alice", "--yes")


def test_alice_runs_her_experiment_with_nothing_of_the_platform_teams(
    cli: Cli, alice: Kube, tenants: dict[str, str], tmp_path: Path
) -> None:
    """The quick start's default (`hack/env.sh --tenant alice`): her certificate, a state store and
    a passphrase of her own. The experiment reads its tenant's contract from the cluster with her
    rights, so the platform's and tenants' state and passphrase are never needed, and hers opens none of them."""
    (tmp_path / "state").mkdir()
    own = {
        **as_user(alice),
        "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}",
        "PULUMI_CONFIG_PASSPHRASE": secrets.token_urlsafe(24),
    }
    mine = Cli(cli.cwd, own)
    mine.init_experiment("own-alice", tenant=tenants["alice"], settings=SMALL_CLUSTER)
    try:
        mine("up", "--stack", "own-alice", "--yes", "--skip-preview")
        assert mine.outputs("own-alice")["ready"] is True
        mine("preview", "--stack", "own-alice", "--expect-no-changes")
        assert [line.split()[0].rstrip("*") for line in mine("stack", "ls").stdout.splitlines()[1:]] == ["own-alice"]
        # Her passphrase, given the team's state, decrypts nothing of her tenant's.
        done = cli(
            "stack",
            "export",
            "--stack",
            tenants["alice"],
            "--show-secrets",
            check=False,
            env={**os.environ, **{"PULUMI_CONFIG_PASSPHRASE": own["PULUMI_CONFIG_PASSPHRASE"]}},
        )
        assert done.returncode != 0 and "incorrect passphrase" in done.stdout + done.stderr, done.stdout + done.stderr
    finally:
        mine("destroy", "--stack", "own-alice", "--yes")
        mine("stack", "rm", "own-alice", "--yes")


def test_on_a_shared_object_store_alices_state_is_a_bucket_only_her_keys_open(
    cli: Cli, alice: Kube, tenants: dict[str, str], tmp_path: Path
) -> None:
    """The practice docs/guide/usage.md gives for a team's object store: a bucket per tenant, owned by an account of
    its own (versitygw's accounts here, as S3's IAM would). alice's experiment runs with her bucket
    and keys alone; her keys open neither the team's bucket (the platform's and tenants' state) nor
    bob's, and his do not open hers: the store refuses, whatever the passphrase."""
    with s3_server(tmp_path / "s3", accounts=True) as store:
        hers, his = store.account("alice"), store.account("bob")
        buckets = {"alice": store.bucket("state-alice", hers), "bob": store.bucket("state-bob", his)}
        team_bucket = store.bucket("team")
        team = store.env(team_bucket)
        cli("stack", "init", "s3-team", env={**os.environ, **team})  # the team's state: a stack of its own there
        own = {**as_user(alice), **store.env(buckets["alice"], hers), "PULUMI_CONFIG_PASSPHRASE": secrets.token_urlsafe(24)}
        mine = Cli(cli.cwd, own)
        mine.init_experiment("s3-alice", tenant=tenants["alice"], settings=SMALL_CLUSTER)
        try:
            mine("up", "--stack", "s3-alice", "--yes", "--skip-preview")
            assert mine.outputs("s3-alice")["ready"] is True
            assert list((store.root / buckets["alice"] / ".pulumi" / "stacks").rglob("s3-alice.json*")), "no state in her bucket"
            for bucket, keys in ((team_bucket, hers), (buckets["bob"], hers), (buckets["alice"], his)):
                done = cli("stack", "ls", check=False, env={**os.environ, **store.env(bucket, keys)})
                text = done.stdout + done.stderr
                assert done.returncode != 0 and "AccessDenied" in text, f"{keys.access}'s keys on {bucket}: {text}"
        finally:
            mine("destroy", "--stack", "s3-alice", "--yes")
            mine("stack", "rm", "s3-alice", "--yes")
            cli("stack", "rm", "s3-team", "--yes", env={**os.environ, **team})


def test_alice_reads_her_jupyter_token_with_her_own_credentials_and_no_other_secret(
    cli: Cli, kube: Kube, alice: Kube, tenants: dict[str, str]
) -> None:
    """The tenant stack exports where the token is, not the token; alice reads it herself."""
    where = cli.outputs(tenants["alice"])["jupyterTokenSecret"]
    mine = alice.get("secret", where["namespace"], where["name"])
    assert mine["data"][where["key"]] == kube.get("secret", where["namespace"], where["name"])["data"][where["key"]]
    assert not alice.can_i("list", "secrets", "-n", ALICE)  # that one Secret, by name
    assert not alice.can_i("get", "secrets/tfk8s-heketi-admin", "-n", ALICE)
    assert not alice.can_i("get", f"secrets/{where['name']}", "-n", BOB)


def test_alice_cannot_create_read_or_delete_anything_in_bobs_namespace(
    cli: Cli, kube: Kube, alice: Kube, tenants: dict[str, str]
) -> None:
    # The program refuses bob's experiment run with alice's credentials, naming her and the
    # namespace, before anything exists: she may not even read bob's contract.
    cli.init_experiment("iso-bob", tenant=tenants["bob"], settings=SMALL_CLUSTER)
    try:
        done = cli("up", "--stack", "iso-bob", "--yes", "--skip-preview", check=False, env=as_user(alice))
        text = done.stdout + done.stderr
        assert done.returncode != 0, text
        assert f"tfk8s:namespace: user 'alice' (groups {GROUP}) may not read the tenant contract in namespace " in text, text
        assert "'tfk8s-bob' (ConfigMap tfk8s-contract): it is not one of that tenant's identities" in text, text
        assert "nothing was changed" in text and "Traceback" not in text, text
        assert not kubernetes_objects(cli, "iso-bob")
        assert not [j for j in kube.get("jobs", BOB) if j["metadata"]["name"].startswith("iso-bob")]
    finally:
        cli("stack", "rm", "iso-bob", "--yes", "--force")

    # The API server refuses the same objects to her: every kind tfk8s creates there, every verb.
    for kind in (*KINDS, layout_resource(kube)):
        for verb in ("create", "get", "list", "delete", "patch"):
            assert not alice.can_i(verb, kind, "-n", BOB), (verb, kind)
    assert not alice.can_i("get", "namespace", BOB)
    assert alice.can_i("create", "jobs.batch", "-n", ALICE)  # her own namespace: what experiments need
    assert not alice.can_i("get", "secrets", "-n", ALICE)  # and not more: no Secrets, not even her own
    assert not alice.can_i("create", "jobs.batch", "-n", "default")
    for attempt in (
        ("create", "configmap", "stolen", "-n", BOB),
        ("get", "secrets", "-n", BOB),
        ("delete", "pvc", "tfk8s-data", "-n", BOB),
    ):
        done = subprocess.run([alice.binary, "--kubeconfig", str(alice.kubeconfig), *attempt], capture_output=True, text=True)
        assert done.returncode != 0 and "forbidden" in done.stderr.lower(), (attempt, done.stderr)
    assert sorted(c["metadata"]["name"] for c in kube.get("pvc", BOB)) == ["tfk8s-data", "tfk8s-log"]


def snapshot(kube: Kube, namespace: str) -> dict[str, str]:
    kinds = ("deployments", "jobs", "services", "configmaps", "pvc", "resourcequotas", layout_resource(kube))
    return {
        f"{kind}/{o['metadata']['name']}": f"{o['metadata']['uid']}@{o['metadata']['resourceVersion']}"
        for kind in kinds
        for o in kube.get(kind, namespace)
    }


def test_a_second_experiment_over_the_tenants_quota_is_refused_and_the_first_is_untouched(
    cli: Cli, kube: Kube, platform: str
) -> None:
    """frank's quota is 4 CPUs: his Jupyter and TensorBoard take 2.1 (the container default of one
    each, and TensorBoard's token gate 100m), his first experiment 1.5 (a 500m PS, two 500m workers),
    so a second of 1.5 does not fit."""
    tenant, namespace = "tenant-frank", "tfk8s-frank"
    cli.init_tenant(
        tenant,
        platform=platform,
        user="frank",
        settings={"tfk8s:tenant.quota.cpu": "4", "tfk8s:tenant.volumes.keepOnDestroy": "false"},
    )
    try:
        cli("up", "--stack", tenant, "--yes", "--skip-preview")
        cli.init_experiment("quota-1", tenant=tenant, settings=SMALL_CLUSTER)
        cli("up", "--stack", "quota-1", "--yes", "--skip-preview")
        assert cli.outputs("quota-1")["ready"] is True
        # The quota controller's recount, from its informers' caches, can write a lower usage than
        # the admission's own count for a moment (3100m, one pod short: the quick start, 2026-11-30).
        used = wait_until(lambda: _cpu_used(kube, namespace) == "3600m" or None, "the quota to count 3600m", 30)
        assert used, _cpu_used(kube, namespace)
        before = snapshot(kube, namespace)

        cli.init_experiment("quota-2", tenant=tenant, settings=SMALL_CLUSTER)
        done = cli("preview", "--stack", "quota-2", check=False)
        text = done.stdout + done.stderr
        assert done.returncode != 0, text
        assert "the experiment asks cpu 1.5" in text and "tenant frank's quota has 0.4 of 4 left (used 3.6)" in text, text
        assert "tfk8s:tenant.quota.cpu" in text and "Traceback" not in text, text
        assert snapshot(kube, namespace) == before
        assert not kubernetes_objects(cli, "quota-2")
        cli("stack", "rm", "quota-2", "--yes", "--force")
        cli("destroy", "--stack", "quota-1", "--yes")
        cli("stack", "rm", "quota-1", "--yes")
    finally:
        cli("destroy", "--stack", tenant, "--yes")
        cli("stack", "rm", tenant, "--yes")


def _cpu_used(kube: Kube, namespace: str) -> str | None:
    return kube.get("resourcequota", namespace, "tfk8s-quota").get("status", {}).get("used", {}).get("requests.cpu")
