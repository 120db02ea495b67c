"""A pull request's preview, with the preview identity's own token (`platform.gitops.previewIdentity`,
tfk8s.specs.preview_identity), on the real API server: what a pull request's code could do with
the credential the preview workflow holds.

The session's platform declares the identity, and every tenant binds its role in her namespace. With
a token of `system:serviceaccount:tfk8s-gitops:tfk8s-preview` alone, a new experiment's
`pulumi preview` runs and shows what it would create, and creates nothing; its `pulumi up` is
refused by the API server, naming the identity, and creates nothing; and kubectl with the same token
reads no Secret and no log, writes nothing but dry runs, impersonates no one, mints no token, sees
nothing outside tenants' namespaces, and meets the tenants' own admission rules.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from drivers import PREVIEW_ACCOUNT, PREVIEW_NAMESPACE, SMALL_CLUSTER, Cli, Kube, preview_kube

ALICE = "tfk8s-alice"
USER = f"system:serviceaccount:{PREVIEW_NAMESPACE}:{PREVIEW_ACCOUNT}"
EXPERIMENT = "pr-preview"


@pytest.fixture(scope="module")
def preview(kube: Kube, tenants: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    yield preview_kube(kube, tmp_path_factory.mktemp("preview"))
    kube.run("delete", "serviceaccount", PREVIEW_ACCOUNT, "-n", PREVIEW_NAMESPACE, "--ignore-not-found")


def as_preview(preview: Kube) -> dict[str, str]:
    return {**os.environ, "KUBECONFIG": str(preview.kubeconfig)}


def experiment_objects(kube: Kube) -> list[str]:
    """Every object of the experiment EXPERIMENT in alice's namespace, as kind/name."""
    found = kube.run(
        "get",
        "configmaps,services,deployments,jobs,networkpolicies",
        "-n",
        ALICE,
        "-l",
        f"tfk8s.io/experiment={EXPERIMENT}",
        "-o",
        "name",
    )
    return found.split()


def test_a_preview_runs_with_the_preview_identity_and_its_up_is_refused_creating_nothing(
    cli: Cli, kube: Kube, preview: Kube
) -> None:
    cli.init_experiment(EXPERIMENT, tenant="tenant-alice", settings=SMALL_CLUSTER)
    try:
        shown = cli("preview", "--stack", EXPERIMENT, "--diff", env=as_preview(preview), check=False)
        assert shown.returncode == 0, shown.stdout[-4000:] + shown.stderr[-2000:]
        assert "+ kubernetes:apps/v1:Deployment" in shown.stdout or "+ kubernetes:batch/v1:Job" in shown.stdout, shown.stdout[
            -3000:
        ]
        assert experiment_objects(kube) == []

        tried = cli("up", "--stack", EXPERIMENT, "--yes", "--skip-preview", env=as_preview(preview), check=False)
        assert tried.returncode != 0, tried.stdout[-3000:]
        said = tried.stdout + tried.stderr
        assert f"{USER}, the identity of pull requests' previews, may only dry-run" in said, said[-4000:]
        assert experiment_objects(kube) == []
    finally:
        cli("destroy", "--stack", EXPERIMENT, "--yes", "--skip-preview", check=False)
        cli("stack", "rm", EXPERIMENT, "--yes", "--force", check=False)


def test_its_token_reads_no_secret_or_log_and_writes_nothing_but_dry_runs(preview: Kube, kube: Kube) -> None:
    # RBAC: no Secret, no log, no exec, no one else's identity or token, nothing outside tenants' namespaces.
    assert not preview.can_i("get", "secrets", "-n", ALICE)
    assert not preview.can_i("list", "secrets", "--all-namespaces")
    assert not preview.can_i("get", "pods", "--subresource=log", "-n", ALICE)
    assert not preview.can_i("create", "pods", "--subresource=exec", "-n", ALICE)
    assert not preview.can_i("impersonate", "serviceaccounts", "-n", PREVIEW_NAMESPACE)
    assert not preview.can_i("create", "serviceaccounts", "--subresource=token", "-n", PREVIEW_NAMESPACE)
    assert not preview.can_i("get", "configmaps", "-n", "kube-system")
    assert not preview.can_i("create", "clusterrolebindings")
    assert preview.can_i("get", "configmaps", "-n", ALICE), "a preview reads what an experiment declares"
    refused = preview.attempt("get", "secrets", "-n", ALICE)
    assert refused.returncode != 0 and "forbidden" in refused.stderr, refused

    # Admission: RBAC lets it write what an experiment writes; the API server keeps it to dry runs.
    config_map = kube.run("create", "configmap", "pr-probe", "-n", ALICE, "--from-literal=a=b", "--dry-run=client", "-o", "yaml")
    dry = preview.attempt("create", "-f", "-", "--dry-run=server", stdin=config_map)
    assert dry.returncode == 0, dry.stderr
    real = preview.attempt("create", "-f", "-", stdin=config_map)
    assert real.returncode != 0 and "may only dry-run: CREATE of configmaps refused" in real.stderr, real.stderr
    assert "pr-probe" not in kube.run("get", "configmaps", "-n", ALICE, "-o", "name")
    kube.run("create", "configmap", "pr-target", "-n", ALICE, "--from-literal=a=b")  # no tenant stack's object
    try:
        assert preview.attempt("delete", "configmap", "pr-target", "-n", ALICE, "--dry-run=server").returncode == 0
        gone = preview.attempt("delete", "configmap", "pr-target", "-n", ALICE)
        assert gone.returncode != 0 and "may only dry-run: DELETE of configmaps refused" in gone.stderr, gone.stderr
        assert kube.get("configmap", ALICE, "pr-target")["data"] == {"a": "b"}
    finally:
        kube.run("delete", "configmap", "pr-target", "-n", ALICE, "--ignore-not-found")

    # The tenants' own rules bind it as they bind her: a NodePort is refused even as a dry run.
    node_port = kube.run("create", "service", "nodeport", "pr-probe", "-n", ALICE, "--tcp=8888", "--dry-run=client", "-o", "yaml")
    tenant_rule = preview.attempt("create", "-f", "-", "--dry-run=server", stdin=node_port)
    assert tenant_rule.returncode != 0 and "ValidatingAdmissionPolicy" in tenant_rule.stderr, tenant_rule.stderr
