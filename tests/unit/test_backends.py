"""The storage backend table (tfk8s.specs.backends): complete, consistent, and the messages it words."""

from __future__ import annotations

from typing import get_args

import pytest
from tfk8s.settings.stack_file import SECRET_KEYS
from tfk8s.settings.storage import CsiSettings, GlusterfsSettings, StorageBackend, StorageSettings
from tfk8s.specs import backends

# One valid setting per backend, as check_platform would let through.
SAMPLES = {
    "local": StorageSettings(backend="local"),
    "csi": StorageSettings(backend="csi", csi=CsiSettings(provisioner="nfs.csi.k8s.io")),
    "glusterfs": StorageSettings(backend="glusterfs", glusterfs=GlusterfsSettings(rest_url="http://heketi:8080")),
    "existing": StorageSettings(backend="existing", class_name="cephfs"),
}


def test_the_table_has_exactly_the_backends_the_schema_accepts() -> None:
    assert set(backends.BACKENDS) == set(get_args(StorageBackend)) == set(SAMPLES)


def test_a_table_missing_a_backend_is_refused_on_import() -> None:
    partial = {name: b for name, b in backends.BACKENDS.items() if name != "csi"}
    with pytest.raises(TypeError, match="do not match tfk8s.settings.storage.StorageBackend"):
        backends._complete(partial)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_claims_wait_for_bound_only_on_classes_the_platform_creates_binding_immediately(name: str) -> None:
    backend = backends.BACKENDS[name]  # type: ignore[index]
    if backend.claims_await_bound:
        assert backend.class_spec is not None
        assert backend.class_spec(SAMPLES[name]).volume_binding_mode == "Immediate"


@pytest.mark.parametrize(
    ("storage", "scratch"),
    [
        (SAMPLES["local"], None),
        (SAMPLES["csi"], "tfk8s-shared-scratch"),
        (SAMPLES["csi"].model_copy(update={"scratch_class_name": "fast"}), "fast"),
        (SAMPLES["glusterfs"], "tfk8s-shared-scratch"),
        (SAMPLES["existing"], None),
        (SAMPLES["existing"].model_copy(update={"scratch_class_name": "cephfs-tmp"}), "cephfs-tmp"),
    ],
    ids=["local", "csi", "csi-named", "glusterfs", "existing", "existing-named"],
)
def test_the_scratch_class_each_backend_offers(storage: StorageSettings, scratch: str | None) -> None:
    assert backends.scratch_class(storage) == scratch


def test_only_glusterfs_needs_a_secret_and_its_key_stays_out_of_the_settings() -> None:
    assert {name for name, b in backends.BACKENDS.items() if b.secret is not None} == {"glusterfs"}
    assert SECRET_KEYS == {"heketiAdminKey", "jupyterToken"}


def test_the_backends_named_in_messages_read_as_before() -> None:
    assert backends.scratchless_platforms() == "'local', or 'existing' without scratchClassName"
    storage = SAMPLES["existing"].model_copy(update={"scratch_class_name": "cephfs-tmp"})
    missing = backends.missing_classes(storage, lambda path: None, "tfk8s:platform.storage")
    assert missing == [
        f"tfk8s:platform.storage.{key}: backend 'existing' uses class {name!r}, which the cluster does not have: "
        "create it, name one `kubectl get storageclass` lists, or choose backend local, csi or glusterfs"
        for key, name in (("className", "cephfs"), ("scratchClassName", "cephfs-tmp"))
    ]
    assert backends.missing_classes(SAMPLES["csi"], lambda path: None, "tfk8s:platform.storage") == []


def test_the_glusterfs_removal_message_reads_as_before() -> None:
    (problem,) = backends.problems(SAMPLES["glusterfs"], (1, 34), "tfk8s:platform.storage")
    assert problem == (
        "tfk8s:platform.storage.backend: 'glusterfs' uses the in-tree kubernetes.io/glusterfs provisioner, removed in "
        "Kubernetes 1.26; the cluster is 1.34. Fix: use backend 'csi' with a Gluster/NFS/CephFS CSI driver (e.g. Kadalu, "
        "nfs.csi.k8s.io) or 'existing' with a class your cluster already has"
    )
    assert backends.problems(SAMPLES["glusterfs"], (1, 25), "tfk8s:platform.storage") == []
