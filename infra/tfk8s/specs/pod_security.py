"""What makes a tfk8s pod pass the `restricted` Pod Security Standard, and the namespace labels that
enforce it (pure: plain dicts in Kubernetes' own camelCase, no Pulumi calls).

Every pod builder (tfk8s.specs.pods for the training pods, tfk8s.components.user_env for Jupyter and TensorBoard)
takes its securityContexts from here, so one place says what `restricted` is given: a non-root
identity (tfk8s.settings.platform.PodIdentity), the runtime's default seccomp profile, no privilege
escalation, no capabilities. A read-only root filesystem is not required by `restricted`; the
containers that can have one get it, and `/tmp` (their HOME too) as an emptyDir to write in.
"""

from __future__ import annotations

from typing import Any

from tfk8s.settings.platform import PodIdentity

Json = dict[str, Any]

LEVEL = "restricted"
PSA_LABEL_PREFIX = "pod-security.kubernetes.io"
# enforce refuses a pod that does not pass; warn tells the client (kubectl, Pulumi) why; audit
# records it in the API server's audit log. All three at one level, so they never disagree.
PSA_MODES = ("enforce", "warn", "audit")

TMP_VOLUME = "tmp"
TMP_DIR = "/tmp"


def namespace_labels(kubernetes_version: tuple[int, int]) -> dict[str, str]:
    """Pod Security Admission labels: `restricted`, pinned to the platform's Kubernetes version (GA
    since 1.25, every version tfk8s supports). Pinned, not `latest`: a later API server that
    tightens the profile does not start refusing pods before the platform is applied again."""
    major, minor = kubernetes_version
    version = f"v{major}.{minor}"
    labels: dict[str, str] = {}
    for mode in PSA_MODES:
        labels[f"{PSA_LABEL_PREFIX}/{mode}"] = LEVEL
        labels[f"{PSA_LABEL_PREFIX}/{mode}-version"] = version
    return labels


def pod_security_context(identity: PodIdentity) -> Json:
    """The pod-level half: who every container runs as, and the runtime's default seccomp profile
    (`restricted` accepts it here for all containers at once)."""
    return {
        "runAsNonRoot": True,
        "runAsUser": identity.run_as_user,
        "runAsGroup": identity.run_as_group,
        "fsGroup": identity.fs_group,
        # Change volumes' group only when their root does not have it yet: a recursive chown of a
        # large data set at every pod start would delay the pod by as long as it takes.
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context(*, read_only_root: bool) -> Json:
    """The container-level half, the same for every container and init container. `read_only_root`:
    whether its process can run with a read-only root filesystem (see `writable_tmp_*` for what it
    may write instead)."""
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "readOnlyRootFilesystem": read_only_root,
    }


# A container with a read-only root filesystem still needs somewhere to write: Python, TensorFlow
# and Keras put temporary files under /tmp and caches under $HOME (which is "/" for a UID the image
# does not know). Both go to one emptyDir, which lives as long as the pod. It is bounded, like every
# emptyDir in a tenant's namespace (tfk8s.components.tenant_admission): node-local disk is shared by every
# tenant's pods on the node, and the kubelet evicts a pod whose emptyDir outgrows its sizeLimit.
TMP_SIZE_LIMIT = "2Gi"
# The code a URL fetcher downloads: one script.
CODE_SIZE_LIMIT = "256Mi"


def writable_tmp_volume() -> Json:
    return {"name": TMP_VOLUME, "emptyDir": {"sizeLimit": TMP_SIZE_LIMIT}}


def writable_tmp_mount() -> Json:
    return {"name": TMP_VOLUME, "mountPath": TMP_DIR}


def home_in_tmp() -> Json:
    return {"name": "HOME", "value": TMP_DIR}
