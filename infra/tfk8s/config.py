"""Parse and validate stack configuration into `tfk8s.settings`, once, before any resource exists.

Every problem found is reported together, each naming its config key (as written in the stack
file) and how to fix it. Unknown keys are errors too: a typo must not silently fall back to a
default.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pulumi

from tfk8s import settings as s
from tfk8s.config_reader import Node, dns_label, k8s_version, non_negative, port, positive, quantity, string_map

NAMESPACE = "tfk8s"
CONFIGMAP_LIMIT_BYTES = 1024 * 1024


class ConfigError(pulumi.RunError, ValueError):
    """The stack configuration is invalid; `problems` lists every finding.

    A `pulumi.RunError`: the CLI shows the message alone, without a Python traceback.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid tfk8s configuration:\n  - " + "\n  - ".join(problems))


def _storage(node: Node) -> s.StorageSettings:
    backend = node.choice("backend", ("glusterfs", "csi", "existing", "local"), "local")
    glusterfs = csi = None
    if backend == "glusterfs":
        g = node.child("glusterfs", {"restUrl", "restUser", "clusterId", "volumeType", "gidMin", "gidMax", "secretNamespace"})
        rest_url = g.require(
            "restUrl",
            str,
            "the Heketi REST endpoint, e.g. http://heketi.storage:8080",
            lambda v: None if re.match(r"^https?://", v) else f"must be an http(s) URL, got {v!r}",
        )
        gid_min = g.get("gidMin", int, 2000, positive)
        gid_max = g.get("gidMax", int, 2147483647, positive)
        if gid_min > gid_max:
            g.fail(g.key("gidMin"), f"must not exceed gidMax ({gid_min} > {gid_max})")
        glusterfs = s.GlusterfsSettings(
            rest_url=rest_url or "",
            rest_user=g.get("restUser", str, "admin"),
            cluster_id=g.optional("clusterId", str),
            volume_type=g.get("volumeType", str, "replicate:3"),
            gid_min=gid_min,
            gid_max=gid_max,
            secret_namespace=g.get("secretNamespace", str, "default", dns_label),
        )
    elif backend == "csi":
        c = node.child("csi", {"provisioner", "parameters"})
        provisioner = c.require("provisioner", str, "the CSI driver name, e.g. nfs.csi.k8s.io")
        csi = s.CsiSettings(provisioner=provisioner or "", parameters=string_map(c, "parameters"))
    local = node.child("local", {"hostPathRoot"})
    return s.StorageSettings(
        backend=backend,
        class_name=node.get("className", str, "tfk8s-shared", dns_label),
        reclaim_policy=node.choice("reclaimPolicy", ("Retain", "Delete"), "Retain"),
        glusterfs=glusterfs,
        csi=csi,
        local=s.LocalSettings(
            host_path_root=local.get(
                "hostPathRoot", str, "/var/lib/tfk8s", lambda v: None if v.startswith("/") else "must be an absolute path"
            )
        ),
    )


