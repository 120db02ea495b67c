"""Platform and tenant pieces: storage backends, data retention, the User Node, a tenant's Jupyter and TensorBoard."""

from __future__ import annotations

import base64
from typing import Any

import pulumi
import pytest
from mocked_program import (
    DEPLOYMENT,
    PVC,
    SERVICE,
    TEST_GROUP,
    Deployment,
    after,
    declared_types,
    env_of,
    facts_for,
    pod_labels,
    pod_spec,
    run_program,
)
from tfk8s.errors import ConfigError

SECRET_SIG = "4dabf18193072939515e22adb298388d"  # how the engine marks a secret value on the wire


def unwrap_secret(value: Any) -> Any:
    """Return the plain value of a secret-marked input; fail if it was not marked secret."""
    assert isinstance(value, dict) and SECRET_SIG in value, f"not a secret: {value!r}"
    return value["value"]


SC, SECRET, PV = "kubernetes:storage.k8s.io/v1:StorageClass", "kubernetes:core/v1:Secret", "kubernetes:core/v1:PersistentVolume"


def app(d: Deployment, name: str, user: str = "alice") -> Any:
    (found,) = [
        r
        for r in d.mocks.of_type(DEPLOYMENT)
        if pod_labels(r)["app.kubernetes.io/name"] == name and pod_labels(r)["tfk8s.io/user"] == user
    ]
    return found


def classes_by_name(d: Deployment) -> dict[str, Any]:
    return {r.inputs["metadata"]["name"]: r for r in d.mocks.of_type(SC)}


def after_with_facts(d: Deployment, check: Any) -> pulumi.Output[Any]:
    """`after`, with the platform's published `platform` output handed to `check`."""
    return pulumi.Output.from_input(d.components["platform"]).apply(lambda facts: after(d, lambda: check(facts)))


def glusterfs(raw: dict[str, Any]) -> dict[str, Any]:
    raw["platform"].update(
        kubernetesVersion="1.25",
        storage={
            "backend": "glusterfs",
            "className": "glusterfs",
            "glusterfs": {
                "restUrl": "http://heketi:8080",
                "clusterId": "abc123",
                "volumeType": "replicate:2",
                "secretNamespace": "storage",
            },
        },
    )
    return raw


@pulumi.runtime.test
def test_glusterfs_class_reads_the_heketi_key_from_a_secret(platform_config: dict[str, Any]) -> None:
    d = run_program(glusterfs(platform_config), secrets={"heketiAdminKey": "s3cret-key"})

    def check(facts: dict[str, Any]) -> None:
        classes = classes_by_name(d)
        assert set(classes) == {"glusterfs", "glusterfs-scratch"}
        sc = classes["glusterfs"]
        (secret,) = [r for r in d.mocks.of_type(SECRET) if r.inputs.get("type") == "kubernetes.io/glusterfs"]
        assert sc.inputs["provisioner"] == "kubernetes.io/glusterfs"
        assert sc.inputs["parameters"] == {
            "resturl": "http://heketi:8080",
            "restuser": "admin",
            "clusterid": "abc123",
            "volumetype": "replicate:2",
            "secretNamespace": "storage",
            "secretName": secret.inputs["metadata"]["name"],
            "gidMin": "2000",
            "gidMax": "2147483647",
        }
        assert secret.inputs["metadata"]["namespace"] == "storage"
        assert unwrap_secret(secret.inputs["stringData"]) == {"key": "s3cret-key"}
        assert sc.inputs["reclaimPolicy"] == "Retain"
        # Experiments' scratch volumes: the same provisioner through the same key, deleted with their claims.
        scratch = classes["glusterfs-scratch"]
        assert (scratch.inputs["provisioner"], scratch.inputs["parameters"]) == (
            sc.inputs["provisioner"],
            sc.inputs["parameters"],
        )
        assert scratch.inputs["reclaimPolicy"] == "Delete"
        assert not d.mocks.of_type(PV)  # dynamic provisioning: no static volumes
        assert facts["scratchStorageClass"] == "glusterfs-scratch"

    return after_with_facts(d, check)


