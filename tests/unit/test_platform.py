"""Platform pieces: storage backends, data retention, the User Node, Jupyter and TensorBoard."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pulumi
import pytest
from conftest import Deployment, run_program
from test_training_cluster import DEPLOYMENT, PVC, SERVICE, after, env_of, pod_labels, pod_spec

SECRET_SIG = "4dabf18193072939515e22adb298388d"  # how the engine marks a secret value on the wire


def unwrap_secret(value: Any) -> Any:
    """Return the plain value of a secret-marked input; fail if it was not marked secret."""
    assert isinstance(value, dict) and SECRET_SIG in value, f"not a secret: {value!r}"
    return value["value"]


SC, SECRET, PV = "kubernetes:storage.k8s.io/v1:StorageClass", "kubernetes:core/v1:Secret", "kubernetes:core/v1:PersistentVolume"


def app(d: Deployment, name: str) -> Any:
    (found,) = [r for r in d.mocks.of_type(DEPLOYMENT) if pod_labels(r)["app.kubernetes.io/name"] == name]
    return found


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
def test_glusterfs_class_reads_the_heketi_key_from_a_secret(dev_config: dict[str, Any]) -> None:
    d = run_program(glusterfs(dev_config), secrets={"heketiAdminKey": "s3cret-key"})

    def check() -> None:
        (sc,) = d.mocks.of_type(SC)
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
        assert not d.mocks.of_type(PV)  # dynamic provisioning: no static volumes

    return after(d, check)


def test_glusterfs_without_the_secret_key_fails_naming_it(dev_config: dict[str, Any]) -> None:
    with pytest.raises(Exception, match="heketiAdminKey"):

        @pulumi.runtime.test
        def declare() -> pulumi.Output[Any]:
            return run_program(glusterfs(dev_config)).components["readiness"]

        declare()


@pulumi.runtime.test
def test_csi_class_passes_provisioner_and_parameters(dev_config: dict[str, Any]) -> None:
    dev_config["platform"]["storage"] = {
        "backend": "csi",
        "className": "nfs",
        "csi": {"provisioner": "nfs.csi.k8s.io", "parameters": {"server": "nfs.local", "share": "/export"}},
    }
    d = run_program(dev_config)

    def check() -> None:
        (sc,) = d.mocks.of_type(SC)
        assert (sc.inputs["provisioner"], sc.inputs["parameters"]) == (
            "nfs.csi.k8s.io",
            {"server": "nfs.local", "share": "/export"},
        )
        assert {r.inputs["spec"]["storageClassName"] for r in d.mocks.of_type(PVC)} == {"nfs"}

    return after(d, check)


@pulumi.runtime.test
def test_existing_class_creates_no_storage_class(dev_config: dict[str, Any]) -> None:
    dev_config["platform"]["storage"] = {"backend": "existing", "className": "cephfs"}
    d = run_program(dev_config)

    def check() -> None:
        assert not d.mocks.of_type(SC)
        assert {r.inputs["spec"]["storageClassName"] for r in d.mocks.of_type(PVC)} == {"cephfs"}

    return after(d, check)


@pulumi.runtime.test
def test_local_backend_prebinds_one_volume_per_claim(dev_config: dict[str, Any]) -> None:
    d = run_program(dev_config)

    def check() -> None:
        (sc,) = d.mocks.of_type(SC)
        assert sc.inputs["provisioner"] == "kubernetes.io/no-provisioner"
        volumes = {r.inputs["spec"]["claimRef"]["name"]: r.inputs["spec"] for r in d.mocks.of_type(PV)}
        claims = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in d.mocks.of_type(PVC)}
        assert set(volumes) == set(claims) == {"mnist-data", "mnist-log"}
        for name, volume in volumes.items():
            assert volume["claimRef"]["namespace"] == "tfk8s-alice"
            assert volume["capacity"]["storage"] == claims[name]["resources"]["requests"]["storage"]
            assert volume["accessModes"] == ["ReadWriteMany"]
            assert volume["persistentVolumeReclaimPolicy"] == "Retain"
            assert volume["hostPath"]["path"] == f"/var/lib/tfk8s/tfk8s-alice/{name}"

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
    dev_config: dict[str, Any], storage: dict[str, Any], watched: bool
) -> None:
    """Our classes bind Immediately: watch for Bound. A class we did not create keeps the provider's
    own await, which accepts Pending for WaitForFirstConsumer (a Bound condition would hang there)."""
    dev_config["platform"]["storage"] = storage

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(dev_config)

        def check() -> None:
            claims = d.mocks.of_type(PVC)
            assert len(claims) == 2
            for pvc in claims:
                annotations = pvc.inputs["metadata"]["annotations"]
                assert annotations["pulumi.com/timeoutSeconds"] == "180"
                assert annotations.get("pulumi.com/waitFor") == ("jsonpath={.status.phase}=Bound" if watched else None)

        return after(d, check)

    run()


@pytest.mark.parametrize("keep", [True, False], ids=["keep", "delete"])
def test_data_survives_destroy_only_when_asked(dev_config: dict[str, Any], keep: bool) -> None:
    dev_config["users"][0]["clusters"][0]["volumes"]["keepOnDestroy"] = keep

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(dev_config)

        def check() -> None:
            kept = {key.split("::")[1] for key, opts in d.options.items() if opts.retain_on_delete}
            expected = {"alice", "alice-mnist-data", "alice-mnist-log", "alice-mnist-data-pv", "alice-mnist-log-pv"}
            assert kept == (expected if keep else set())

        return after(d, check)

    run()


@pulumi.runtime.test
def test_jupyter_token_is_a_secret_in_a_secret(dev_config: dict[str, Any]) -> None:
    d = run_program(dev_config)
    env = d.components["users"]["alice"]

    def check(is_secret: bool, token: str) -> None:
        assert is_secret, "the Jupyter token must be a secret output"
        (secret,) = [r for r in d.mocks.of_type(SECRET) if r.inputs.get("type") != "kubernetes.io/glusterfs"]
        data = secret.inputs["data"]
        stored = unwrap_secret(data["token"]) if SECRET_SIG not in data else unwrap_secret(data)["token"]
        assert base64.b64decode(stored).decode() == token and len(token) >= 32
        jupyter = app(d, "jupyter")
        (token_env,) = [e for e in pod_spec(jupyter)["containers"][0]["env"] if e["name"] == "JUPYTER_TOKEN"]
        assert "value" not in token_env and token_env["valueFrom"]["secretKeyRef"]["key"] == "token"
        assert token not in str(jupyter.inputs)

    async def secret_flag() -> bool:
        return await env.jupyter_token.is_secret()

    return pulumi.Output.all(pulumi.Output.from_input(secret_flag()), env.jupyter_token, d.components["readiness"]).apply(
        lambda a: check(a[0], a[1])
    )


@pulumi.runtime.test
def test_a_chosen_jupyter_token_is_applied_and_can_rotate(dev_config: dict[str, Any]) -> None:
    """tfk8s:jupyterTokens.alice (a config secret) becomes the Secret's value, without ignore_changes."""
    chosen = "alice-chose-this-token-0123"
    d = run_program(dev_config, secrets={"jupyterTokens": json.dumps({"alice": chosen})})
    env = d.components["users"]["alice"]

    def check(token: str) -> None:
        assert token == chosen
        (secret,) = [r for r in d.mocks.of_type(SECRET) if r.inputs.get("type") != "kubernetes.io/glusterfs"]
        data = secret.inputs["data"]
        stored = unwrap_secret(data["token"]) if SECRET_SIG not in data else unwrap_secret(data)["token"]
        assert base64.b64decode(stored).decode() == chosen
        (opts,) = [o for k, o in d.options.items() if k.endswith("alice-jupyter-token")]
        assert not opts.ignore_changes  # a changed token in the stack file rotates it

    return pulumi.Output.all(env.jupyter_token, d.components["readiness"]).apply(lambda a: check(a[0]))