def _platform(raw: Any, problems: list[str], server_version: tuple[int, int] | None) -> s.PlatformSettings:
    node = Node(
        raw,
        f"{NAMESPACE}:platform",
        problems,
        {"userNode", "storage", "images", "ports", "kubernetesVersion", "namespacePrefix", "allowPsGpus", "awaitTimeoutSeconds"},
    )
    un = node.child("userNode", {"name", "address", "taintKey"})
    user_node = s.UserNodeSettings(
        name=un.require("name", str, "the name of an existing node to dedicate to Jupyter and TensorBoard") or "",
        address=un.optional("address", str),
        taint_key=un.get("taintKey", str, "tfk8s.io/user-node"),
    )
    img, ports = (
        node.child("images", {"tensorflow", "jupyter", "tensorboard"}),
        node.child("ports", {"tensorflow", "jupyter", "tensorboard"}),
    )
    d_img, d_ports = s.ImageSettings(), s.PortSettings()
    version = node.optional("kubernetesVersion", str, k8s_version)
    storage = _storage(node.child("storage", {"backend", "className", "reclaimPolicy", "glusterfs", "csi", "local"}))
    configured = tuple(int(p) for p in version.split(".")) if version else None
    # The server's version, when it can be read, is the truth: objects follow it, not the stack file.
    kube = server_version or configured
    if server_version and configured and configured != server_version:
        node.fail(
            node.key("kubernetesVersion"),
            f"is {version} but the cluster serves {server_version[0]}.{server_version[1]}: "
            "fix it, or remove the key to use the server's version",
        )
    if storage.backend == "glusterfs" and kube is not None and kube >= s.GLUSTERFS_REMOVED_IN:
        node.fail(
            f"{node.path}.storage.backend",
            f"'glusterfs' uses the in-tree kubernetes.io/glusterfs provisioner, removed in Kubernetes 1.26; "
            f"the cluster is {kube[0]}.{kube[1]}. Fix: use backend 'csi' with a Gluster/NFS/CephFS CSI driver "
            f"(e.g. Kadalu, nfs.csi.k8s.io) or 'existing' with a class your cluster already has",
        )
    return s.PlatformSettings(
        user_node=user_node,
        storage=storage,
        images=s.ImageSettings(**{k: img.get(k, str, getattr(d_img, k)) for k in ("tensorflow", "jupyter", "tensorboard")}),
        ports=s.PortSettings(
            **{k: ports.get(k, int, getattr(d_ports, k), port) for k in ("tensorflow", "jupyter", "tensorboard")}
        ),
        kubernetes_version=kube,  # type: ignore[arg-type]
        namespace_prefix=node.get("namespacePrefix", str, "tfk8s-"),
        allow_ps_gpus=node.get("allowPsGpus", bool, False),
        await_timeout_seconds=node.get("awaitTimeoutSeconds", int, 600, positive),
    )


_RESOURCE_KEYS = {"count", "cpu", "memory", "gpus"}


def _resources(node: Node, default: s.Resources) -> s.Resources:
    cpu = node.raw.get("cpu", default.cpu)
    if isinstance(cpu, (int, float)) and not isinstance(cpu, bool):
        cpu = str(cpu)  # `cpu: 2` is as natural as `cpu: "2"`
    problem = quantity(cpu) if isinstance(cpu, str) else f"must be a quantity like 500m or 2, got {cpu!r}"
    if problem:
        node.fail(node.key("cpu"), problem)
        cpu = default.cpu
    return s.Resources(
        cpu=cpu,
        memory=node.get("memory", str, default.memory, quantity),
        gpus=node.get("gpus", int, default.gpus, non_negative),
    )


def _code(node: Node, project_root: Path) -> s.CodeSettings:
    source = node.choice("source", ("configmap", "url", "image"), "configmap")
    path, url = node.get("path", str, s.CodeSettings().path), node.optional("url", str)
    if source == "configmap" and path is not None:
        directory = project_root / path
        if not directory.is_dir():
            node.fail(node.key("path"), f"{path!r} is not a directory of the project ({directory})")
        else:
            size = sum(f.stat().st_size for f in directory.rglob("*") if f.is_file() and "__pycache__" not in f.parts)
            if size > CONFIGMAP_LIMIT_BYTES * 0.9:
                node.fail(
                    node.key("path"),
                    f"{path!r} holds {size} bytes; a ConfigMap carries at most 1 MiB: "
                    "bake the code into the image (source: image) or serve it (source: url)",
                )
    if source == "url" and not (url and re.match(r"^https?://", url)):
        node.fail(node.key("url"), "source 'url' needs an http(s) URL to fetch the training script from")
    return s.CodeSettings(source=source, path=path if source == "configmap" else None, url=url if source == "url" else None)


