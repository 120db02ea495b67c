"""The `restricted` Pod Security Standard, checked on a pod spec (pure; a test oracle, independent of
the builders in tfk8s.specs.pod_security).

Its controls as https://kubernetes.io/docs/concepts/security/pod-security-standards/ states them:
every control of `baseline`, and the restricted ones (volume types, privilege escalation, non-root,
seccomp, capabilities). `violations` returns one line per broken rule, naming the field; an empty
list means the pod passes. The API server's own admission is what e2e tests check.
"""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]

ALLOWED_VOLUME_TYPES = frozenset(
    {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
)
# The sysctls `baseline` allows (the safe set, as of 1.34).
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
SECCOMP_TYPES = frozenset({"RuntimeDefault", "Localhost"})
APPARMOR_TYPES = frozenset({"RuntimeDefault", "Localhost"})
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
ADDABLE_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})
VOLUME_KEYS = frozenset({"name"})  # a volume's other key is its type


def containers_of(spec: Json) -> list[tuple[str, Json]]:
    """Every container the rules apply to, named by its field: containers, initContainers, ephemeralContainers."""
    return [
        (f"{field}[{i}]", container)
        for field in ("containers", "initContainers", "ephemeralContainers")
        for i, container in enumerate(spec.get(field) or [])
    ]


def violations(spec: Json, annotations: dict[str, str] | None = None) -> list[str]:
    """What in the pod spec `spec` (and its pod's `annotations`) breaks `restricted`."""
    found: list[str] = []
    pod_ctx: Json = spec.get("securityContext") or {}
    containers = containers_of(spec)

    # baseline: HostProcess
    if (pod_ctx.get("windowsOptions") or {}).get("hostProcess"):
        found.append("securityContext.windowsOptions.hostProcess must be unset or false")
    # baseline: host namespaces
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            found.append(f"{field} must be unset or false")
    # baseline: HostPath volumes; restricted: volume types
    for volume in spec.get("volumes") or []:
        types = set(volume) - VOLUME_KEYS
        if not types <= ALLOWED_VOLUME_TYPES:
            found.append(f"volume {volume.get('name')!r} is of type {sorted(types - ALLOWED_VOLUME_TYPES)}")
    # baseline: sysctls
    for sysctl in pod_ctx.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            found.append(f"securityContext.sysctls: {sysctl.get('name')!r} is not a safe sysctl")
    # baseline: AppArmor (field and annotations)
    found += _apparmor("securityContext", pod_ctx)
    for key, value in (annotations or {}).items():
        if key.startswith(APPARMOR_ANNOTATION) and value != "runtime/default" and not value.startswith("localhost/"):
            found.append(f"annotation {key}: {value!r} is neither runtime/default nor localhost/*")
    # baseline: SELinux
    found += _selinux("securityContext", pod_ctx)
    # restricted: runAsNonRoot (pod, or every container), runAsUser != 0
    pod_non_root = pod_ctx.get("runAsNonRoot") is True
    if "runAsNonRoot" in pod_ctx and not pod_non_root:
        found.append("securityContext.runAsNonRoot must be true")
    if pod_ctx.get("runAsUser") == 0:
        found.append("securityContext.runAsUser must not be 0")
    # restricted: seccomp (pod, or every container); baseline: never Unconfined
    pod_seccomp = (pod_ctx.get("seccompProfile") or {}).get("type")
    if pod_seccomp is not None and pod_seccomp not in SECCOMP_TYPES:
        found.append(f"securityContext.seccompProfile.type {pod_seccomp!r} is neither RuntimeDefault nor Localhost")

    for where, container in containers:
        ctx: Json = container.get("securityContext") or {}
        prefix = f"{where} ({container.get('name')}).securityContext"
        if (ctx.get("windowsOptions") or {}).get("hostProcess"):
            found.append(f"{prefix}.windowsOptions.hostProcess must be unset or false")
        if ctx.get("privileged"):
            found.append(f"{prefix}.privileged must be unset or false")
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                found.append(f"{where} ({container.get('name')}).ports: hostPort {port['hostPort']} must be unset or 0")
        if ctx.get("procMount", "Default") != "Default":
            found.append(f"{prefix}.procMount must be unset or Default")
        found += _apparmor(prefix, ctx)
        found += _selinux(prefix, ctx)
        if ctx.get("allowPrivilegeEscalation") is not False:
            found.append(f"{prefix}.allowPrivilegeEscalation must be false")
        if "runAsNonRoot" in ctx and ctx["runAsNonRoot"] is not True:
            found.append(f"{prefix}.runAsNonRoot must be true or unset")
        elif not pod_non_root and ctx.get("runAsNonRoot") is not True:
            found.append(f"{prefix}.runAsNonRoot must be true (the pod's is not)")
        if ctx.get("runAsUser") == 0:
            found.append(f"{prefix}.runAsUser must not be 0")
        seccomp = (ctx.get("seccompProfile") or {}).get("type")
        if seccomp is not None and seccomp not in SECCOMP_TYPES:
            found.append(f"{prefix}.seccompProfile.type {seccomp!r} is neither RuntimeDefault nor Localhost")
        elif seccomp is None and pod_seccomp is None:
            found.append(f"{prefix}.seccompProfile.type must be RuntimeDefault or Localhost (the pod sets none)")
        capabilities: Json = ctx.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            found.append(f"{prefix}.capabilities.drop must contain ALL")
        added = set(capabilities.get("add") or []) - ADDABLE_CAPABILITIES
        if added:
            found.append(f"{prefix}.capabilities.add may hold only NET_BIND_SERVICE, not {sorted(added)}")
    return found


def _apparmor(prefix: str, ctx: Json) -> list[str]:
    profile = (ctx.get("appArmorProfile") or {}).get("type")
    if profile is not None and profile not in APPARMOR_TYPES:
        return [f"{prefix}.appArmorProfile.type {profile!r} is neither RuntimeDefault nor Localhost"]
    return []


def _selinux(prefix: str, ctx: Json) -> list[str]:
    options: Json = ctx.get("seLinuxOptions") or {}
    found = []
    if options.get("type", "") not in SELINUX_TYPES:
        found.append(f"{prefix}.seLinuxOptions.type {options['type']!r} is not a container type")
    for field in ("user", "role"):
        if options.get(field):
            found.append(f"{prefix}.seLinuxOptions.{field} must be unset or empty")
    return found