@pulumi.runtime.test
def test_user_facing_services_are_nodeports_answering_on_the_user_node_only(dev_config: dict[str, Any]) -> None:
    d = run_program(dev_config)

    def check() -> None:
        node_ports = [r for r in d.mocks.of_type(SERVICE) if r.inputs["spec"].get("type") == "NodePort"]
        assert sorted(r.inputs["metadata"]["labels"]["app.kubernetes.io/name"] for r in node_ports) == ["jupyter", "tensorboard"]
        for service in node_ports:
            assert service.inputs["spec"]["externalTrafficPolicy"] == "Local"
            target = app(d, service.inputs["metadata"]["labels"]["app.kubernetes.io/name"])
            assert all(pod_labels(target).get(k) == v for k, v in service.inputs["spec"]["selector"].items())

    return after(d, check)


@pulumi.runtime.test
def test_tensorboard_reads_every_clusters_logs_read_only(dev_config: dict[str, Any]) -> None:
    second = copy.deepcopy(dev_config["users"][0]["clusters"][0])
    second["name"] = "cifar"
    dev_config["users"][0]["clusters"].append(second)
    d = run_program(dev_config)

    def check() -> None:
        tb = app(d, "tensorboard")
        spec = pod_spec(tb)
        command = spec["containers"][0]["command"]
        assert command[command.index("--logdir_spec") + 1] == "mnist:/logs/mnist,cifar:/logs/cifar"
        claims = {v["name"]: v["persistentVolumeClaim"] for v in spec["volumes"]}
        assert {c["claimName"] for c in claims.values()} == {"mnist-log", "cifar-log"}
        assert all(c["readOnly"] for c in claims.values())
        assert all(m["readOnly"] for m in spec["containers"][0]["volumeMounts"])

    return after(d, check)


@pulumi.runtime.test
def test_one_namespace_per_user(dev_config: dict[str, Any]) -> None:
    bob = copy.deepcopy(dev_config["users"][0])
    bob["name"] = "bob"
    dev_config["users"].append(bob)
    d = run_program(dev_config)

    def check() -> None:
        namespaces = sorted(r.inputs["metadata"]["name"] for r in d.mocks.of_type("kubernetes:core/v1:Namespace"))
        assert namespaces == ["tfk8s-alice", "tfk8s-bob"]
        for r in d.mocks.of_type(DEPLOYMENT):
            assert r.inputs["metadata"]["namespace"] == f"tfk8s-{pod_labels(r)['tfk8s.io/user']}"
        ps = [r for r in d.mocks.of_type(DEPLOYMENT) if pod_labels(r).get("tfk8s.io/role") == "ps"]
        assert sorted(env_of(r)["TFK8S_NAMESPACE"] or "" for r in ps) == ["", ""]  # from the downward API

    return after(d, check)
