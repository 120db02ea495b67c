"""The doctor's checks that only doing answers, each in the sandbox (tfk8s.doctor.sandbox) with a
time limit: Pod Security admission enforces, a ReadWriteMany claim is shared by two pods on two
nodes, and every image the platform names is pulled and started as its pods run it (the network's
checks: tfk8s.doctor.network_probe).

The probe pods run Python (every tfk8s image has it: TensorFlow, Jupyter, TensorBoard). A pod that
never ran leaves its check not proven, with the reason, never passed.
"""

from __future__ import annotations

import secrets

from tfk8s.doctor import node_reads
from tfk8s.doctor.findings import Finding, failed, not_proven, passed
from tfk8s.doctor.sandbox import Sandbox, python_command
from tfk8s.kube.api_error import KubeApiError
from tfk8s.kube.api_paths import PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM, POD, STORAGE_CLASS
from tfk8s.settings.platform import PlatformSettings, PodIdentity
from tfk8s.settings.storage import StorageSettings


def pod_security(sandbox: Sandbox, identity: PodIdentity, image: str) -> Finding:
    """A privileged pod, sent as a dry run into the sandbox (labelled `restricted`), must be refused."""
    body = sandbox.pod_body("privileged", image, ["true"], identity)
    container = body["spec"]["containers"][0]
    container["securityContext"] = {"privileged": True}
    body["spec"]["securityContext"] = {}
    try:
        sandbox.api.post(f"{POD.root}/namespaces/{sandbox.namespace}/{POD.plural}?dryRun=All", body)
    except KubeApiError as error:
        if error.status == 403 and "PodSecurity" in str(error):
            return passed(
                "pod-security", "a privileged pod in a namespace labelled restricted is refused by Pod Security admission"
            )
        return not_proven("pod-security", f"the dry run was refused for another reason: {error}")
    return failed(
        "pod-security",
        "a privileged pod in a namespace labelled pod-security.kubernetes.io/enforce: restricted was accepted",
        "enable the PodSecurity admission plugin (on by default since 1.25; check kube-apiserver "
        "--disable-admission-plugins and any admission configuration exempting namespaces)",
    )


def images(sandbox: Sandbox, settings: PlatformSettings, timeout: float) -> list[Finding]:
    """Every image the platform names, pulled and started as its pods start it: `restricted`, non-root, Python."""
    wanted = {
        settings.images.tensorflow: settings.pod_security.tensorflow,
        settings.images.tensorboard: settings.pod_security.tensorflow,
        settings.images.jupyter: settings.pod_security.jupyter,
    }
    bodies = [
        sandbox.pod_body(f"image-{number}", image, python_command("print('ok')"), identity)
        for number, (image, identity) in enumerate(wanted.items())
    ]
    findings = []
    for (image, identity), outcome in zip(wanted.items(), sandbox.run_pods(bodies, timeout), strict=True):
        check = f"image:{image}"
        if outcome.finished and outcome.exit_code == 0:
            findings.append(passed(check, f"pulled and ran Python as uid {identity.run_as_user} on node {outcome.node}"))
        elif outcome.finished:
            findings.append(
                failed(check, f"started, and `python3` exited {outcome.exit_code}", "use an image with python3 on its PATH")
            )
        elif outcome.stuck:
            findings.append(failed(check, outcome.why, outcome.fix or ""))
        else:
            findings.append(not_proven(check, outcome.why))
    return findings


def shared_volume(sandbox: Sandbox, settings: PlatformSettings, nodes: node_reads.Nodes, timeout: float) -> Finding:
    """A ReadWriteMany claim of the platform's class: a file one pod writes on one node, another reads on another."""
    store = settings.storage
    check = "rwx-two-nodes"
    if store.backend == "local":
        return not_proven(
            check,
            f"backend local: the volumes are directories of one node ({store.local.host_path_root}); two nodes do not share them",
            "for training on more than one node use backend csi (NFS, CephFS) or existing",
        )
    if store.backend == "glusterfs":
        return not_proven(check, "backend glusterfs: a probe needs the platform's Heketi secret, which the doctor does not read")
    usable = [node_reads.name_of(n) for n in nodes if node_reads.eligible(n, sandbox.placement)]
    if len(usable) < 2:
        return not_proven(
            check,
            f"{len(usable)} node(s) match the probes' placement; two are needed",
            "give --node-selector and --toleration that match two nodes",
        )
    class_name = _shared_claim(sandbox, store)
    token = secrets.token_hex(8)
    identity = settings.pod_security.tensorflow
    image = settings.images.tensorflow
    write = f"open('/shared/{token}', 'w').write('{token}')"
    writer = sandbox.run_pod(
        sandbox.pod_body("writer", image, python_command(write), identity, node=usable[0], volumes=[("shared", "/shared")]),
        timeout,
    )
    _retain_cleanup(sandbox)
    if not writer.finished or writer.exit_code != 0:
        why = writer.why or f"it exited {writer.exit_code}: uid {identity.run_as_user} may not write to the volume"
        return failed(
            check,
            f"a pod on {usable[0]} could not write to a ReadWriteMany claim of class {class_name!r}: {why}",
            _volume_fix(store.backend),
        )
    read = f"import sys; sys.exit(open('/shared/{token}').read() != '{token}')"
    reader = sandbox.run_pod(
        sandbox.pod_body("reader", image, python_command(read), identity, node=usable[1], volumes=[("shared", "/shared")]),
        timeout,
    )
    if reader.finished and reader.exit_code == 0:
        return passed(check, f"a file written on {usable[0]} was read on {usable[1]} through one claim of class {class_name!r}")
    why = reader.why or f"it exited {reader.exit_code}"
    return failed(check, f"a pod on {usable[1]} did not read the file written on {usable[0]}: {why}", _volume_fix(store.backend))


def _shared_claim(sandbox: Sandbox, store: StorageSettings) -> str:
    """A ReadWriteMany claim `shared` in the sandbox, of the platform's class (for csi, a class of
    the sandbox's own with the platform's provisioner and parameters, deleted with it); its class."""
    if store.backend == "csi" and store.csi is not None:
        made = sandbox.create(
            STORAGE_CLASS,
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": sandbox.namespace, "labels": {"app.kubernetes.io/managed-by": "tfk8s-doctor"}},
                "provisioner": store.csi.provisioner,
                "parameters": dict(store.csi.parameters),
                "reclaimPolicy": "Delete",
            },
        )
        class_name = str(made["metadata"]["name"])
    else:
        class_name = store.class_name
    sandbox.create(
        PERSISTENT_VOLUME_CLAIM,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "shared"},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": class_name,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )
    return class_name


def _retain_cleanup(sandbox: Sandbox) -> None:
    """The claim's volume, deleted with the sandbox when its class would retain it."""
    claim = sandbox.api.get(PERSISTENT_VOLUME_CLAIM.path("shared", sandbox.namespace)) or {}
    volume = (claim.get("spec") or {}).get("volumeName")
    if volume:
        sandbox.cluster_objects.append(PERSISTENT_VOLUME.path(volume))


def _volume_fix(backend: str) -> str:
    return "use a class whose volumes are ReadWriteMany across nodes and writable by the pods' group (fsGroup): " + (
        "check the CSI driver's parameters and its NFS export or CephFS permissions"
        if backend == "csi"
        else "check the class's provisioner"
    )