def _string_list(node: Node, name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    value = node.get(name, list, list(default))
    if not all(isinstance(v, str) for v in value):
        node.fail(node.key(name), "must be a list of strings")
        return default
    return tuple(value)


def _cluster(raw: Any, path: str, problems: list[str], platform: s.PlatformSettings, project_root: Path) -> s.ClusterSettings:
    node = Node(
        raw,
        path,
        problems,
        {
            "name",
            "replication",
            "training",
            "inGraphClient",
            "ps",
            "workers",
            "image",
            "code",
            "command",
            "args",
            "classicFlags",
            "volumes",
            "run",
        },
    )
    name = node.require("name", str, "a DNS-1123 name for the training cluster, e.g. mnist", dns_label) or ""
    ps_node = node.child("ps", _RESOURCE_KEYS)
    w_node = node.child("workers", _RESOURCE_KEYS | {"nodeSelector", "tolerations", "backoffLimitPerIndex"})
    default_ps, default_w = s.PsSettings(), s.WorkerSettings()
    ps = s.PsSettings(
        count=ps_node.get("count", int, default_ps.count, positive), resources=_resources(ps_node, default_ps.resources)
    )
    if ps.resources.gpus and not platform.allow_ps_gpus:
        ps_node.fail(
            ps_node.key("gpus"),
            "parameter servers hold variables and need no GPU; remove it, "
            f"or set {NAMESPACE}:platform.allowPsGpus: true if you really mean it",
        )
    tolerations = tuple(_tolerations(w_node, w_node.raw.get("tolerations", []), platform.user_node.taint_key))
    workers = s.WorkerSettings(
        count=w_node.get("count", int, default_w.count, positive),
        resources=_resources(w_node, default_w.resources),
        node_selector=string_map(w_node, "nodeSelector"),
        tolerations=tolerations,
        backoff_limit_per_index=w_node.get("backoffLimitPerIndex", int, default_w.backoff_limit_per_index, non_negative),
    )
    replication = node.choice("replication", ("between-graph", "in-graph"), "between-graph")
    training = node.choice("training", ("async", "sync"), "async")
    command = _string_list(node, "command", s.DEFAULT_TRAINER) or s.DEFAULT_TRAINER
    v_node = node.child("volumes", {"dataSize", "logSize", "keepOnDestroy"})
    default_v = s.VolumeSettings()
    r_node = node.child("run", {"number", "activeDeadlineSeconds", "ttlSecondsAfterFinished"})
    return s.ClusterSettings(
        name=name,
        replication=replication,
        training=training,
        in_graph_client=node.choice("inGraphClient", ("chief", "notebook"), "chief"),
        ps=ps,
        workers=workers,
        image=node.optional("image", str),
        code=_code(node.child("code", {"source", "path", "url"}), project_root),
        command=command,
        args=_string_list(node, "args", ()),
        classic_flags=node.get("classicFlags", bool, True),
        volumes=s.VolumeSettings(
            data_size=v_node.get("dataSize", str, default_v.data_size, quantity),
            log_size=v_node.get("logSize", str, default_v.log_size, quantity),
            keep_on_destroy=v_node.get("keepOnDestroy", bool, True),
        ),
        run=s.RunSettings(
            number=r_node.get("number", int, 0, non_negative),
            active_deadline_seconds=r_node.optional("activeDeadlineSeconds", int, positive),
            ttl_seconds_after_finished=r_node.optional("ttlSecondsAfterFinished", int, non_negative),
        ),
    )


def _tolerations(node: Node, raw: Any, user_node_taint: str) -> list[dict[str, str]]:
    key = node.key("tolerations")
    if not isinstance(raw, list) or not all(isinstance(t, Mapping) for t in raw):
        node.fail(key, "must be a list of Kubernetes tolerations (mappings)")
        return []
    for t in raw:
        if t.get("key") == user_node_taint or (t.get("operator") == "Exists" and not t.get("key")):
            node.fail(
                key,
                f"{dict(t)} tolerates the User Node taint {user_node_taint!r}: training pods must never "
                "run on the User Node; tolerate specific taints instead",
            )
    return [{str(k): str(v) for k, v in t.items()} for t in raw]


def parse(platform_raw: Any, users_raw: Any, project_root: Path, server_version: tuple[int, int] | None = None) -> s.Settings:
    """Validate raw `tfk8s:platform` and `tfk8s:users` values; raise ConfigError listing every problem."""
    problems: list[str] = []
    platform = _platform(platform_raw, problems, server_version)
    users: list[s.UserSettings] = []
    if not isinstance(users_raw, list) or not users_raw:
        problems.append(f"{NAMESPACE}:users: must be a non-empty list of users, each with a name and clusters")
        users_raw = []
    seen_users: set[str] = set()
    for i, user_raw in enumerate(users_raw):
        node = Node(user_raw, f"{NAMESPACE}:users[{i}]", problems, {"name", "clusters"})
        name = node.require("name", str, "a DNS-1123 user name, e.g. alice", dns_label) or ""
        if name in seen_users:
            node.fail(node.key("name"), f"duplicate user {name!r}: each user gets one namespace")
        seen_users.add(name)
        clusters_raw = node.raw.get("clusters")
        if not isinstance(clusters_raw, list) or not clusters_raw:
            node.fail(node.key("clusters"), "must be a non-empty list of training clusters")
            clusters_raw = []
        clusters = tuple(
            _cluster(c, f"{node.path}.clusters[{j}]", problems, platform, project_root) for j, c in enumerate(clusters_raw)
        )
        names = [c.name for c in clusters]
        for dup in sorted({n for n in names if names.count(n) > 1}):
            node.fail(node.key("clusters"), f"duplicate cluster name {dup!r}: cluster names must be unique per user")
        users.append(s.UserSettings(name=name, clusters=clusters))
    if problems:
        raise ConfigError(problems)
    return s.Settings(platform=platform, users=tuple(users))


JUPYTER_TOKENS_KEY = f"{NAMESPACE}:jupyterTokens"
MIN_TOKEN_LENGTH = 16


def parse_jupyter_tokens(raw: str | None, is_secret: bool, users: tuple[s.UserSettings, ...]) -> dict[str, str]:
    """`tfk8s:jupyterTokens`: optional `{user: token}`, set with `pulumi config set --secret --path`.

    Checked before any resource exists; the values never enter Settings (callers wrap them in
    `pulumi.Output.secret` at once). A token stored in plain text in the stack file is refused.
    """
    if raw is None:
        return {}
    fix = f"set it with `pulumi config set --secret --path '{JUPYTER_TOKENS_KEY}.<user>' <token>`"
    if not is_secret:
        raise ConfigError([f"{JUPYTER_TOKENS_KEY}: is stored in plain text in the stack file; remove it and {fix}"])
    try:
        tokens = json.loads(raw)
    except ValueError:
        tokens = None
    if not isinstance(tokens, dict):
        raise ConfigError([f"{JUPYTER_TOKENS_KEY}: must be a map of user name to token; {fix}"])
    known = {u.name for u in users}
    problems = []
    for user, token in tokens.items():
        key = f"{JUPYTER_TOKENS_KEY}.{user}"
        if user not in known:
            problems.append(f"{key}: no user {user!r} in tfk8s:users; remove it or add the user")
        elif not isinstance(token, str) or len(token) < MIN_TOKEN_LENGTH:
            problems.append(f"{key}: must be a string of at least {MIN_TOKEN_LENGTH} characters (e.g. `openssl rand -hex 24`)")
    if problems:
        raise ConfigError(problems)
    return tokens


def jupyter_tokens(settings: s.Settings) -> dict[str, pulumi.Output[str]]:
    """The users' chosen Jupyter tokens from the running stack, as secrets (users without one get a generated token)."""
    raw = pulumi.runtime.get_config(JUPYTER_TOKENS_KEY)
    tokens = parse_jupyter_tokens(raw, pulumi.runtime.is_config_secret(JUPYTER_TOKENS_KEY), settings.users)
    return {user: pulumi.Output.secret(token) for user, token in tokens.items()}


def load(project_root: Path, server_version: tuple[int, int] | None) -> s.Settings:
    """Read `tfk8s:platform` and `tfk8s:users` from the running stack's configuration.

    `server_version` is what the cluster says it is (preflight); with neither it nor
    `kubernetesVersion`, version-dependent objects (the Job's retry fields) cannot be chosen.
    """
    config = pulumi.Config(NAMESPACE)
    settings = parse(config.get_object("platform"), config.get_object("users"), project_root, server_version)
    if settings.platform.kubernetes_version is None:
        raise ConfigError(
            [
                f"{NAMESPACE}:platform.kubernetesVersion: the cluster did not say which Kubernetes it is "
                "(its /version needs credentials tfk8s cannot use): set it, e.g. "
                f"`pulumi config set --path --type string '{NAMESPACE}:platform.kubernetesVersion' 1.34`"
            ]
        )
    return settings
