"""Who may talk to whom in a tenant's namespace: the NetworkPolicies of tenants and training clusters.

TensorFlow's gRPC server authenticates no one and runs any graph a client sends (TensorFlow's
security guidance: trusted networks only), so the network is the only thing between a tenant's
training servers and every other pod of the cluster. The design, enforced by the cluster's CNI:

  * everything in a tenant's namespace is denied, both ways, unless a policy below allows it;
  * every pod may ask the cluster DNS (and nothing else outside the namespace by default);
  * a training cluster's pods talk gRPC with the pods of that same cluster alone, and with the
    tenant's Jupyter when Jupyter is its in-graph client; with a `code.url`, their init container
    may fetch from the URL's host alone, on its port: its IP address, or the addresses the stack
    lists for a host name (`code.addresses`: NetworkPolicy knows no host names);
  * a training pod's metrics port answers the platform's Prometheus alone (the pods
    `platform.monitoring.podLabels` selects in its namespace), and nobody when the platform has
    none: no pod of any tenant, the tenant's own Jupyter included, reads a task's metrics;
  * a PS, which retires itself through the API, and Jupyter, which reads Layouts, reach the API
    server's addresses (as pods see them after the `kubernetes` Service's translation);
  * Jupyter and TensorBoard answer on their own HTTP ports, from anywhere but the pod network when
    the platform names it (users come through the User Node's NodePorts; both ask for the tenant's
    token, TensorBoard through its token gate; another tenant's pod may open its own egress);
  * the monitoring namespace, the platform team's, takes nothing from a tenant's namespace, whatever
    egress a tenant opens for her own pods.

The tenant stack declares the namespace-wide policies, each experiment its clusters'. Selectors are
built from the labels of what they select (tfk8s.specs.labels). Specs only: nothing here touches Pulumi.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from tfk8s.errors import ConfigError
from tfk8s.settings.experiment import ClusterSettings, url_address
from tfk8s.settings.monitoring import MonitoringSettings
from tfk8s.settings.platform import ApiServerSettings, NetworkSettings, PortSettings
from tfk8s.specs.labels import TENANT_NAMESPACE, labels, selector_of

Json = dict[str, Any]

DEFAULT_DENY = "tfk8s-default-deny"
DNS = "tfk8s-dns"
JUPYTER = "tfk8s-jupyter"
TENSORBOARD = "tfk8s-tensorboard"
PS_API = "tfk8s-ps-api"
TENANTS_KEPT_OUT = "tfk8s-tenants-kept-out"  # in the monitoring namespace
TRAINING_COMPONENT = "tensorflow"
IPV4_ANYWHERE, IPV6_ANYWHERE = "0.0.0.0/0", "::/0"


def _tcp(port: int) -> Json:
    return {"protocol": "TCP", "port": port}


def app_selector(user: str, component: str) -> Json:
    """The pods of the tenant's Jupyter or TensorBoard (tfk8s.components.user_env labels them so)."""
    return {"matchLabels": selector_of(labels(user, component))}


def _training_pods(user: str, *, experiment: str | None = None, cluster: str | None = None, role: str | None = None) -> Json:
    """The tenant's training pods (PS, workers, chief of every cluster), or those of one cluster or role."""
    return {"matchLabels": selector_of(labels(user, TRAINING_COMPONENT, experiment=experiment, cluster=cluster, role=role))}


def api_server_rule(api: ApiServerSettings) -> list[Json]:
    """Egress to the API server; none when its addresses are unknown (then nothing may reach it)."""
    if not api.cidrs:
        return []
    return [{"to": [{"ipBlock": {"cidr": c}} for c in api.cidrs], "ports": [_tcp(p) for p in api.ports]}]


def outside_the_pod_network(pod_cidrs: list[str]) -> list[Json]:
    """Peers: every address but the pod network's (`platform.network.podCidrs`, not empty): nodes,
    the control plane, users' machines; of each address family `pod_cidrs` names, and of no other.
    On a dual-stack cluster whose IPv6 pod network is not named, "all of IPv6" would take in every
    pod's IPv6 address too: that family is then left out (its users reach no app), not opened."""
    v4 = [c for c in pod_cidrs if ":" not in c]
    v6 = [c for c in pod_cidrs if ":" in c]
    return [
        {"ipBlock": {"cidr": anywhere, "except": excepted}}
        for anywhere, excepted in ((IPV4_ANYWHERE, v4), (IPV6_ANYWHERE, v6))
        if excepted
    ]


def users_rule(port: int, pod_cidrs: list[str]) -> Json:
    """Ingress to an app's port from anywhere but the pod network: from every address when the pod
    addresses are not given."""
    if not pod_cidrs:
        return {"ports": [_tcp(port)]}
    return {"from": outside_the_pod_network(pod_cidrs), "ports": [_tcp(port)]}


