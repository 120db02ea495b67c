"""The doctor's checks that reading answers: the server's version and admission API, the rights the
platform and tenant stacks need, storage, queueing and monitoring; the nodes, read here, are judged
in tfk8s.doctor.node_reads.

Each returns findings (tfk8s.doctor.findings). Where the program has a check of its own for the same
question (Kueue and JobSet served, the monitoring namespace; the User Node's taints in node_reads),
it is that check that runs here, so the doctor and `pulumi up` cannot disagree.
"""

from __future__ import annotations

from typing import Any, Protocol

from tfk8s.checks import access, monitoring, queueing
from tfk8s.doctor import rights
from tfk8s.doctor.findings import Finding, advice, failed, not_proven, passed
from tfk8s.kube.api_error import KubeApiError
from tfk8s.kube.api_paths import CSI_DRIVER, NAMESPACE, NODE, POD, STORAGE_CLASS, VALIDATING_ADMISSION_POLICY
from tfk8s.settings.platform import PlatformSettings
from tfk8s.specs.experimenter_rights import Permission
from tfk8s.specs.tenant_admission import POLICY_SINCE


class Api(Protocol):
    def get(self, path: str, *, metadata_only: bool = False) -> dict[str, Any] | None: ...

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]: ...


def shown(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def version(found: tuple[int, int] | None, settings: PlatformSettings) -> list[Finding]:
    """The guards need ValidatingAdmissionPolicy (GA in 1.30); a pinned kubernetesVersion must be the server's."""
    if found is None:
        return [not_proven("version", "the API server's /version did not say its version")]
    findings = []
    if found < POLICY_SINCE:
        findings.append(
            failed(
                "version",
                f"Kubernetes {shown(found)}: older than {shown(POLICY_SINCE)}, so the platform declares no guards "
                "(ValidatingAdmissionPolicy): the platform, a tenant or an experiment in use can be deleted from under "
                "what uses it",
                f"upgrade the control plane to {shown(POLICY_SINCE)} or later",
            )
        )
    else:
        findings.append(passed("version", f"Kubernetes {shown(found)}: the guards' ValidatingAdmissionPolicy is GA"))
    pinned = settings.version
    if pinned is not None and pinned != found:
        findings.append(
            failed(
                "kubernetes-version",
                f"the stack file pins kubernetesVersion {shown(pinned)}, the server runs {shown(found)}",
                f'set tfk8s:platform.kubernetesVersion to "{shown(found)}" (or remove it: the server\'s is read)',
            )
        )
    return findings


def admission(api: Api, found: tuple[int, int] | None) -> list[Finding]:
    """Whether the server really serves ValidatingAdmissionPolicies (a distribution may turn the API off)."""
    if found is not None and found < POLICY_SINCE:
        return []  # said by `version`
    listed = api.get(VALIDATING_ADMISSION_POLICY.root) or {}
    names = {r.get("name") for r in listed.get("resources") or []}
    if "validatingadmissionpolicies" in names and "validatingadmissionpolicybindings" in names:
        return [
            passed("admission-policies", "admissionregistration.k8s.io/v1 serves validatingadmissionpolicies and their bindings")
        ]
    return [
        failed(
            "admission-policies",
            "admissionregistration.k8s.io/v1 does not serve validatingadmissionpolicies: the guards cannot be declared",
            "turn the API on (kube-apiserver --runtime-config=admissionregistration.k8s.io/v1=true; on by default since 1.30)",
        )
    ]


def credentials(api: Api, settings: PlatformSettings, *, pod_monitors: bool) -> list[Finding]:
    """Every kind the platform and tenant stacks manage, asked of the API server (access reviews)."""
    who = access.identity(api.post)
    try:
        missed = access.missing(api.post, "", rights.needed(settings, pod_monitors=pod_monitors))
    except (KubeApiError, OSError) as error:
        return [not_proven("rights", f"the access reviews could not be asked: {error}")]
    if not missed:
        return [passed("rights", f"{who} may manage every kind the platform and tenant stacks declare")]
    by_perm: dict[Permission, list[str]] = {}
    for perm, verb in missed:
        by_perm.setdefault(perm, []).append(verb)
    lacks = "; ".join(f"{'/'.join(verbs)} {perm.shown} ({perm.needed_for})" for perm, verbs in by_perm.items())
    return [
        failed(
            "rights",
            f"{who} may not: {lacks}",
            "run the doctor and the platform and tenant stacks with the platform team's credentials "
            "(cluster-admin, or a ClusterRole granting the verbs above)",
        )
    ]


def storage(api: Api, settings: PlatformSettings) -> list[Finding]:
    """What the storage backend needs in the cluster before the platform's `up`."""
    store = settings.storage
    if store.backend == "existing":
        live = api.get(STORAGE_CLASS.path(store.class_name))
        if live is None:
            return [
                failed(
                    "storage-class",
                    f"backend existing names className {store.class_name!r}, which the cluster does not have",
                    "name one of `kubectl get storageclass`, or let the platform create one (backend csi or glusterfs)",
                )
            ]
        return [passed("storage-class", f"storage class {store.class_name!r} exists (provisioner {live.get('provisioner')})")]
    if store.backend == "csi" and store.csi is not None:
        driver = store.csi.provisioner
        if api.get(CSI_DRIVER.path(driver)) is None:
            return [
                failed(
                    "storage-class",
                    f"backend csi names provisioner {driver!r}, and the cluster has no CSIDriver of that name",
                    "install that CSI driver (its CSIDriver object names it), or name the one the cluster has",
                )
            ]
        return [passed("storage-class", f"CSI driver {driver!r} is installed; the platform creates class {store.class_name!r}")]
    if store.backend == "glusterfs":
        return [
            advice(
                "storage-class",
                "backend glusterfs: the in-tree GlusterFS provisioner was removed in Kubernetes 1.26, "
                "and Heketi is read by the provisioner, not by the doctor",
                "on 1.26 or later use the GlusterFS (or another) CSI driver with backend csi",
            )
        ]
    return [
        advice(
            "storage-class",
            f"backend local: volumes are directories under {store.local.host_path_root} of one node, "
            "so pods on other nodes do not share them",
            "for more than one training node use backend csi (NFS, CephFS) or existing",
        )
    ]


def list_nodes(api: Api) -> list[dict[str, Any]]:
    return list((api.get(f"{NODE.root}/{NODE.plural}") or {}).get("items") or [])


def queueing_findings(api: Api, settings: PlatformSettings) -> list[Finding]:
    """With queueing on: Kueue's and JobSet's kinds at the versions tfk8s declares (the program's check)."""
    if not settings.queueing.enabled:
        return []
    found = [kind for kind in queueing.NEEDED if not queueing.served(kind, api.get)]
    if found:
        missing = " and ".join(f"{k.api_version} {k.plural}" for k in found)
        return [
            failed(
                "queueing",
                f"tfk8s:platform.queueing.enabled is true, and the cluster serves no {missing}",
                "install Kueue (v0.15 or later serves v1beta2) and JobSet (serving v1alpha2), or set queueing.enabled: false",
            )
        ]
    served = ", ".join(f"{k.api_version} {k.plural}" for k in queueing.NEEDED)
    return [passed("queueing", f"the cluster serves {served}")]


def monitoring_findings(api: Api, settings: PlatformSettings) -> tuple[list[Finding], bool]:
    """With monitoring: the Prometheus's namespace exists, is no tenant's, and runs pods of podLabels.
    Also whether the cluster serves PodMonitors (what the platform would declare)."""
    served = bool(monitoring.pod_monitors_served(api.get))
    wanted = settings.monitoring
    if wanted.namespace is None:
        return [], served
    problems = monitoring.namespace_problems(wanted.namespace, api.get(NAMESPACE.path(wanted.namespace)))
    mode = monitoring.resolved_mode(wanted.scrape, served)
    if mode == "podMonitor" and not served:
        problems.append(f"{monitoring.KEY}.scrape: podMonitor, and the cluster serves no monitoring.coreos.com/v1 podmonitors")
    if problems:
        return [failed("monitoring", p, "as the message says") for p in problems], served
    selector = ",".join(f"{k}={v}" for k, v in wanted.pod_labels.items())
    pods = (api.get(POD.list_path(wanted.namespace, dict(wanted.pod_labels))) or {}).get("items") or []
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    if not running:
        return [
            failed(
                "monitoring",
                f"no Running pod in namespace {wanted.namespace!r} has the labels {selector or '(any)'}",
                "start Prometheus there, or set tfk8s:platform.monitoring.podLabels to its pods' labels",
            )
        ], served
    return [passed("monitoring", f"{len(running)} Prometheus pod(s) run in {wanted.namespace!r}; the scrape is a {mode}")], served


def dns_route(api: Api, settings: PlatformSettings) -> list[Finding]:
    """Tenants' egress policies let DNS through to the pods `network.dns` names, or to its CIDRs: the
    cluster's DNS must be there, else every tenant pod's lookups are blocked once policies apply."""
    dns = settings.network.dns
    key = "tfk8s:platform.network.dns"
    if dns.cidrs:
        return [passed("dns-route", f"{key}.cidrs: tenants' pods may reach DNS at {', '.join(dns.cidrs)}")]
    selector = ",".join(f"{k}={v}" for k, v in dns.pod_labels.items())
    pods = (api.get(POD.list_path(dns.namespace, dict(dns.pod_labels))) or {}).get("items") or []
    if any((p.get("status") or {}).get("phase") == "Running" for p in pods):
        return [passed("dns-route", f"the cluster's DNS runs as pods labelled {selector} in {dns.namespace!r}, as {key} says")]
    return [
        failed(
            "dns-route",
            f"no Running pod labelled {selector} in namespace {dns.namespace!r}: tenants' policies would let DNS through to none",
            f"set {key}.namespace and {key}.podLabels to the cluster DNS's pods, or {key}.cidrs to its addresses",
        )
    ]
