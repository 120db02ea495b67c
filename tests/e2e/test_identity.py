"""A tenant's identity on the real API server: credentials of a user of our own, and what RBAC lets them do.

alice gets a client certificate the local cluster's CA signed (hack/cluster.sh user-kubeconfig), the
way a tenant's user arrives with credentials of their organisation: the API server knows her user
name and group, and RBAC grants her nothing until a binding does. Then the experimenter table
(tfk8s.specs.experimenter_rights), bound to her in one namespace, is exactly what `access.missing` finds there, through
the program's own client (tfk8s.kube.client.KubeApi), and nothing of it anywhere else.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from drivers import Kube, user_kube
from tfk8s.checks import access
from tfk8s.components import guard
from tfk8s.kube import client as kube_client
from tfk8s.kube.api_error import KubeApiError
from tfk8s.specs import experimenter_rights
from tfk8s_gitops import identity as gitops_identity

import toolenv

GRANTED, OTHER = "tfk8s-ident-granted", "tfk8s-ident-other"
GROUP = "tfk8s-users"
# Any platform's kind will do: a review asks about a resource whether or not it is served.
LAYOUTS = guard.layout_kind("ident.layouts.tfk8s.io")


@pytest.fixture(scope="module")
def alice(kube: Kube) -> Kube:
    return user_kube(kube, "alice", [GROUP])


@pytest.fixture(scope="module")
def namespaces(kube: Kube) -> Iterator[tuple[str, str]]:
    """Two scratch namespaces; deleted with everything the tests made in them."""
    kube.run("create", "namespace", GRANTED)
    kube.run("create", "namespace", OTHER)
    try:
        yield GRANTED, OTHER
    finally:
        kube.run("delete", "namespace", GRANTED, OTHER, "--wait=false", "--ignore-not-found")


def apply(kube: Kube, tmp_path: Path, *objects: dict[str, Any]) -> Path:
    """`kubectl apply` of `objects` (as the admin); returns the file, for `kubectl delete -f`."""
    manifest = tmp_path / f"objects-{len(list(tmp_path.iterdir()))}.json"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}))
    kube.run("apply", "-f", str(manifest))
    return manifest


def binding(kind: str, name: str, role_kind: str, namespace: str | None = None) -> dict[str, Any]:
    """A (Cluster)RoleBinding of `name` (a Role or ClusterRole of the same name) to user alice."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}],
    }


def test_the_api_server_knows_alice_by_her_certificate(alice: Kube) -> None:
    review = json.loads(alice.run("auth", "whoami", "-o", "json"))
    assert review["status"]["userInfo"]["username"] == "alice"
    assert GROUP in review["status"]["userInfo"]["groups"]


def test_alice_may_do_nothing_unbound(alice: Kube) -> None:
    with pytest.raises(subprocess.CalledProcessError) as refused:
        alice.run("get", "pods", "-n", "default")
    assert 'User "alice" cannot list resource "pods"' in refused.value.stderr and "Forbidden" in refused.value.stderr


def test_a_role_binding_grants_in_its_namespace_only(
    kube: Kube, alice: Kube, namespaces: tuple[str, str], tmp_path: Path
) -> None:
    granted, other = namespaces
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "ident-jobs", "namespace": granted},
        "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get"]}],
    }
    assert not alice.can_i("create", "jobs", "-n", granted)
    apply(kube, tmp_path, role, binding("RoleBinding", "ident-jobs", "Role", granted))
    assert alice.can_i("create", "jobs", "-n", granted)
    assert not alice.can_i("delete", "jobs", "-n", granted)
    assert not alice.can_i("create", "jobs", "-n", other)
    assert not alice.can_i("create", "jobs", "-n", "default")


def test_the_experimenter_table_is_what_the_access_check_finds(
    kube: Kube, alice: Kube, namespaces: tuple[str, str], tmp_path: Path
) -> None:
    granted, other = namespaces
    table = experimenter_rights.experimenter_rules(LAYOUTS)
    cluster_table = experimenter_rights.experimenter_cluster_rules("ident-scratch")
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "ident-experimenter", "namespace": granted},
        "rules": experimenter_rights.rules_for_role(table),
    }
    cluster_role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "ident-experimenter"},
        "rules": experimenter_rights.rules_for_role(cluster_table),
    }
    cluster_objects = apply(kube, tmp_path, cluster_role, binding("ClusterRoleBinding", "ident-experimenter", "ClusterRole"))
    try:
        apply(kube, tmp_path, role, binding("RoleBinding", "ident-experimenter", "Role", granted))
        server, user, cluster = kube_client.current_entries([yaml.safe_load(alice.kubeconfig.read_text())])
        assert server
        api = kube_client.KubeApi(server, cluster, user)
        requests: list[str] = []

        def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
            requests.append(path)
            return api.post(path, body)

        # The rules review lists the Role's rules as the server stores them: one request answers all.
        assert access.missing(post, granted, table) == []
        assert requests == [access.RULES_REVIEW]
        everything = [(p, verb) for p in table for verb in p.verbs]
        assert access.missing(post, other, table) == everything
        # Cluster-scoped, by name: the ClusterRole's class and no other.
        assert access.missing(post, granted, cluster_table) == []
        assert access.missing(post, granted, experimenter_rights.experimenter_cluster_rules("another-class")) != []
        identity = access.identity(api.post)
        assert identity == f"user 'alice' (groups {GROUP})"
        (message,) = access.refusals(access.missing(post, other, table), identity, other, "tfk8s:user")
        assert message.startswith(f"tfk8s:user: user 'alice' (groups {GROUP}) may not get namespaces; ")
        assert f"in namespace '{other}' ({len(table)} of the experimenter role's rules)" in message
        # `get` on namespaces in a RoleBinding's namespace is GET of that namespace, and of no other.
        assert alice.get("namespace", name=granted)["metadata"]["name"] == granted
        with pytest.raises(subprocess.CalledProcessError):
            alice.get("namespace", name=other)
    finally:
        kube.run("delete", "-f", str(cluster_objects), "--ignore-not-found")


