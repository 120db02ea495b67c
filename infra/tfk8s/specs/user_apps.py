"""A tenant's Jupyter and TensorBoard as containers, a Deployment and a NodePort Service (pure); the
UserEnvironment declares them (tfk8s.components.user_env).

Both run on the User Node alone (they tolerate its taint and select its label) behind NodePort
Services with `externalTrafficPolicy: Local`. Names of objects not yet created (a ConfigMap, a
Secret, a service account) are passed in as they come: a name, or the Pulumi output of it.
"""

from __future__ import annotations

from typing import Any

from tfk8s.settings.contract import PlatformFacts
from tfk8s.settings.experiment import Resources
from tfk8s.settings.platform import TENSORBOARD_BACKEND_PORT, PodIdentity
from tfk8s.specs import app_sessions, pod_security, pods, quota
from tfk8s.specs.labels import selector_of
from tfk8s.specs.pods import TRAINER_DIR, TRAINER_PATH

# Where Jupyter mounts the user's volumes; layouts name directories relative to them.
NOTEBOOK_DATA_ROOT, NOTEBOOK_LOG_ROOT = "/data", "/logs"
# The volume of the component's trainer ConfigMap (tfk8s.components.user_env).
TRAINER_VOLUME = "tfk8s-train"


def trainer_mount() -> dict[str, Any]:
    """The trainer package's archive, for Jupyter and the gate, which import it from `PYTHONPATH`
    (TRAINER_PATH) as training pods do."""
    return {"name": TRAINER_VOLUME, "mountPath": TRAINER_DIR, "readOnly": True}


def loopback_probe(port: int) -> dict[str, Any]:
    """Ready once an HTTP server answers on the pod's loopback at `port`. The kubelet's own probes
    (httpGet, tcpSocket) dial the pod's IP, where a server behind the token gate never listens:
    this asks from inside the container (whose image has Python) instead."""
    ask = f"import urllib.request; urllib.request.urlopen('http://127.0.0.1:{port}/', timeout=4)"
    return {"exec": {"command": ["python", "-c", ask]}, "periodSeconds": 5, "timeoutSeconds": 5}


def jupyter_container(platform: PlatformFacts) -> dict[str, Any]:
    return {
        "name": "jupyter",
        "image": platform.images.jupyter,
        "env": [
            *app_sessions.jupyter_env(),
            # The docker-stacks images listen where JUPYTER_PORT says: the Service's and probe's port.
            {"name": "JUPYTER_PORT", "value": str(platform.ports.jupyter)},
            {"name": "PYTHONPATH", "value": TRAINER_PATH},
            {"name": "TFK8S_DATA_ROOT", "value": NOTEBOOK_DATA_ROOT},
            {"name": "TFK8S_LOG_ROOT", "value": NOTEBOOK_LOG_ROOT},
            {"name": "TFK8S_LAYOUT_API", "value": platform.layouts.api.root},
        ],
        "ports": [
            {"name": "http", "containerPort": platform.ports.jupyter},
            {"name": "grpc", "containerPort": platform.ports.tensorflow},
        ],
        "readinessProbe": {"httpGet": {"path": "/api", "port": "http"}, "periodSeconds": 5},
        # A writable root filesystem: Jupyter writes into its home (runtime files, ~/.local, pip
        # installs, the notebooks users save), which the image keeps on it. `restricted` does
        # not ask for a read-only root.
        "securityContext": pod_security.container_security_context(read_only_root=False),
        "volumeMounts": [
            {"name": "notebooks", "mountPath": "/home/jovyan/work/tfk8s", "readOnly": True},
            trainer_mount(),
            # Data read-only: data sets are shared by every experiment of the user.
            {"name": "data", "mountPath": NOTEBOOK_DATA_ROOT, "readOnly": True},
            # Logs writable: the notebook, as an in-graph chief, writes its run's results and done marker.
            {"name": "log", "mountPath": NOTEBOOK_LOG_ROOT},
            *app_sessions.jupyter_mounts(),
        ],
    }