@pytest.mark.parametrize("namespace", ["storage", "kube-system"])
def test_the_heketi_key_lives_in_a_namespace_of_its_own_where_nothing_runs(
    platform_config: dict[str, Any], namespace: str
) -> None:
    """Tenants' roles are namespaced, and this namespace is no tenant's: restricted, a quota of no
    pods, no traffic. A built-in namespace is used as it is, never owned."""
    raw = glusterfs(platform_config)
    raw["platform"]["storage"]["glusterfs"]["secretNamespace"] = namespace

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(raw, secrets={"heketiAdminKey": "s3cret-key"})

        def check() -> None:
            (secret,) = [r for r in d.mocks.of_type(SECRET) if r.inputs.get("type") == "kubernetes.io/glusterfs"]
            assert secret.inputs["metadata"]["namespace"] == namespace
            namespaces = d.mocks.of_type("kubernetes:core/v1:Namespace")
            if namespace == "kube-system":
                assert namespaces == []
                return
            (created,) = namespaces
            assert created.inputs["metadata"]["name"] == "storage"
            assert created.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
            (quota,) = d.mocks.of_type("kubernetes:core/v1:ResourceQuota")
            assert (quota.inputs["metadata"]["namespace"], quota.inputs["spec"]) == ("storage", {"hard": {"pods": "0"}})
            (deny,) = d.mocks.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
            assert deny.inputs["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}

        return after(d, check)

    run()


def test_glusterfs_without_the_secret_key_fails_naming_it_before_any_resource(platform_config: dict[str, Any]) -> None:
    with declared_types() as declared:
        with pytest.raises(ConfigError, match=r"tfk8s:heketiAdminKey: backend 'glusterfs' needs it .*config set --secret"):
            run_program(glusterfs(platform_config))
    assert declared == []


@pulumi.runtime.test
def test_csi_class_passes_provisioner_and_parameters(platform_config: dict[str, Any]) -> None:
    platform_config["platform"]["storage"] = {
        "backend": "csi",
        "className": "nfs",
        "csi": {"provisioner": "nfs.csi.k8s.io", "parameters": {"server": "nfs.local", "share": "/export"}},
    }
    d = run_program(platform_config)

    def check() -> None:
        classes = classes_by_name(d)
        assert set(classes) == {"nfs", "nfs-scratch"}
        for sc in classes.values():
            assert (sc.inputs["provisioner"], sc.inputs["parameters"]) == (
                "nfs.csi.k8s.io",
                {"server": "nfs.local", "share": "/export"},
            )
        assert (classes["nfs"].inputs["reclaimPolicy"], classes["nfs-scratch"].inputs["reclaimPolicy"]) == ("Retain", "Delete")
        assert not d.mocks.of_type(PVC)  # the platform creates no claim: tenants do

    return after(d, check)


@pytest.mark.parametrize(
    ("storage", "class_name"),
    [
        ({"backend": "csi", "className": "nfs", "csi": {"provisioner": "nfs.csi.k8s.io"}}, "nfs"),
        ({"backend": "existing", "className": "cephfs", "scratchClassName": "cephfs-tmp"}, "cephfs"),
    ],
    ids=["csi", "existing"],
)
def test_a_tenants_claims_are_in_its_platforms_shared_class_only(
    platform_config: dict[str, Any], tenant_config: dict[str, Any], storage: dict[str, Any], class_name: str
) -> None:
    """Never in the scratch class, which is the experiments' (deleted with their claims)."""
    platform_config["platform"]["storage"] = storage

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(tenant_config, platform=facts_for(platform_config))

        def check() -> None:
            assert {r.inputs["spec"]["storageClassName"] for r in d.mocks.of_type(PVC)} == {class_name}
            assert not d.mocks.of_type(SC) and not d.mocks.of_type(PV)  # dynamic: the class provisions

        return after(d, check)

    run()


@pulumi.runtime.test
def test_existing_class_creates_no_storage_class(platform_config: dict[str, Any]) -> None:
    platform_config["platform"]["storage"] = {"backend": "existing", "className": "cephfs"}
    d = run_program(platform_config)

    def check(facts: dict[str, Any]) -> None:
        assert not d.mocks.of_type(SC)
        assert facts["storageClass"] == "cephfs"
        assert facts["scratchStorageClass"] is None  # no scratchClassName: no scratch volumes

    return after_with_facts(d, check)


@pulumi.runtime.test
def test_an_existing_scratch_class_is_published_and_not_created(platform_config: dict[str, Any]) -> None:
    platform_config["platform"]["storage"] = {"backend": "existing", "className": "cephfs", "scratchClassName": "cephfs-tmp"}
    d = run_program(platform_config)

    def check(facts: dict[str, Any]) -> None:
        assert not d.mocks.of_type(SC)
        assert facts["scratchStorageClass"] == "cephfs-tmp"

    return after_with_facts(d, check)


@pulumi.runtime.test
def test_a_named_scratch_class_is_created_under_that_name(platform_config: dict[str, Any]) -> None:
    platform_config["platform"]["storage"] = {
        "backend": "csi",
        "className": "nfs",
        "scratchClassName": "nfs-tmp",
        "csi": {"provisioner": "nfs.csi.k8s.io"},
    }
    d = run_program(platform_config)

    def check(facts: dict[str, Any]) -> None:
        assert set(classes_by_name(d)) == {"nfs", "nfs-tmp"}
        assert facts["scratchStorageClass"] == "nfs-tmp"

    return after_with_facts(d, check)


@pulumi.runtime.test
def test_the_local_backend_offers_no_scratch_class(platform_config: dict[str, Any]) -> None:
    d = run_program(platform_config)  # the fixture's backend: local

    def check(facts: dict[str, Any]) -> None:
        assert set(classes_by_name(d)) == {platform_config["platform"]["storage"]["className"]}
        assert facts["scratchStorageClass"] is None

    return after_with_facts(d, check)


@pulumi.runtime.test
def test_the_local_backends_class_provisions_nothing(platform_config: dict[str, Any]) -> None:
    d = run_program(platform_config)

    def check() -> None:
        (sc,) = d.mocks.of_type(SC)
        assert sc.inputs["provisioner"] == "kubernetes.io/no-provisioner"
        assert not d.mocks.of_type(PV)  # the tenants prebind their own

    return after(d, check)


@pulumi.runtime.test
def test_local_backend_prebinds_one_volume_per_claim(tenant_config: dict[str, Any]) -> None:
    d = run_program(tenant_config)  # on platform-dev: backend local

    def check() -> None:
        assert not d.mocks.of_type(SC)
        volumes = {
            (v["claimRef"]["namespace"], v["claimRef"]["name"]): v for v in (r.inputs["spec"] for r in d.mocks.of_type(PV))
        }
        claims = {
            (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r.inputs["spec"] for r in d.mocks.of_type(PVC)
        }
        # Per tenant one data and one log volume, shared by all of its experiments.
        assert set(volumes) == set(claims) == {("tfk8s-alice", c) for c in ("tfk8s-data", "tfk8s-log")}
        for (namespace, name), volume in volumes.items():
            assert volume["capacity"]["storage"] == claims[namespace, name]["resources"]["requests"]["storage"] == "1Gi"
            assert volume["accessModes"] == ["ReadWriteMany"]
            assert volume["persistentVolumeReclaimPolicy"] == "Retain"
            assert volume["hostPath"]["path"] == f"/var/lib/tfk8s/{namespace}/{name}"

    return after(d, check)


@pytest.mark.parametrize(
    ("storage", "watched"),
    [
        ({"backend": "local"}, True),
        ({"backend": "csi", "className": "nfs", "csi": {"provisioner": "nfs.csi.k8s.io"}}, True),
        ({"backend": "existing", "className": "maybe-wait-for-first-consumer"}, False),
    ],
    ids=["local", "csi", "existing"],
)
def test_claims_of_our_immediate_classes_are_watched_until_bound(
    platform_config: dict[str, Any], tenant_config: dict[str, Any], storage: dict[str, Any], watched: bool
) -> None:
    """Our classes bind Immediately: watch for Bound. A class we did not create keeps the provider's
    own await, which accepts Pending for WaitForFirstConsumer (a Bound condition would hang there)."""
    platform_config["platform"]["storage"] = storage

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(tenant_config, platform=facts_for(platform_config))

        def check() -> None:
            claims = d.mocks.of_type(PVC)
            assert len(claims) == 2  # the tenant's data and log
            for pvc in claims:
                annotations = pvc.inputs["metadata"]["annotations"]
                assert annotations["pulumi.com/timeoutSeconds"] == "180"
                assert annotations.get("pulumi.com/waitFor") == ("jsonpath={.status.phase}=Bound" if watched else None)

        return after(d, check)

    run()


@pytest.mark.parametrize("keep", [True, False], ids=["keep", "delete"])
def test_data_survives_destroy_only_when_asked(tenant_config: dict[str, Any], keep: bool) -> None:
    tenant_config["tenant"]["volumes"]["keepOnDestroy"] = keep

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(tenant_config)

        def check() -> None:
            kept = {key.split("::")[1] for key, opts in d.options.items() if opts.retain_on_delete}
            expected = {f"alice{part}" for part in ("", "-data", "-log", "-data-pv", "-log-pv")}
            assert kept == (expected if keep else set())

        return after(d, check)

    run()


@pulumi.runtime.test
def test_jupyter_token_is_a_secret_in_a_secret(tenant_config: dict[str, Any]) -> None:
    d = run_program(tenant_config)
    env = d.components["user"]

    def check(is_secret: bool, token: str) -> None:
        assert is_secret, "the Jupyter token must be a secret output"
        (secret,) = [
            r
            for r in d.mocks.of_type(SECRET)
            if r.inputs.get("type") != "kubernetes.io/glusterfs" and r.inputs["metadata"]["namespace"] == "tfk8s-alice"
        ]
        data = secret.inputs["data"]
        stored = unwrap_secret(data["token"]) if SECRET_SIG not in data else unwrap_secret(data)["token"]
        assert base64.b64decode(stored).decode() == token and len(token) >= 32
        jupyter = app(d, "jupyter")
        spec = pod_spec(jupyter)
        (container,) = spec["containers"]
        env = {e["name"]: e for e in container["env"]}
        # Not an environment variable, which every kernel (the tenant's code) would inherit: a file of the Secret.
        assert "JUPYTER_TOKEN" not in env and not [e for e in env.values() if "valueFrom" in e]
        directory, _, file = env["JUPYTER_TOKEN_FILE"]["value"].rpartition("/")
        (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == directory]
        (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
        assert mount["readOnly"] and volume["secret"]["secretName"] == secret.inputs["metadata"]["name"]
        assert volume["secret"]["items"] == [{"key": "token", "path": file}]
        assert token not in str(jupyter.inputs)

    async def secret_flag() -> bool:
        return await env.jupyter_token.is_secret()

    return pulumi.Output.all(pulumi.Output.from_input(secret_flag()), env.jupyter_token, d.components["readiness"]).apply(
        lambda a: check(a[0], a[1])
    )


@pulumi.runtime.test
def test_the_tenants_people_may_read_their_token_secret_and_no_other(tenant_config: dict[str, Any]) -> None:
    """A stack others read (experiments read the tenant) exports nothing secret (tests/e2e/test_cli.py
    checks its outputs): the token's place is exported, and the tenant's identities may `get` that one Secret."""
    d = run_program(tenant_config)

    def check() -> None:
        (reader,) = [
            r for r in d.mocks.of_type("kubernetes:rbac.authorization.k8s.io/v1:Role") if r.name == "jupyter-token-reader"
        ]
        assert reader.inputs["rules"] == [
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["tfk8s-jupyter-token"]}
        ]
        (binding,) = [
            r for r in d.mocks.of_type("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding") if r.name == "jupyter-token-reader"
        ]
        assert binding.inputs["subjects"] == [
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
            {"kind": "ServiceAccount", "name": "tfk8s-dev", "namespace": "tfk8s-gitops"},  # GitOps's `dev`
        ]
        (secret,) = [r for r in d.mocks.of_type(SECRET) if r.inputs["metadata"].get("name") == "tfk8s-jupyter-token"]
        assert secret.inputs["metadata"]["namespace"] == "tfk8s-alice"

    return after(d, check)


@pulumi.runtime.test
def test_a_chosen_jupyter_token_is_applied_and_can_rotate(tenant_config: dict[str, Any]) -> None:
    """tfk8s:jupyterToken (a config secret) becomes the Secret's value, without ignore_changes."""
    chosen = "alice-chose-this-token-0123"
    d = run_program(tenant_config, secrets={"jupyterToken": chosen})
    env = d.components["user"]

    def check(token: str) -> None:
        assert token == chosen
        (secret,) = [
            r
            for r in d.mocks.of_type(SECRET)
            if r.inputs.get("type") != "kubernetes.io/glusterfs" and r.inputs["metadata"]["namespace"] == "tfk8s-alice"
        ]
        data = secret.inputs["data"]
        stored = unwrap_secret(data["token"]) if SECRET_SIG not in data else unwrap_secret(data)["token"]
        assert base64.b64decode(stored).decode() == chosen
        (opts,) = [o for k, o in d.options.items() if k.endswith("alice-jupyter-token")]
        assert not opts.ignore_changes  # a changed token in the stack file rotates it

    return pulumi.Output.all(env.jupyter_token, d.components["readiness"]).apply(lambda a: check(a[0]))


@pulumi.runtime.test
def test_user_facing_services_are_nodeports_answering_on_the_user_node_only(tenant_config: dict[str, Any]) -> None:
    d = run_program(tenant_config)

    def check() -> None:
        node_ports = [r for r in d.mocks.of_type(SERVICE) if r.inputs["spec"].get("type") == "NodePort"]
        names = sorted(r.inputs["metadata"]["labels"]["app.kubernetes.io/name"] for r in node_ports)
        assert names == ["jupyter", "tensorboard"]
        for service in node_ports:
            assert service.inputs["spec"]["externalTrafficPolicy"] == "Local"
            labels = service.inputs["metadata"]["labels"]
            target = app(d, labels["app.kubernetes.io/name"], labels["tfk8s.io/user"])
            assert all(pod_labels(target).get(k) == v for k, v in service.inputs["spec"]["selector"].items())

    return after(d, check)


@pulumi.runtime.test
def test_tensorboard_reads_the_users_whole_log_volume_read_only(tenant_config: dict[str, Any]) -> None:
    """Every run of every experiment (`<experiment>/<cluster>/...`), with no tenant redeploy per experiment."""
    d = run_program(tenant_config)

    def check() -> None:
        tensorboards = [r for r in d.mocks.of_type(DEPLOYMENT) if pod_labels(r)["app.kubernetes.io/name"] == "tensorboard"]
        assert len(tensorboards) == 1
        for tb in tensorboards:
            spec = pod_spec(tb)
            command = spec["containers"][0]["command"]
            assert command[command.index("--logdir") + 1] == "/logs"
            (volume, tmp, _trainer) = spec["volumes"]  # the trainer package: the token gate's code
            assert volume["persistentVolumeClaim"] == {"claimName": "tfk8s-log", "readOnly": True}
            assert tmp == {"name": "tmp", "emptyDir": {"sizeLimit": "2Gi"}}  # its read-only root's writable /tmp
            assert spec["containers"][0]["volumeMounts"] == [
                {"name": "log", "mountPath": "/logs", "readOnly": True},
                {"name": "tmp", "mountPath": "/tmp"},
            ]
            assert tb.inputs["metadata"]["namespace"] == f"tfk8s-{pod_labels(tb)['tfk8s.io/user']}"

    return after(d, check)


@pytest.mark.parametrize("gated", [True, False], ids=["token-gate", "opted-out"])
def test_tensorboard_answers_users_only_through_the_token_gate(
    platform_config: dict[str, Any], tenant_config: dict[str, Any], gated: bool
) -> None:
    """TensorBoard has no authentication: it listens on the pod's loopback and the Service reaches the
    gate, which reads the tenant's Jupyter token from the same Secret; unless the platform opts out."""
    platform_config["platform"]["tensorboardRequiresToken"] = gated

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(tenant_config, platform=facts_for(platform_config))

        def check() -> None:
            (tb,) = [r for r in d.mocks.of_type(DEPLOYMENT) if pod_labels(r)["app.kubernetes.io/name"] == "tensorboard"]
            (jupyter,) = [r for r in d.mocks.of_type(DEPLOYMENT) if pod_labels(r)["app.kubernetes.io/name"] == "jupyter"]
            containers = {c["name"]: c for c in pod_spec(tb)["containers"]}
            (service,) = [
                r
                for r in d.mocks.of_type(SERVICE)
                if r.inputs["spec"].get("type") == "NodePort" and r.name.endswith("tensorboard")
            ]
            (port,) = service.inputs["spec"]["ports"]
            serving = [c for c in containers.values() if any(p["name"] == port["targetPort"] for p in c["ports"])]
            command = containers["tensorboard"]["command"]
            if not gated:
                assert set(containers) == {"tensorboard"} and "--bind_all" in command
                assert [c["name"] for c in serving] == ["tensorboard"]
                return
            assert set(containers) == {"tensorboard", "token-gate"}
            assert command[command.index("--host") + 1] == "127.0.0.1" and "--bind_all" not in command
            # The Service reaches the gate alone, and the gate forwards to TensorBoard's loopback port.
            assert [c["name"] for c in serving] == ["token-gate"]
            gate = containers["token-gate"]
            args = gate["args"]
            assert args[args.index("--listen") + 1] == "6006"
            assert args[args.index("--backend") + 1] == f"127.0.0.1:{command[command.index('--port') + 1]}"
            assert args[args.index("--tenant") + 1] == "alice"  # the gate's cookie is alice's own
            # Progress and task logs (`tfk8s status`) from the log volume, read-only as TensorBoard reads it.
            assert args[args.index("--log-root") + 1] == "/logs"
            log = {"name": "log", "mountPath": "/logs", "readOnly": True}
            assert log in gate["volumeMounts"] and log in containers["tensorboard"]["volumeMounts"]
            token = {e["name"]: e for e in gate["env"]}["TFK8S_TOKEN"]["valueFrom"]["secretKeyRef"]
            (jupyter_token,) = [v["secret"] for v in pod_spec(jupyter)["volumes"] if "secret" in v]
            assert token == {"name": jupyter_token["secretName"], "key": jupyter_token["items"][0]["key"]}  # one credential
            assert all("resources" in c for c in containers.values())
            # The kubelet's httpGet and tcpSocket probes dial the pod's IP, where TensorBoard does not
            # listen: its readiness is asked from inside, on the loopback port it serves (a real node
            # found it never became Ready otherwise).
            probe = containers["tensorboard"]["readinessProbe"]
            assert set(probe) - {"periodSeconds", "timeoutSeconds"} == {"exec"}
            assert f"http://127.0.0.1:{command[command.index('--port') + 1]}/" in " ".join(probe["exec"]["command"])

        return after(d, check)

    run()


@pulumi.runtime.test
def test_jupyter_reads_layouts_and_nothing_else_and_mounts_the_users_volumes(tenant_config: dict[str, Any]) -> None:
    d = run_program(tenant_config)

    def check() -> None:
        jupyter = app(d, "jupyter", user="alice")
        spec = pod_spec(jupyter)
        account = spec["serviceAccountName"]
        assert spec["automountServiceAccountToken"] is True
        (binding,) = [
            r
            for r in d.mocks.of_type("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
            if r.inputs["metadata"]["namespace"] == "tfk8s-alice"
            and r.inputs["roleRef"]["kind"] == "Role"
            and r.inputs["subjects"][0]["kind"] == "ServiceAccount"  # not the people's token reader
        ]
        assert binding.inputs["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": "tfk8s-alice"}]
        (role,) = [
            r
            for r in d.mocks.of_type("kubernetes:rbac.authorization.k8s.io/v1:Role")
            if f"{r.name}-auto" == binding.inputs["roleRef"]["name"]
        ]
        # Only the platform's own Layouts: not ConfigMaps, not Secrets.
        group = TEST_GROUP
        assert role.inputs["rules"] == [{"apiGroups": [group], "resources": ["layouts"], "verbs": ["list"]}]
        assert env_of(jupyter)["TFK8S_LAYOUT_API"] == f"/apis/{group}/v1"
        claims = {v["name"]: v.get("persistentVolumeClaim") for v in spec["volumes"]}
        mounts = {m["mountPath"]: m for m in spec["containers"][0]["volumeMounts"]}
        assert claims[mounts["/data"]["name"]]["claimName"] == "tfk8s-data" and mounts["/data"]["readOnly"]
        assert claims[mounts["/logs"]["name"]]["claimName"] == "tfk8s-log" and not mounts["/logs"].get("readOnly")
        env = env_of(jupyter)
        assert (env["TFK8S_DATA_ROOT"], env["TFK8S_LOG_ROOT"]) == ("/data", "/logs")
        # The in-graph chief's address, as experiments name it in their cluster specs.
        (notebook,) = [
            r
            for r in d.mocks.of_type(SERVICE)
            if r.inputs["metadata"].get("name") == "jupyter-tf" and r.inputs["metadata"]["namespace"] == "tfk8s-alice"
        ]
        assert all(pod_labels(jupyter).get(k) == v for k, v in notebook.inputs["spec"]["selector"].items())
        # Every other user-facing pod runs without a token.
        assert pod_spec(app(d, "tensorboard", user="alice"))["automountServiceAccountToken"] is False

    return after(d, check)


@pulumi.runtime.test
def test_one_namespace_per_tenant_marked_with_the_owning_stack(tenant_config: dict[str, Any]) -> None:
    d = run_program(tenant_config)

    def check() -> None:
        namespaces = {r.inputs["metadata"]["name"]: r.inputs["metadata"] for r in d.mocks.of_type("kubernetes:core/v1:Namespace")}
        assert sorted(namespaces) == ["tfk8s-alice"]
        for meta in namespaces.values():
            assert meta["labels"]["tfk8s.io/stack"] == "tenant-alice" and meta["labels"]["tfk8s.io/stack-kind"] == "tenant"
            assert meta["annotations"]["tfk8s.io/owner"].startswith("organization/tfk8s/tenant-alice@")
        for r in d.mocks.of_type(DEPLOYMENT):
            assert r.inputs["metadata"]["namespace"] == f"tfk8s-{pod_labels(r)['tfk8s.io/user']}"
        # Every object the tenant creates carries the owner mark.
        for r in d.mocks.resources:
            if r.typ.startswith("kubernetes:"):
                assert (
                    r.inputs["metadata"]["annotations"]["tfk8s.io/owner"]
                    == namespaces["tfk8s-alice"]["annotations"]["tfk8s.io/owner"]
                ), r.name

    return after(d, check)


@pulumi.runtime.test
def test_every_object_the_platform_creates_is_marked_and_none_is_per_user(platform_config: dict[str, Any]) -> None:
    d = run_program(platform_config)

    def check() -> None:
        kinds = {r.typ for r in d.mocks.resources}
        assert not kinds & {"kubernetes:core/v1:Namespace", PVC, DEPLOYMENT, SERVICE, "kubernetes:core/v1:ResourceQuota"}
        owners = {
            r.inputs["metadata"]["annotations"]["tfk8s.io/owner"]
            for r in d.mocks.resources
            if r.typ.startswith("kubernetes:") and r.typ != "kubernetes:core/v1:NodePatch"  # a patch owns nothing
        }
        (owner,) = owners
        assert owner.startswith("organization/tfk8s/platform-dev@")

    return after(d, check)


@pulumi.runtime.test
def test_the_apps_urls_carry_their_node_ports_as_the_engine_returns_them(tenant_config: dict[str, Any]) -> Any:
    """The engine hands numbers back as JSON floats (the mocks too): a URL still names port 30000, not 30000.0."""
    d = run_program(tenant_config)

    def check(report: dict[str, Any]) -> None:
        for app in ("jupyter", "tensorboard"):
            url = report[app]["url"]
            assert url.startswith("http://10.0.0.10:") and url.endswith("/"), url
            assert url.removeprefix("http://10.0.0.10:").rstrip("/").isdigit(), url

    return d.components["readiness"].apply(check)