def test_the_programs_client_asks_as_the_user_the_kubeconfig_impersonates(kube: Kube, tmp_path: Path) -> None:
    """The admin's kubeconfig with `as: alice` (what a pipeline acting for a tenant uses): the
    program's reads and reviews are hers, as the provider's requests will be, not the admin's."""
    document = yaml.safe_load(kube.kubeconfig.read_text())
    for entry in document["users"]:
        entry["user"].update({"as": "alice", "as-groups": [GROUP]})
    impersonating = tmp_path / "as-alice.kubeconfig"
    impersonating.write_text(yaml.safe_dump(document))
    api = kube_client.connect({"KUBECONFIG": str(impersonating)}, kubeconfig_in_config=False).api
    assert api is not None
    assert access.identity(api.post) == f"user 'alice' (groups {GROUP})"
    with pytest.raises(KubeApiError) as refused:
        api.get("/api/v1/namespaces/default/configmaps")
    assert refused.value.status == 403  # hers: the admin could
    assert kube.get("configmaps", "default") is not None


def test_the_pipeline_acts_as_an_experiments_own_account(kube: Kube, alice: Kube, tmp_path: Path) -> None:
    """GitOps runs an experiment as `system:serviceaccount:tfk8s-gitops:tfk8s-<stack>`: the
    pipeline's kubeconfig, flattened, impersonating it. The API server takes it for that account
    (with the groups it gives service accounts); a pipeline whose identity may not impersonate is
    refused before any Pulumi command, with the grant it needs, and nothing is written."""
    tools = {**os.environ, "PATH": f"{toolenv.BIN}{os.pathsep}{os.environ['PATH']}"}  # kubectl, as hack/gitops.sh has it
    made = gitops_identity.impersonating_kubeconfig({**tools, "KUBECONFIG": str(kube.kubeconfig)}, "exp-x", tmp_path)
    assert stat.S_IMODE(made.stat().st_mode) == 0o600
    review = json.loads(Kube(made).run("auth", "whoami", "-o", "json"))["status"]["userInfo"]
    assert review["username"] == "system:serviceaccount:tfk8s-gitops:tfk8s-exp-x"
    assert "system:serviceaccounts:tfk8s-gitops" in review["groups"]

    with pytest.raises(gitops_identity.ImpersonationError) as refused:
        gitops_identity.impersonating_kubeconfig({**tools, "KUBECONFIG": str(alice.kubeconfig)}, "exp-y", tmp_path)
    assert "may not impersonate system:serviceaccount:tfk8s-gitops:tfk8s-exp-y" in str(refused.value)
    assert "grant it the `impersonate` verb on serviceaccounts in namespace tfk8s-gitops" in str(refused.value)
    with pytest.raises(gitops_identity.ImpersonationError) as twice:
        gitops_identity.impersonating_kubeconfig({**tools, "KUBECONFIG": str(made)}, "exp-z", tmp_path)
    assert "already impersonates (as)" in str(twice.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kubeconfig.exp-x.json"]


def test_a_kubeconfig_whose_exec_plugin_prints_alices_certificate_is_alice(alice: Kube, tmp_path: Path) -> None:
    """An exec plugin (as EKS's or GKE's kubeconfigs have) run by the program's own client: the API
    server takes the credential it prints for alice's. Before, such a kubeconfig could not read its
    tenant's contract, so its experiments were refused."""
    document = yaml.safe_load(alice.kubeconfig.read_text())
    (entry,) = document["users"]
    mine = entry["user"]
    status = {
        "clientCertificateData": base64.b64decode(mine.pop("client-certificate-data")).decode(),
        "clientKeyData": base64.b64decode(mine.pop("client-key-data")).decode(),
    }
    printed = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}
    plugin = tmp_path / "credential-plugin"
    plugin.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(printed)}\nEOF\n")
    plugin.chmod(0o700)
    mine["exec"] = {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin), "interactionMode": "Never"}
    with_plugin = tmp_path / "exec.kubeconfig"
    with_plugin.write_text(yaml.safe_dump(document))
    api = kube_client.connect({**os.environ, "KUBECONFIG": str(with_plugin)}, kubeconfig_in_config=False).api
    assert api is not None
    assert access.identity(api.post) == f"user 'alice' (groups {GROUP})"
    assert "client-certificate-data" not in with_plugin.read_text()  # the credential came from the plugin