def tensorboard_container(platform: PlatformFacts) -> dict[str, Any]:
    """TensorBoard over the whole log volume: every run of every experiment, named
    `<experiment>/<cluster>/...`. A read-only root filesystem: TensorBoard writes only temporary
    files, in /tmp (its HOME). TensorBoard has no authentication: gated, it listens on the pod's
    loopback alone and the gate in front of it (`token_gate`) asks for the tenant's token."""
    gated = platform.tensorboard_requires_token
    listen = (
        ["--host", "127.0.0.1", "--port", str(TENSORBOARD_BACKEND_PORT)]
        if gated
        else ["--bind_all", "--port", str(platform.ports.tensorboard)]
    )
    return {
        "name": "tensorboard",
        "image": platform.images.tensorboard,
        "command": ["tensorboard", "--logdir", NOTEBOOK_LOG_ROOT, *listen],
        "env": [pod_security.home_in_tmp()],
        "ports": [
            {
                "name": "tensorboard" if gated else "http",
                "containerPort": TENSORBOARD_BACKEND_PORT if gated else platform.ports.tensorboard,
            }
        ],
        "readinessProbe": loopback_probe(TENSORBOARD_BACKEND_PORT)
        if gated
        else {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 5},
        "securityContext": pod_security.container_security_context(read_only_root=True),
        "volumeMounts": [
            {"name": "log", "mountPath": NOTEBOOK_LOG_ROOT, "readOnly": True},
            pod_security.writable_tmp_mount(),
        ],
    }


def token_gate(tenant: str, platform: PlatformFacts, token_secret: Any, token_key: str) -> dict[str, Any]:
    """The gate users reach TensorBoard through: the tenant's Jupyter token, or 401. Behind the same
    token it serves the tenant's training progress and task logs (`tfk8s status`, `tfk8s logs`) from
    the log volume, mounted read-only as TensorBoard mounts it."""
    return {
        "name": "token-gate",
        "image": platform.images.tensorboard,  # any Python 3 does; this one is already pulled
        "command": ["python", "-m", "tfk8s_train.token_gate"],
        "args": app_sessions.gate_args(
            tenant,
            listen=platform.ports.tensorboard,
            backend=f"127.0.0.1:{TENSORBOARD_BACKEND_PORT}",
            log_root=NOTEBOOK_LOG_ROOT,
        ),
        "env": [
            {"name": "TFK8S_TOKEN", "valueFrom": {"secretKeyRef": {"name": token_secret, "key": token_key}}},
            {"name": "PYTHONPATH", "value": TRAINER_PATH},
            pod_security.home_in_tmp(),
        ],
        "ports": [{"name": "http", "containerPort": platform.ports.tensorboard}],
        # TCP: every HTTP request without the token is a 401 by design.
        "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 5},
        "resources": pods.resources(Resources(cpu=quota.TOKEN_GATE_CPU, memory=quota.TOKEN_GATE_MEMORY)),
        "securityContext": pod_security.container_security_context(read_only_root=True),
        "volumeMounts": [
            trainer_mount(),
            {"name": "log", "mountPath": NOTEBOOK_LOG_ROOT, "readOnly": True},
            pod_security.writable_tmp_mount(),
        ],
    }


def deployment_spec(
    pod_labels: dict[str, str],
    platform: PlatformFacts,
    containers: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
    *,
    identity: PodIdentity,
    service_account: Any = None,
) -> dict[str, Any]:
    """One replica on the User Node, every container sized."""
    # Sized explicitly, as the namespace's LimitRange would: every container states what it takes
    # (the policy pack's container-resources rule), and the quota counts it.
    defaults = platform.container_defaults
    sized = pods.resources(Resources(cpu=defaults.cpu, memory=defaults.memory))
    # Only Jupyter, which reads Layouts, talks to the API server.
    account: dict[str, Any] = (
        {"serviceAccountName": service_account, "automountServiceAccountToken": True}
        if service_account is not None
        else {"automountServiceAccountToken": False}
    )
    return {
        "replicas": 1,
        "selector": {"matchLabels": selector_of(pod_labels)},
        "template": {
            "metadata": {"labels": pod_labels},
            "spec": {
                **pods.user_node_placement(platform.user_node.taint_key),
                "securityContext": pod_security.pod_security_context(identity),
                "containers": [{**c, "resources": c.get("resources") or sized} for c in containers],
                "volumes": volumes,
                **account,
            },
        },
    }


def node_port_spec(pod_labels: dict[str, str], port: int) -> dict[str, Any]:
    """Local: the NodePort answers only on nodes running the pod, i.e. the User Node."""
    return {
        "type": "NodePort",
        "externalTrafficPolicy": "Local",
        "selector": selector_of(pod_labels),
        "ports": [{"name": "http", "port": port, "targetPort": "http"}],
    }