def tenants_kept_out(pod_cidrs: list[str]) -> Json:
    """The monitoring namespace's policy (the platform's, in the team's namespace): every pod there
    (Prometheus, and whatever else the team runs beside it) takes connections from any namespace but
    a tenant's, and from any address outside the pod network. A tenant may open her own pods' egress
    (her policies are hers), never this: her code cannot query Prometheus for every tenant's
    experiments and losses, nor flood it. Policies add up, so one of the team's own that lets tenants
    in (to a Pushgateway, say) still does. Only with `pod_cidrs`: without them a node's address, where
    kubelet probes come from, cannot be told from a pod's."""
    if not pod_cidrs:
        raise ConfigError(
            [
                "MonitoringFenceArgs.pod_cidrs: empty: without the pod network's CIDRs a node's address (whence kubelet "
                "probes come) cannot be told from a pod's; give them (a stack file's platform.network.podCidrs)"
            ]
        )
    return {
        "podSelector": {},
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [
                    {"namespaceSelector": {"matchExpressions": [{"key": TENANT_NAMESPACE, "operator": "DoesNotExist"}]}},
                    *outside_the_pod_network(pod_cidrs),
                ]
            }
        ],
    }


def deny_all() -> Json:
    """Every pod of the namespace: no traffic in or out but what another policy allows."""
    return {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}


def tenant_policies(user: str, network: NetworkSettings, ports: PortSettings) -> dict[str, Json]:
    """The namespace-wide policies of a tenant, by object name."""
    dns = network.dns
    return {
        DEFAULT_DENY: deny_all(),
        DNS: {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [
                {
                    "to": [
                        {
                            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": dns.namespace}},
                            "podSelector": {"matchLabels": dict(dns.pod_labels)},
                        },
                        *({"ipBlock": {"cidr": c}} for c in dns.cidrs),
                    ],
                    "ports": [{"protocol": "UDP", "port": dns.port}, _tcp(dns.port)],
                }
            ],
        },
        JUPYTER: {
            "podSelector": app_selector(user, "jupyter"),
            "policyTypes": ["Ingress", "Egress"],
            # Its notebook page from anywhere; as the in-graph chief of notebook-driven clusters, their
            # servers' calls back (each cluster's own policy says whether it is notebook-driven).
            "ingress": [
                users_rule(ports.jupyter, network.pod_cidrs),
                {"from": [{"podSelector": _training_pods(user)}], "ports": [_tcp(ports.tensorflow)]},
            ],
            "egress": [
                {"to": [{"podSelector": _training_pods(user)}], "ports": [_tcp(ports.tensorflow)]},
                *api_server_rule(network.api_server),
            ],
        },
        TENSORBOARD: {
            "podSelector": app_selector(user, "tensorboard"),
            "policyTypes": ["Ingress"],
            "ingress": [users_rule(ports.tensorboard, network.pod_cidrs)],
        },
        PS_API: {
            "podSelector": _training_pods(user, role="ps"),
            "policyTypes": ["Egress"],
            "egress": api_server_rule(network.api_server),
        },
    }


def code_url_port(url: str) -> int:
    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme == "https" else 80)


def code_url_addresses(cluster: ClusterSettings) -> tuple[str, ...]:
    """Where a cluster's init container may fetch its code.url from: the addresses the stack names,
    else the URL's own IP address (the schema refuses a host name without addresses)."""
    assert cluster.code.url is not None
    own = url_address(cluster.code.url)
    return cluster.code.addresses or ((own,) if own else ())


def scrape_rule(monitoring: MonitoringSettings, ports: PortSettings) -> list[Json]:
    """Ingress to the metrics port from the platform's Prometheus pods; none without monitoring."""
    if monitoring.namespace is None:
        return []
    scrapers = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": monitoring.namespace}},
        "podSelector": {"matchLabels": dict(monitoring.pod_labels)},
    }
    return [{"from": [scrapers], "ports": [_tcp(ports.metrics)]}]


def cluster_policy(
    user: str,
    experiment: str,
    cluster: ClusterSettings,
    ports: PortSettings,
    monitoring: MonitoringSettings,
    *,
    notebook_client: bool,
) -> Json:
    """One training cluster's policy: gRPC among its own pods, and with Jupyter when it is their
    client; its metrics port to the platform's Prometheus. The experiment that sets its pods'
    metrics port opens it, from the same platform facts: the two never disagree."""
    # Every pod of the cluster (PS, workers, chief), whatever its run.
    own = _training_pods(user, experiment=experiment, cluster=cluster.name)
    peers: list[Json] = [{"podSelector": own}]
    if notebook_client:
        peers.append({"podSelector": app_selector(user, "jupyter")})
    grpc = [_tcp(ports.tensorflow)]
    egress: list[Json] = [{"to": peers, "ports": grpc}]
    if cluster.code.source == "url" and cluster.code.url:
        host = [{"ipBlock": {"cidr": c}} for c in code_url_addresses(cluster)]
        egress.append({"to": host, "ports": [_tcp(code_url_port(cluster.code.url))]})
    return {
        "podSelector": own,
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [{"from": peers, "ports": grpc}, *scrape_rule(monitoring, ports)],
        "egress": egress,
    }


def api_server_from_endpoints(slice_: Mapping[str, Any] | None) -> ApiServerSettings:
    """The API server's addresses and ports from the `kubernetes` EndpointSlice of `default`, where
    pods' requests to the `kubernetes` Service really go (empty when unreadable)."""
    if not slice_:
        return ApiServerSettings()
    family = {"IPv4": 32, "IPv6": 128}.get(str(slice_.get("addressType")), 32)
    cidrs = sorted({f"{a}/{family}" for e in slice_.get("endpoints") or [] for a in e.get("addresses") or []})
    found = sorted({int(p["port"]) for p in slice_.get("ports") or [] if p.get("port")})
    return ApiServerSettings(cidrs=cidrs, ports=found)
