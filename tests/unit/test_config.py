"""Bad configuration is rejected before any resource exists, naming the key and the fix."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest
from mocked_program import ROOT, facts_for, stack_config
from tfk8s.checks.context import check_experiment, check_platform
from tfk8s.checks.tenant import check_tenant
from tfk8s.errors import ConfigError
from tfk8s.settings.contract import PlatformFacts
from tfk8s.settings.platform import ImageSettings, PlatformStack
from tfk8s.settings.stack_file import secret_keys, stack_values, validate
from tfk8s.settings.tenant import TenantStack
from tfk8s.stack_kinds.config import JUPYTER_TOKEN_RULES, parse_jupyter_token, parse_secret

Raw = dict[str, Any]
SCHEMA_DIR = ROOT / "schema"


def parse(raw: Raw, server_version: tuple[int, int] | None = None) -> Any:
    """Validate a stack's raw `tfk8s:` values as the program does (tenants and experiments against platform-dev)."""
    stack = validate(raw)
    if isinstance(stack, PlatformStack):
        return check_platform(stack, server_version)
    facts = PlatformFacts.model_validate(facts_for(stack_config("platform-dev")), strict=False)
    if isinstance(stack, TenantStack):
        check_tenant(stack, facts)
    else:
        check_experiment(stack, "dev", facts, ROOT)
    return stack


def cluster(raw: Raw) -> Raw:
    return raw["clusters"][0]


def _set(path: Callable[[Raw], Raw], key: str, value: Any) -> Callable[[Raw], None]:
    def mutate(raw: Raw) -> None:
        path(raw)[key] = value

    return mutate


def _gluster_on(version: str) -> Callable[[Raw], None]:
    def mutate(raw: Raw) -> None:
        raw["platform"]["kubernetesVersion"] = version
        raw["platform"]["storage"] = {"backend": "glusterfs", "glusterfs": {"restUrl": "http://heketi:8080"}}

    return mutate


def _duplicate_cluster(raw: Raw) -> None:
    raw["clusters"].append(copy.deepcopy(cluster(raw)))


def _duplicate_identity(raw: Raw) -> None:
    raw["tenant"]["identities"]["users"] = ["alice", "alice"]


def _workers(key: str, value: Any) -> Callable[[Raw], None]:
    return _set(lambda r: cluster(r)["workers"], key, value)


def _platform(key: str, value: Any) -> Callable[[Raw], None]:
    return _set(lambda r: r["platform"], key, value)


def _code(code: Raw) -> Callable[[Raw], None]:
    return _set(cluster, "code", code)


def _binary_code(raw: Raw) -> None:
    cluster(raw)["code"] = {"source": "configmap", "path": "tests/unit/fixtures/binary-code"}


def _gluster_url(url: str) -> Callable[[Raw], None]:
    def mutate(raw: Raw) -> None:
        raw["platform"].update(kubernetesVersion="1.25", storage={"backend": "glusterfs", "glusterfs": {"restUrl": url}})

    return mutate


KEY = r"is not a label key"
IMAGE = r"is not an image reference"
QUANTITY = r"is not a Kubernetes quantity"
# Stack files written to hurt: paths out of the project, names Kubernetes would refuse later,
# values that would reach manifests with spaces, newlines or shell in them, placements onto the
# User Node. Each refused before anything is declared, naming its key.
HOSTILE = [
    ("code-path-absolute", _code({"source": "configmap", "path": "/etc"}), r"code\.path: '/etc' is outside the project"),
    ("code-path-escapes", _code({"source": "configmap", "path": "../.."}), r"code\.path: '\.\./\.\.' is outside the project"),
    ("code-path-home", _code({"source": "configmap", "path": "~"}), r"code\.path: '~' is not a directory of the project"),
    ("code-binary-file", _binary_code, r"code\.path: .*/model\.bin is not UTF-8 text"),
    ("code-url-newline", _code({"source": "url", "url": "http://x/a.py\nb"}), r"code\.url: must be an http\(s\) URL without"),
    ("code-url-space", _code({"source": "url", "url": "http://x/a b.py"}), r"code\.url: must be an http\(s\) URL without"),
    ("code-url-no-host", _code({"source": "url", "url": "http:///a.py"}), r"code\.url: must be an http\(s\) URL"),
    ("code-url-file", _code({"source": "url", "url": "file:///etc/passwd"}), r"code\.url: must be an http\(s\) URL"),
    # A host name opens nothing by itself: NetworkPolicies name addresses, so the stack names them.
    (
        "code-url-name-without-addresses",
        _code({"source": "url", "url": "https://code.example.com/train.py"}),
        r"code: .*'code\.example\.com' is a name.*code\.addresses",
    ),
    (
        "code-url-metadata-service",
        _code({"source": "url", "url": "http://169.254.169.254/latest/user-data"}),
        r"code: 169\.254\.169\.254/32 is a link-local",
    ),
    (
        "code-addresses-metadata-service",
        _code({"source": "url", "url": "https://code.example.com/t.py", "addresses": ["169.254.169.254/32"]}),
        r"code: 169\.254\.169\.254/32 is a link-local",
    ),
    (
        "code-addresses-the-world",
        _code({"source": "url", "url": "https://code.example.com/t.py", "addresses": ["0.0.0.0/0"]}),
        r"code\.addresses\[0\]: '0\.0\.0\.0/0' is wider than",
    ),
    (
        "code-addresses-without-url",
        _code({"source": "configmap", "addresses": ["10.0.0.1/32"]}),
        r"code: addresses apply to source: url alone",
    ),
    ("code-unknown-source", _code({"source": "git"}), r"code\.source: must be one of 'configmap', 'url', 'image'"),
    ("cluster-name-dash", _set(cluster, "name", "-mnist"), r"clusters\[0\]\.name: .*DNS-1123"),
    ("cluster-name-empty", _set(cluster, "name", ""), r"clusters\[0\]\.name: .*DNS-1123"),
    ("cluster-name-dot", _set(cluster, "name", "a.b"), r"clusters\[0\]\.name: .*DNS-1123"),
    ("cluster-name-newline", _set(cluster, "name", "mnist\n"), r"clusters\[0\]\.name: .*DNS-1123"),
    ("experiment-digit", _set(lambda r: r, "experiment", "1exp"), r"tfk8s:experiment: '1exp' starts with a digit"),
    ("experiment-upper", _set(lambda r: r, "experiment", "Exp"), r"tfk8s:experiment: .*DNS-1123"),
    ("user-name-digit", _set(lambda r: r["tenant"], "name", "9alice"), r"tfk8s:tenant\.name: '9alice' starts with a digit"),
    ("user-name-space", _set(lambda r: r["tenant"], "name", "al ice"), r"tfk8s:tenant\.name: .*DNS-1123"),
    ("cpu-trailing-space", _workers("cpu", "1 "), r"workers\.cpu: '1 ' " + QUANTITY),
    ("cpu-leading-space", _workers("cpu", " 1"), r"workers\.cpu: ' 1' " + QUANTITY),
    ("cpu-newline", _workers("cpu", "1\n"), r"workers\.cpu: '1\\n' " + QUANTITY),
    ("cpu-negative", _workers("cpu", "-1"), r"workers\.cpu: must be greater than zero"),
    ("cpu-bool", _workers("cpu", True), r"workers\.cpu: must be str"),
    ("memory-half-byte", _workers("memory", "500m"), r"workers\.memory: '500m' is a fraction of a byte"),
    ("memory-fraction", _workers("memory", "0.5"), r"workers\.memory: '0\.5' is a fraction of a byte"),
    ("memory-trailing-space", _workers("memory", "1Gi "), r"workers\.memory: '1Gi ' " + QUANTITY),
    ("memory-shell", _workers("memory", "1Gi; rm -rf /"), r"workers\.memory: .* " + QUANTITY),
    ("ps-memory-half-byte", _set(lambda r: cluster(r)["ps"], "memory", "1500m"), r"ps\.memory: '1500m' is a fraction"),
    ("scratch-size-fraction", _set(cluster, "scratch", {"size": "100m"}), r"scratch\.size: '100m' is a fraction of a byte"),
    ("data-size-fraction", _set(lambda r: r["tenant"], "volumes", {"dataSize": "1500m"}), r"volumes\.dataSize: .*fraction"),
    ("quota-memory-fraction", _set(lambda r: r["tenant"], "quota", {"memory": "1m"}), r"quota\.memory: '1m' is a fraction"),
    ("quota-cpu-text", _set(lambda r: r["tenant"], "quota", {"cpu": "many"}), r"quota\.cpu: 'many' " + QUANTITY),
    ("image-empty", _set(cluster, "image", ""), r"clusters\[0\]\.image: '' " + IMAGE),
    ("image-newline", _set(cluster, "image", "tf\nrm -rf /"), r"clusters\[0\]\.image: .*" + IMAGE),
    ("image-shell", _set(cluster, "image", "tf; rm -rf /"), r"clusters\[0\]\.image: .*" + IMAGE),
    ("image-space", _set(cluster, "image", "tensorflow/tensorflow 2.21"), r"clusters\[0\]\.image: .*" + IMAGE),
    ("image-upper-path", _set(cluster, "image", "TensorFlow/tensorflow"), r"clusters\[0\]\.image: .*" + IMAGE),
    ("image-bad-digest", _set(cluster, "image", "tf@sha256:xyz"), r"clusters\[0\]\.image: .*" + IMAGE),
    ("platform-image-empty", _platform("images", {"jupyter": ""}), r"platform\.images\.jupyter: '' " + IMAGE),
    ("platform-image-shell", _platform("images", {"tensorflow": "$(id)"}), r"platform\.images\.tensorflow: .*" + IMAGE),
    ("jupyter-port-is-tensorflows", _platform("ports", {"jupyter": 2222}), r"platform\.ports: jupyter and tensorflow are both"),
    ("port-zero", _platform("ports", {"tensorboard": 0}), r"ports\.tensorboard: must be a TCP port"),
    ("port-string", _platform("ports", {"jupyter": "8888"}), r"ports\.jupyter: must be int"),
    ("metrics-port-is-tensorflows", _platform("ports", {"metrics": 2222}), r"ports: metrics is 2222, the port of tensorflow"),
    (
        "metrics-port-is-tensorboards-own",
        _platform("ports", {"metrics": 16006}),
        r"platform\.ports: metrics is 16006, the port of TensorBoard's own .*give metrics a port of its own",
    ),
    ("monitoring-namespace-upper", _platform("monitoring", {"namespace": "Prom"}), r"monitoring\.namespace: 'Prom' cannot name"),
    (
        "monitoring-scrape-unknown",
        _platform("monitoring", {"namespace": "prom", "scrape": "serviceMonitor"}),
        r"monitoring\.scrape: must be one of 'auto', 'podMonitor', 'scrapeConfig', got 'serviceMonitor'",
    ),
    (
        "monitoring-interval-bare",
        _platform("monitoring", {"namespace": "prom", "interval": "15"}),
        r"monitoring\.interval: must be a duration such as 15s, 1m or 1h, got '15'",
    ),
    (
        "monitoring-pod-label-space",
        _platform("monitoring", {"namespace": "prom", "podLabels": {"app": "prom etheus"}}),
        r"monitoring\.podLabels\.app: 'prom etheus' is not a label value",
    ),
    (
        "monitoring-label-of-tfk8s",
        _platform("monitoring", {"namespace": "prom", "monitorLabels": {"tfk8s.io/stack": "other"}}),
        r"monitoring\.monitorLabels: .*'tfk8s\.io/stack'\] are tfk8s's own labels .*remove them",
    ),
    (
        "monitoring-in-the-storage-secret-namespace",
        lambda r: (_gluster_on("1.25")(r), r["platform"].update(monitoring={"namespace": "tfk8s-storage"})),
        r"platform\.monitoring\.namespace: 'tfk8s-storage' is where the platform keeps its storage Secret .*no pod may run",
    ),
    ("toleration-unknown-field", _workers("tolerations", [{"key": "gpu", "operatr": "Exists"}]), r"tolerations\[0\]\.operatr"),
    ("toleration-bad-operator", _workers("tolerations", [{"key": "gpu", "operator": "Maybe"}]), r"operator: must be one of"),
    ("toleration-bad-effect", _workers("tolerations", [{"key": "gpu", "effect": "Evict"}]), r"effect: must be one of"),
    ("toleration-bad-key", _workers("tolerations", [{"key": "gpu node"}]), r"tolerations\[0\]\.key: 'gpu node' " + KEY),
    (
        "toleration-exists-with-value",
        _workers("tolerations", [{"key": "gpu", "operator": "Exists", "value": "a"}]),
        r"tolerations\[0\]: operator Exists tolerates any value",
    ),
    ("toleration-keyless-equal", _workers("tolerations", [{"value": "a"}]), r"tolerations\[0\]: a toleration without `key`"),
    (
        "toleration-seconds-without-noexecute",
        _workers("tolerations", [{"key": "gpu", "operator": "Exists", "tolerationSeconds": 300}]),
        r"tolerations\[0\]: tolerationSeconds applies to effect NoExecute alone",
    ),
    (
        "toleration-user-node-key",
        _workers("tolerations", [{"key": "tfk8s.io/user-node", "operator": "Exists"}]),
        r"tolerations\[0\]: .* tolerates the User Node taint",
    ),
    (
        "ps-toleration-user-node-key",
        _set(lambda r: cluster(r)["ps"], "tolerations", [{"key": "tfk8s.io/user-node", "operator": "Exists"}]),
        r"ps\.tolerations\[0\]: .* tolerates the User Node taint",
    ),
    (
        "ps-node-selector-user-node-label",
        _set(lambda r: cluster(r)["ps"], "nodeSelector", {"tfk8s.io/user-node": "true"}),
        r"ps\.nodeSelector: .* selects the User Node",
    ),
    ("node-selector-bad-key", _workers("nodeSelector", {"bad key!": "x"}), r"nodeSelector.*'bad key!' " + KEY),
    ("node-selector-bad-value", _workers("nodeSelector", {"gpu": "a b"}), r"nodeSelector\.gpu: 'a b' is not a label value"),
    ("node-selector-long-value", _workers("nodeSelector", {"gpu": "a" * 64}), r"nodeSelector\.gpu: .* is not a label value"),
    (
        "node-selector-user-node-by-name",
        _workers("nodeSelector", {"kubernetes.io/hostname": "tfk8s-user-node"}),
        r"workers\.nodeSelector: .* selects the User Node 'tfk8s-user-node'",
    ),
    (
        "node-selector-user-node-label",
        _workers("nodeSelector", {"tfk8s.io/user-node": "true"}),
        r"workers\.nodeSelector: .* selects the User Node",
    ),
    (
        "taint-key-space",
        _set(lambda r: r["platform"]["userNode"], "taintKey", "bad key"),
        r"userNode\.taintKey: 'bad key' " + KEY,
    ),
    ("taint-key-slashes", _set(lambda r: r["platform"]["userNode"], "taintKey", "a/b/c"), r"userNode\.taintKey: 'a/b/c' " + KEY),
    ("heketi-url-newline", _gluster_url("http://heketi:8080\nx"), r"glusterfs\.restUrl: must be an http\(s\) URL without"),
    ("heketi-url-space", _gluster_url("http://heketi :8080"), r"glusterfs\.restUrl: must be an http\(s\) URL without"),
    (
        "host-path-dotdot",
        _set(lambda r: r["platform"]["storage"], "local", {"hostPathRoot": "/var/../etc"}),
        r"local\.hostPathRoot: '/var/\.\./etc' must be an absolute path with no '\.\.'",
    ),
    (
        "host-path-relative",
        _set(lambda r: r["platform"]["storage"], "local", {"hostPathRoot": "var/lib"}),
        r"local\.hostPathRoot: 'var/lib' must be an absolute path",
    ),
    (
        "host-path-newline",
        _set(lambda r: r["platform"]["storage"], "local", {"hostPathRoot": "/var/lib\n"}),
        r"local\.hostPathRoot: .* must be an absolute path",
    ),
    (
        "control-plane-toleration",
        _workers("tolerations", [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]),
        r"tolerations\[0\]: .* tolerates the control plane's taint",
    ),
    (
        "master-toleration",
        _workers("tolerations", [{"key": "node-role.kubernetes.io/master", "effect": "NoSchedule", "value": "x"}]),
        r"tolerations\[0\]: .* control plane's taint",
    ),
    (
        "toleration-bad-value",
        _workers("tolerations", [{"key": "gpu", "value": "a b"}]),
        r"tolerations\[0\]\.value: 'a b' is not a label value",
    ),
    ("tolerations-not-a-list", _workers("tolerations", {"key": "gpu"}), r"workers\.tolerations: input should be a valid array"),
    (
        "toleration-seconds-string",
        _workers("tolerations", [{"key": "gpu", "effect": "NoExecute", "tolerationSeconds": "300"}]),
        r"tolerationSeconds: must be int",
    ),
    ("node-selector-int-value", _workers("nodeSelector", {"gpu": 1}), r"nodeSelector\.gpu: must be str"),
    (
        "node-selector-bool-value",
        _set(lambda r: cluster(r)["ps"], "nodeSelector", {"example.com/pool": True}),
        r"ps\.nodeSelector\.example\.com/pool: must be str, got True: quote it in the stack file \('true'\), or set "
        r"it with `pulumi config set --type string`",
    ),
    ("node-selector-not-a-map", _workers("nodeSelector", ["gpu"]), r"workers\.nodeSelector: input should be an object"),
    (
        "workers-too-many-for-one-env-string",
        _workers("count", 5000),
        r"workers\.count: the cluster spec of 5001 tasks is \d+ bytes.*at most about \d+ workers",
    ),
    ("command-empty", _set(cluster, "command", []), r"clusters\[0\]\.command: must be a non-empty list"),
    ("args-not-strings", _set(cluster, "args", [1, 2]), r"clusters\[0\]\.args\[0\]: must be str"),
    ("run-number-negative", _set(cluster, "run", {"number": -1}), r"run\.number: must be 0 or more"),
    ("run-deadline-zero", _set(cluster, "run", {"activeDeadlineSeconds": 0}), r"run\.activeDeadlineSeconds: must be at least 1"),
    ("run-checkpoint-zero", _set(cluster, "run", {"checkpointSeconds": 0}), r"run\.checkpointSeconds: must be at least 1"),
    ("run-checkpoint-text", _set(cluster, "run", {"checkpointSeconds": "soon"}), r"run\.checkpointSeconds: must be int"),
    (
        "run-ttl-negative",
        _set(cluster, "run", {"ttlSecondsAfterFinished": -5}),
        r"run\.ttlSecondsAfterFinished: must be 0 or more",
    ),
    ("backoff-negative", _workers("backoffLimitPerIndex", -1), r"workers\.backoffLimitPerIndex: must be 0 or more"),
    ("data-sub-path-absolute", _set(cluster, "dataSubPath", "/etc"), r"dataSubPath: '/etc' must be a relative path"),
    ("data-sub-path-double-slash", _set(cluster, "dataSubPath", "a//b"), r"dataSubPath: 'a//b' must be a relative path"),
    ("data-writable-string", _set(cluster, "dataWritable", "yes"), r"dataWritable: must be bool"),
    ("in-graph-client-unknown", _set(cluster, "inGraphClient", "jupyter"), r"inGraphClient: must be one of 'chief', 'notebook'"),
    ("classic-flags-string", _set(cluster, "classicFlags", "yes"), r"classicFlags: must be bool"),
    (
        "code-path-a-file",
        _code({"source": "configmap", "path": "README.md"}),
        r"code\.path: 'README\.md' is not a directory of the project",
    ),
    ("code-url-ftp", _code({"source": "url", "url": "ftp://x/train.py"}), r"code\.url: must be an http\(s\) URL"),
    (
        "namespace-space",
        _set(lambda r: r, "namespace", "tfk8s alice"),
        r"tfk8s:namespace: 'tfk8s alice' cannot name a namespace",
    ),
    ("namespace-newline", _set(lambda r: r, "namespace", "tfk8s-alice\n"), r"tfk8s:namespace: .* cannot name a namespace"),
    ("namespace-a-stack-name", _set(lambda r: r, "namespace", "tfk8s/tenant-alice"), r"tfk8s:namespace: .* cannot name"),
    ("namespace-uppercase", _set(lambda r: r, "namespace", "TFK8S-alice"), r"tfk8s:namespace: .* cannot name a namespace"),
    ("namespace-64-chars", _set(lambda r: r, "namespace", "a" * 64), r"tfk8s:namespace: .* cannot name a namespace: 1 to 63"),
    ("experiment-too-long", _set(lambda r: r, "experiment", "e" * 41), r"tfk8s:experiment: .*41 characters; at most 40"),
    (
        "experiment-and-cluster-too-long",
        lambda r: r.update(experiment="e" * 30) or cluster(r).update(name="c" * 15),
        r"clusters\[0\]\.name: .* is 46 characters; at most 40",
    ),
    ("workers-gpus-string", _workers("gpus", "1"), r"workers\.gpus: must be int"),
    ("ps-cpu-zero", _set(lambda r: cluster(r)["ps"], "cpu", "0"), r"ps\.cpu: must be greater than zero"),
    ("workers-memory-zero", _workers("memory", "0Gi"), r"workers\.memory: must be greater than zero"),
    ("clusters-not-a-list", lambda r: r.update(clusters={"name": "mnist"}), r"tfk8s:clusters: input should be a valid array"),
    ("experiment-typo-key", _set(lambda r: r, "experimnt", "x"), r"tfk8s:experimnt: unknown key"),
    ("system-user", _set(lambda r: r["tenant"]["identities"], "users", ["system:admin"]), r"identities\.users\[0\]: "),
    (
        "system-group",
        _set(lambda r: r["tenant"]["identities"], "groups", ["system:masters"]),
        r"identities\.groups\[0\]: 'system:masters' is one of Kubernetes' own groups",
    ),
    (
        "log-size-trailing-space",
        _set(lambda r: r["tenant"], "volumes", {"logSize": "1Gi "}),
        r"volumes\.logSize: '1Gi ' " + QUANTITY,
    ),
    ("quota-gpus-negative", _set(lambda r: r["tenant"], "quota", {"gpus": -1}), r"quota\.gpus: must be 0 or more"),
    ("quota-pods-zero", _set(lambda r: r["tenant"], "quota", {"pods": 0}), r"quota\.pods: must be at least 1"),
    (
        "quota-storage-below-volumes",
        _set(lambda r: r["tenant"], "quota", {"storage": "1Gi"}),
        r"tenant\.volumes: the data and log volumes .* do not fit",
    ),
    (
        "quota-one-claim",
        _set(lambda r: r["tenant"], "quota", {"persistentVolumeClaims": 1}),
        r"quota\.persistentVolumeClaims: the data and log volumes are 2 claims",
    ),
    (
        "keep-on-destroy-string",
        _set(lambda r: r["tenant"], "volumes", {"keepOnDestroy": "no"}),
        r"volumes\.keepOnDestroy: must be bool",
    ),
    ("user-name-too-long", _set(lambda r: r["tenant"], "name", "u" * 41), r"tfk8s:tenant\.name: .*41 characters; at most 40"),
    (
        "platform-stack-space",
        _set(lambda r: r, "platformStack", "platform dev"),
        r"tfk8s:platformStack: 'platform dev' is not a stack name",
    ),
    ("namespace-prefix-slash", _platform("namespacePrefix", "tf/"), r"namespacePrefix: 'tf/' must be lowercase"),
    ("await-timeout-zero", _platform("awaitTimeoutSeconds", 0), r"awaitTimeoutSeconds: must be at least 1"),
    (
        "class-name-upper",
        _set(lambda r: r["platform"]["storage"], "className", "Shared"),
        r"storage\.className: 'Shared' is not a DNS-1123 label",
    ),
    (
        "reclaim-policy-unknown",
        _set(lambda r: r["platform"]["storage"], "reclaimPolicy", "Keep"),
        r"storage\.reclaimPolicy: must be one of",
    ),
    (
        "gluster-volume-type-unknown",
        lambda r: r["platform"].update(
            kubernetesVersion="1.25",
            storage={"backend": "glusterfs", "glusterfs": {"restUrl": "http://heketi:8080", "volumeType": "mirror:2"}},
        ),
        r"glusterfs\.volumeType: ",
    ),
    (
        "gluster-rest-user-shell",
        lambda r: r["platform"].update(
            kubernetesVersion="1.25",
            storage={"backend": "glusterfs", "glusterfs": {"restUrl": "http://heketi:8080", "restUser": "admin; id"}},
        ),
        r"glusterfs\.restUser: ",
    ),
    (
        "run-as-root",
        _platform("podSecurity", {"tensorflow": {"runAsUser": 0, "runAsGroup": 0, "fsGroup": 0}}),
        r"podSecurity\.tensorflow\.runAsUser: must be at least 1",
    ),
    (
        "default-quota-memory-fraction",
        _platform("defaultQuota", {"memory": "1.5"}),
        r"defaultQuota\.memory: '1\.5' is a fraction of a byte",
    ),
    (
        "container-defaults-cpu-zero",
        _platform("containerDefaults", {"cpu": "0"}),
        r"containerDefaults\.cpu: must be greater than zero",
    ),
    (
        "dns-namespace-bad",
        _platform("network", {"dns": {"namespace": "Kube System"}}),
        r"network\.dns\.namespace: 'Kube System' is not a DNS-1123 label",
    ),
    (
        "placement-bad-key",
        _platform("placement", {"tolerationKeys": ["gpu node"]}),
        r"placement\.tolerationKeys\[0\]: 'gpu node' " + KEY,
    ),
    ("tensorboard-image-newline", _platform("images", {"tensorboard": "tf\n"}), r"images\.tensorboard: .*" + IMAGE),
    (
        "tensorflow-image-latest",
        _platform("images", {"tensorflow": "tensorflow/tensorflow:latest"}),
        r"images\.tensorflow: 'tensorflow/tensorflow:latest' is tagged latest: .*pin a tag other than latest or a digest",
    ),
    (
        "jupyter-image-untagged",
        _platform("images", {"jupyter": "registry.local:5000/jupyter"}),
        r"images\.jupyter: 'registry\.local:5000/jupyter' is untagged: .*platform\.images\.allowLatest: true",
    ),
    (
        "user-node-address-not-a-host",
        _platform("userNode", {"name": "tfk8s-user-node", "address": "http://10.0.0.5/"}),
        r"userNode\.address: 'http://10\.0\.0\.5/' is neither an IP address nor a host name",
    ),
    ("api-server-host-bits", _platform("network", {"apiServer": {"cidrs": ["10.0.0.1/8"]}}), r"apiServer\.cidrs\[0\]"),
    ("dns-label-bad", _platform("network", {"dns": {"podLabels": {"k8s-app": "kube dns"}}}), r"dns\.podLabels\.k8s-app: "),
    (
        "tenant-stack-of-an-earlier-tfk8s",
        _set(lambda r: r, "tenantStack", "tenant-alice"),
        r"tfk8s:tenantStack: no longer read: an experiment names its tenant's namespace instead, tfk8s:namespace: ",
    ),
    (
        "pod-cidrs-empty-where-policies-are-enforced",
        _platform("network", {"policyEnforced": True}),
        r"tfk8s:platform\.network\.podCidrs: is empty while the cluster enforces policies .*another tenant's code",
    ),
    (
        "wait-for-pods-ready-of-an-earlier-tfk8s",
        _platform("queueing", {"enabled": True, "waitForPodsReady": True}),
        r"tfk8s:platform\.queueing\.waitForPodsReady: no longer read \(removed in 0\.3\.0\): .*delete the key",
    ),
    ("namespace-empty", _set(lambda r: r, "namespace", ""), r"tfk8s:namespace: is empty: whose experiment this is"),
    ("platform-stack-empty", _set(lambda r: r, "platformStack", ""), r"tfk8s:platformStack: is empty: the platform stack"),
]


def _tenant(key: str, value: Any) -> Callable[[Raw], None]:
    return _set(lambda r: r["tenant"], key, value)


def _identities(**identities: list[str]) -> Callable[[Raw], None]:
    return _tenant("identities", identities)


def _network(**network: Any) -> Callable[[Raw], None]:
    """platform.network as given, on a cluster that enforces policies (so with its pod ranges)."""
    return _platform("network", {"podCidrs": ["10.244.0.0/16"], **network})


def _gluster(**settings: Any) -> Callable[[Raw], None]:
    def mutate(raw: Raw) -> None:
        raw["platform"].update(kubernetesVersion="1.25", storage={"backend": "glusterfs", "glusterfs": settings})

    return mutate


NO_UNIT = r"has no unit, so it is \d+ bytes: add a unit, e.g. "
FOREIGN_ACCOUNT = r"is a service account of namespace '{}', so any pod run there as it would act for this tenant"
# Found by an independent hostile suite (issue 35): values that crashed with a traceback, or that
# were taken although they hand something away, open a network, or are silently ignored.
HOSTILE_SUITE = [
    # Crashes: a port beyond 65535 raised in urllib when the network policy was built.
    ("code-url-port-too-big", _code({"source": "url", "url": "http://x:99999/a.py"}), r"code\.url: the port of .* \(1-65535\)"),
    ("code-url-port-zero", _code({"source": "url", "url": "http://x:0/a.py"}), r"code\.url: the port of .* \(1-65535\)"),
    ("heketi-url-port-too-big", _gluster_url("http://heketi:99999"), r"restUrl: the port of 'http://heketi:99999' must be a TCP"),
    ("heketi-url-port-text", _gluster_url("http://heketi:80a/"), r"restUrl: the port of .* must be a TCP port"),
    ("heketi-url-no-host", _gluster_url("http://:8080/"), r"restUrl: 'http://:8080/' names no host"),
    # Identities: another namespace's accounts, names Kubernetes cannot have, patterns, too many.
    (
        "identity-other-tenants-account",
        _identities(users=["system:serviceaccount:tfk8s-bob:default"]),
        r"identities\.users\[0\]: .*" + FOREIGN_ACCOUNT.format("tfk8s-bob") + r".*\('tfk8s-alice'\) or of tfk8s-gitops",
    ),
    (
        "identity-kube-system-account",
        _identities(users=["alice", "system:serviceaccount:kube-system:default"]),
        r"identities\.users\[1\]: .*" + FOREIGN_ACCOUNT.format("kube-system"),
    ),
    (
        "identity-account-name-upper",
        _identities(users=["system:serviceaccount:tfk8s-alice:Runner"]),
        r"users\[0\]: '.*:Runner' names no service account Kubernetes can have",
    ),
    (
        "identity-account-namespace-dot",
        _identities(users=["system:serviceaccount:tfk8s.alice:runner"]),
        r"users\[0\]: .* names no service account Kubernetes can have: its namespace is a DNS-1123 label",
    ),
    ("identity-wildcard-user", _identities(users=["*"]), r"users\[0\]: '\*': an identity is one name, never a pattern"),
    ("identity-wildcard-in-user", _identities(users=["alice", "ali*"]), r"users\[1\]: 'ali\*': an identity is one name"),
    ("identity-wildcard-group", _identities(groups=["ml-*"]), r"groups\[0\]: 'ml-\*': an identity is one name"),
    (
        "identities-too-many",
        _identities(users=[f"u{i}" for i in range(60)], groups=[f"g{i}" for i in range(41)]),
        r"tfk8s:tenant\.identities: 60 users and 41 groups; at most 100 together .* bind a group",
    ),
    # Network: ranges that open pods to (most of) the Internet; addresses without ports.
    (
        "api-server-cidr-everything",
        _network(apiServer={"cidrs": ["0.0.0.0/0"], "ports": [6443]}),
        r"apiServer\.cidrs\[0\]: '0\.0\.0\.0/0' is wider than /8",
    ),
    (
        "api-server-cidr-wider-than-8",
        _network(apiServer={"cidrs": ["10.0.0.1/32", "10.0.0.0/7"], "ports": [6443]}),
        r"apiServer\.cidrs\[1\]: '10\.0\.0\.0/7' is wider than /8",
    ),
    ("dns-cidr-everything-v6", _network(dns={"cidrs": ["::/0"]}), r"dns\.cidrs\[0\]: '::/0' is wider than /32.*fd00::10/128"),
    ("dns-cidr-wider-than-32-v6", _network(dns={"cidrs": ["2000::/3"]}), r"dns\.cidrs\[0\]: '2000::/3' is wider than /32"),
    (
        "api-server-cidrs-without-ports",
        _network(apiServer={"cidrs": ["10.0.0.10/32"]}),
        r"^invalid tfk8s configuration:\n  - tfk8s:platform\.network\.apiServer\.ports: cidrs are set \(10\.0\.0\.10/32\) but no "
        r"port.*set tfk8s:platform\.network\.apiServer\.ports too, e\.g\. \[6443\]$",
    ),
    (
        "api-server-ports-without-cidrs",
        _network(apiServer={"ports": [6443]}),
        r"apiServer\.ports: without cidrs .* these would be ignored: set tfk8s:platform\.network\.apiServer\.cidrs too",
    ),
    # The User Node: a name no node can have.
    ("user-node-name-empty", _set(lambda r: r["platform"]["userNode"], "name", ""), r"userNode\.name: '' is not a DNS-1123"),
    ("user-node-name-space", _set(lambda r: r["platform"]["userNode"], "name", "user node"), r"userNode\.name: .* DNS-1123"),
    ("user-node-name-upper", _set(lambda r: r["platform"]["userNode"], "name", "Node-1"), r"userNode\.name: 'Node-1' is not"),
    # Placement: the platform may not allow Kubernetes' own taints and labels, nor the User Node's.
    (
        "placement-tolerates-control-plane",
        _platform("placement", {"tolerationKeys": ["nvidia.com/gpu", "node-role.kubernetes.io/control-plane"]}),
        r"placement\.tolerationKeys\[1\]: 'node-role\.kubernetes\.io/control-plane' is a taint Kubernetes puts",
    ),
    (
        "placement-tolerates-cordoned",
        _platform("placement", {"tolerationKeys": ["node.kubernetes.io/unschedulable"]}),
        r"placement\.tolerationKeys\[0\]: .* training pods must never tolerate it",
    ),
    (
        "placement-tolerates-user-node",
        _platform("placement", {"tolerationKeys": ["tfk8s.io/user-node"]}),
        r"placement\.tolerationKeys\[0\]: 'tfk8s\.io/user-node' is the User Node's taint \(userNode\.taintKey\)",
    ),
    (
        "placement-selects-hostname",
        _platform("placement", {"nodeSelectorKeys": ["kubernetes.io/hostname"]}),
        r"placement\.nodeSelectorKeys\[0\]: 'kubernetes\.io/hostname' picks single nodes by name",
    ),
    (
        "placement-selects-control-plane",
        _platform("placement", {"nodeSelectorKeys": ["node-role.kubernetes.io/control-plane"]}),
        r"placement\.nodeSelectorKeys\[0\]: .* selects the control plane",
    ),
    (
        "placement-selects-user-node-label",
        _platform("placement", {"nodeSelectorKeys": ["tfk8s.io/user-node"]}),
        r"placement\.nodeSelectorKeys\[0\]: 'tfk8s\.io/user-node' is the User Node's label",
    ),
    (
        "toleration-cordoned-node",
        _workers("tolerations", [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]),
        r"workers\.tolerations\[0\]: .* tolerates a taint Kubernetes puts on a node in trouble",
    ),
    (
        "ps-toleration-uninitialized-node",
        _set(lambda r: cluster(r)["ps"], "tolerations", [{"key": "node.cloudprovider.kubernetes.io/uninitialized"}]),
        r"ps\.tolerations\[0\]: .* tolerates a taint Kubernetes puts on a node in trouble",
    ),
    (
        "node-selector-control-plane",
        _workers("nodeSelector", {"node-role.kubernetes.io/control-plane": ""}),
        r"workers\.nodeSelector: \['node-role\.kubernetes\.io/control-plane'\] selects the control plane",
    ),
    # Numbers: ids Kubernetes refuses; sizes without a unit (`10` is 10 bytes).
    (
        "run-as-user-above-int32",
        _platform("podSecurity", {"tensorflow": {"runAsUser": 2**31, "runAsGroup": 1000, "fsGroup": 1000}}),
        r"podSecurity\.tensorflow\.runAsUser: must be at most 2147483647",
    ),
    (
        "fs-group-above-int32",
        _platform("podSecurity", {"jupyter": {"runAsUser": 1000, "runAsGroup": 100, "fsGroup": 2**32}}),
        r"podSecurity\.jupyter\.fsGroup: must be at most 2147483647",
    ),
    (
        "gid-max-above-int32",
        _gluster(restUrl="http://heketi:8080", gidMax=2**31),
        r"glusterfs\.gidMax: must be at most 2147483647",
    ),
    ("data-size-bare-number", _tenant("volumes", {"dataSize": 10}), r"volumes\.dataSize: '10' " + NO_UNIT + "10Gi"),
    ("log-size-bare-string", _tenant("volumes", {"logSize": "1073741824"}), r"volumes\.logSize: '1073741824' " + NO_UNIT),
    ("memory-bare-number", _workers("memory", 2048), r"workers\.memory: '2048' " + NO_UNIT + "2048Gi"),
    ("memory-milli-bytes", _workers("memory", "2000m"), r"workers\.memory: '2000m' has no unit, so it is 2 bytes"),
    ("memory-exponent", _workers("memory", "1e9"), r"workers\.memory: '1e9' has no unit, so it is 1000000000 bytes"),
    ("scratch-size-bare", _set(cluster, "scratch", {"size": 20}), r"scratch\.size: '20' " + NO_UNIT),
    ("quota-storage-bare", _tenant("quota", {"storage": "500"}), r"quota\.storage: '500' " + NO_UNIT),
    ("default-quota-memory-bare", _platform("defaultQuota", {"memory": 128}), r"defaultQuota\.memory: '128' " + NO_UNIT),
    (
        "container-memory-bare",
        _platform("containerDefaults", {"memory": "2048"}),
        r"containerDefaults\.memory: '2048' " + NO_UNIT,
    ),
    # Quotas: a tenant's own Jupyter and TensorBoard (1 CPU, 2Gi each, the token gate 100m, 128Mi) must fit.
    (
        "quota-cpu-below-own-apps",
        _tenant("quota", {"cpu": "2"}),
        r"^invalid tfk8s configuration:\n  - tfk8s:tenant\.quota\.cpu: the tenant's own objects take 2\.1 \("
        r"Jupyter 1 \+ TensorBoard 1 \+ its token gate 100m, at containerDefaults\.cpu\) but its quota is 2: raise it to at "
        r"least 2\.1, plus what its experiments need, or ask the platform team to lower platform\.containerDefaults\.cpu$",
    ),
    (
        "quota-memory-below-own-apps",
        _tenant("quota", {"memory": "4Gi"}),
        r"quota\.memory: .* take 4224Mi \(Jupyter 2Gi \+ TensorBoard 2Gi \+ its token gate 128Mi.*quota is 4Gi",
    ),
    ("quota-pods-below-own-apps", _tenant("quota", {"pods": 1}), r"quota\.pods: .* take 2 \(Jupyter's and TensorBoard's pods\)"),
    (
        "quota-services-below-own-apps",
        _tenant("quota", {"services": 2}),
        r"quota\.services: .* take 3 \(Jupyter's, TensorBoard's",
    ),
    # ...and so must its other objects, which the quota counts once they exist (tfk8s.specs.quota.TENANT_OWN_COUNTS).
    (
        "quota-config-maps-below-own-objects",
        _tenant("quota", {"configMaps": 5}),
        r"quota\.configMaps: the tenant's own objects take 6 \(the trainer package, .*kube-root-ca\.crt\) but its quota "
        r"is 5: raise it to at least 6",
    ),
    (
        "quota-network-policies-below-own-objects",
        _tenant("quota", {"networkPolicies": 1}),
        r"quota\.networkPolicies: .* take 5 \(the namespace's default deny",
    ),
    (
        "default-quota-role-bindings-below-own-objects",
        _platform("defaultQuota", {"roleBindings": 2}),
        r"defaultQuota\.roleBindings: every tenant's own objects take 3 .* default quota is 2",
    ),
    (
        "default-quota-below-container-defaults",
        _platform("containerDefaults", {"cpu": "16"}),
        r"defaultQuota\.cpu: every tenant's own objects take 32\.1 .* default quota is 32: raise it to at least "
        r"32\.1, plus what experiments need, or lower tfk8s:platform\.containerDefaults\.cpu",
    ),
    (
        "default-quota-services-below-own-apps",
        _platform("defaultQuota", {"services": 2}),
        r"defaultQuota\.services: every tenant's own objects take 3 .* default quota is 2: raise it to at least 3",
    ),
    # Credentials in URLs: plain text in the stack file, the state and the objects.
    (
        "code-url-credentials",
        _code({"source": "url", "url": "http://user:pass@x/a.py"}),
        r"code\.url: carries credentials \(user:password@host\).*plain text: serve the code .*code\.source: image",
    ),
    (
        "heketi-url-credentials",
        _gluster_url("http://admin:key@heketi:8080"),
        r"restUrl: carries credentials .* restUser and its key as the secret tfk8s:heketiAdminKey",
    ),
    ("heketi-url-user", _gluster_url("https://admin@heketi"), r"glusterfs\.restUrl: carries credentials"),
    # Settings that do not apply are refused, not ignored.
    (
        "code-url-with-configmap",
        _code({"source": "configmap", "url": "http://x/a.py"}),
        r"code\.url: applies to source 'url' alone, and the source is 'configmap': remove it, or set "
        r"tfk8s:clusters\[0\]\.code\.source: url",
    ),
    ("code-url-with-image", _code({"source": "image", "url": "http://x/a.py"}), r"code\.url: applies to source 'url' alone"),
    # A code URL opens its port to every address: never the port every tenant's apps answer on.
    (
        "code-url-on-jupyters-port",
        _code({"source": "url", "url": "http://code.example:8888/train.py", "addresses": ["203.0.113.7/32"]}),
        r"code\.url: its port 8888 is where every tenant's Jupyter answers.*serve the code on another port, or set "
        r"tfk8s:clusters\[0\]\.code\.source: configmap or image",
    ),
    (
        "code-url-on-tensorboards-port",
        _code({"source": "url", "url": "http://code.example:6006/train.py", "addresses": ["203.0.113.7/32"]}),
        r"code\.url: its port 6006 is where every tenant's TensorBoard answers",
    ),
    (
        "code-path-with-image",
        _code({"source": "image", "path": "training/tfk8s_train"}),
        r"code\.path: applies to source 'configmap' alone, and the source is 'image'",
    ),
    (
        "code-path-with-url",
        _code({"source": "url", "url": "http://10.0.0.9/a.py", "path": "training"}),
        r"code\.path: applies to source 'configmap' alone, and the source is 'url'",
    ),
    (
        "in-graph-client-with-between-graph",
        _set(cluster, "inGraphClient", "notebook"),
        r"clusters\[0\]\.inGraphClient: applies to in-graph replication alone .* set tfk8s:clusters\[0\]\.replication: in-graph",
    ),
    (
        "in-graph-client-chief-with-between-graph",
        lambda r: cluster(r).update(replication="between-graph", inGraphClient="chief"),
        r"clusters\[0\]\.inGraphClient: applies to in-graph replication alone",
    ),
    # Namespaces a tenant's may never be: the GitOps operator's, the storage Secret's, Kubernetes' own.
    (
        "tenant-namespace-gitops",
        _tenant("name", "gitops"),
        r"tfk8s:tenant\.name: the tenant's namespace would be 'tfk8s-gitops' \('tfk8s-' \+ 'gitops'\), where the GitOps "
        r"operator's .*: choose another tenant\.name",
    ),
    (
        "tenant-namespace-storage",
        _tenant("name", "storage"),
        r"tfk8s:tenant\.name: the tenant's namespace would be 'tfk8s-storage' .* storage Secret",
    ),
    (
        "namespace-prefix-kube",
        _platform("namespacePrefix", "kube-"),
        r"namespacePrefix: 'kube-': namespaces kube-\* are Kubernetes'",
    ),
]

BAD = [
    ("workers-zero", _set(lambda r: cluster(r)["workers"], "count", 0), r"workers\.count: must be at least 1"),
    ("ps-negative", _set(lambda r: cluster(r)["ps"], "count", -1), r"ps\.count: must be at least 1"),
    ("workers-count-string", _set(lambda r: cluster(r)["workers"], "count", "two"), r"workers\.count: must be int"),
    ("workers-count-bool", _set(lambda r: cluster(r)["workers"], "count", True), r"workers\.count: must be int"),
    ("cluster-name-upper", _set(cluster, "name", "MNIST"), r"clusters\[0\]\.name: 'MNIST' is not a DNS-1123 label"),
    ("cluster-name-underscore", _set(cluster, "name", "my_model"), r"clusters\[0\]\.name: .*DNS-1123"),
    ("cluster-name-too-long", _set(cluster, "name", "a" * 41), r"clusters\[0\]\.name: .*41 characters; at most 40"),
    ("user-name-missing", lambda r: r["tenant"].pop("name"), r"tfk8s:tenant\.name: is required"),
    ("user-name-upper", _set(lambda r: r["tenant"], "name", "Bob"), r"tfk8s:tenant\.name: 'Bob' is not a DNS-1123 label"),
    (
        "unknown-replication",
        _set(cluster, "replication", "all-reduce"),
        r"replication: must be one of 'between-graph', 'in-graph'",
    ),
    ("unknown-training", _set(cluster, "training", "semi-sync"), r"training: must be one of 'async', 'sync'"),
    ("unknown-backend", _set(lambda r: r["platform"]["storage"], "backend", "hdfs"), r"storage\.backend: must be one of"),
    (
        "heketi-url-missing",
        lambda r: r["platform"].update(kubernetesVersion="1.25", storage={"backend": "glusterfs", "glusterfs": {}}),
        r"glusterfs\.restUrl: is required",
    ),
    (
        "heketi-url-not-http",
        lambda r: r["platform"].update(
            kubernetesVersion="1.25", storage={"backend": "glusterfs", "glusterfs": {"restUrl": "heketi:8080"}}
        ),
        r"glusterfs\.restUrl: must be an http\(s\) URL",
    ),
    (
        "glusterfs-on-1.26",
        _gluster_on("1.26"),
        r"storage\.backend: 'glusterfs' .* removed in Kubernetes 1\.26.*Fix: use backend 'csi'",
    ),
    (
        "csi-without-provisioner",
        _set(lambda r: r["platform"], "storage", {"backend": "csi", "csi": {}}),
        r"csi\.provisioner: is required",
    ),
    ("gpus-on-ps", _set(lambda r: cluster(r)["ps"], "gpus", 1), r"ps\.gpus: parameter servers .*allowPsGpus"),
    ("gpus-negative", _set(lambda r: cluster(r)["workers"], "gpus", -2), r"workers\.gpus: must be 0 or more"),
    ("duplicate-cluster", _duplicate_cluster, r"clusters\[1\]\.name: duplicate cluster name 'mnist'"),
    ("duplicate-identity", _duplicate_identity, r"tenant\.identities\.users\[1\]: 'alice' is listed twice; remove one"),
    (
        "memory-not-quantity",
        _set(lambda r: cluster(r)["workers"], "memory", "lots"),
        r"workers\.memory: 'lots' is not a Kubernetes quantity",
    ),
    (
        "data-size-zero",
        _set(lambda r: r["tenant"], "volumes", {"dataSize": "0Gi"}),
        r"tfk8s:tenant\.volumes\.dataSize: must be greater than zero",
    ),
    (
        "namespace-prefix-upper",
        _set(lambda r: r["platform"], "namespacePrefix", "TF_"),
        r"namespacePrefix: 'TF_' must be lowercase",
    ),
    ("namespace-prefix-long", _set(lambda r: r["platform"], "namespacePrefix", "x" * 24), r"namespacePrefix: .* at most 23"),
    ("data-sub-path-escapes", _set(cluster, "dataSubPath", "../bob"), r"dataSubPath: '\.\./bob' must be a relative path"),
    ("kind-missing", lambda r: r.pop("kind"), r"tfk8s:kind: it is missing; set `tfk8s:kind: platform`"),
    ("platform-key-in-experiment", _set(lambda r: r, "users", []), r"tfk8s:users: unknown key"),
    ("platform-stack-in-experiment", _set(lambda r: r, "platformStack", "platform-dev"), r"tfk8s:platformStack: unknown key"),
    ("users-in-platform", _set(lambda r: r, "users", [{"name": "alice"}]), r"tfk8s:users: unknown key"),
    ("platform-stack-missing", lambda r: r.pop("platformStack"), r"tfk8s:platformStack: is required"),
    ("user-node-missing", lambda r: r["platform"]["userNode"].pop("name"), r"platform\.userNode\.name: is required"),
    ("typo-key", _set(cluster, "wokers", {"count": 3}), r"clusters\[0\]\.wokers: unknown key"),
    ("url-source-without-url", _set(cluster, "code", {"source": "url"}), r"code\.url: source 'url' needs an http\(s\) URL"),
    (
        "code-path-missing",
        _set(cluster, "code", {"source": "configmap", "path": "no/such/dir"}),
        r"code\.path: 'no/such/dir' is not a directory",
    ),
    (
        "port-out-of-range",
        _set(lambda r: r["platform"], "ports", {"tensorflow": 70000}),
        r"ports\.tensorflow: must be a TCP port",
    ),
    (
        "user-node-toleration",
        _set(lambda r: cluster(r)["workers"], "tolerations", [{"operator": "Exists"}]),
        r"workers\.tolerations\[0\]: .* tolerates the User Node taint",
    ),
    ("tenant-missing", lambda r: r.pop("tenant"), r"tfk8s:tenant: is required"),
    ("clusters-empty", lambda r: r.update(clusters=[]), r"tfk8s:clusters: must be a non-empty list"),
    (
        "scratch-class-on-local",
        _set(lambda r: r["platform"]["storage"], "scratchClassName", "scratch"),
        r"storage\.scratchClassName: backend 'local' has no provisioner .*remove the key",
    ),
    (
        "scratch-class-is-the-shared-class",
        _set(
            lambda r: r["platform"],
            "storage",
            {"backend": "csi", "csi": {"provisioner": "nfs.csi.k8s.io"}, "scratchClassName": "tfk8s-shared"},
        ),
        r"storage\.scratchClassName: is className \('tfk8s-shared'\).*give them different names",
    ),
    (
        "scratch-without-a-scratch-class",
        _set(cluster, "scratch", {"size": "1Gi"}),
        r"clusters\[0\]\.scratch: the platform offers no class for scratch volumes.*platform\.storage\.scratchClassName",
    ),
    ("scratch-size-bad", _set(cluster, "scratch", {"size": "big"}), r"scratch\.size: 'big' is not a Kubernetes quantity"),
    (
        "cluster-image-latest",
        _set(cluster, "image", "tensorflow/tensorflow:latest"),
        r"clusters\[0\]\.image: 'tensorflow/tensorflow:latest' is tagged latest: .*ask the platform team",
    ),
    (
        "bad-k8s-version",
        _set(lambda r: r["platform"], "kubernetesVersion", "v1.34.0"),
        r"kubernetesVersion: must look like '1\.34'",
    ),
    *HOSTILE,
    *HOSTILE_SUITE,
]


def _target(case_id: str) -> str:
    return "platform-dev" if case_id in PLATFORM_CASES else "tenant-alice" if case_id in TENANT_CASES else "dev"


PLATFORM_CASES = [
    "pod-cidrs-empty-where-policies-are-enforced",
    "wait-for-pods-ready-of-an-earlier-tfk8s",
    "await-timeout-zero",
    "class-name-upper",
    "container-defaults-cpu-zero",
    "default-quota-memory-fraction",
    "dns-namespace-bad",
    "gluster-rest-user-shell",
    "gluster-volume-type-unknown",
    "namespace-prefix-slash",
    "placement-bad-key",
    "reclaim-policy-unknown",
    "run-as-root",
    "tensorboard-image-newline",
    "tensorflow-image-latest",
    "jupyter-image-untagged",
    "user-node-address-not-a-host",
    "api-server-host-bits",
    "dns-label-bad",
    "heketi-url-newline",
    "heketi-url-space",
    "host-path-dotdot",
    "host-path-newline",
    "host-path-relative",
    "jupyter-port-is-tensorflows",
    "platform-image-empty",
    "platform-image-shell",
    "port-string",
    "port-zero",
    "metrics-port-is-tensorflows",
    "metrics-port-is-tensorboards-own",
    "monitoring-namespace-upper",
    "monitoring-scrape-unknown",
    "monitoring-interval-bare",
    "monitoring-pod-label-space",
    "monitoring-label-of-tfk8s",
    "monitoring-in-the-storage-secret-namespace",
    "taint-key-slashes",
    "taint-key-space",
    "bad-k8s-version",
    "csi-without-provisioner",
    "glusterfs-on-1.26",
    "heketi-url-missing",
    "heketi-url-not-http",
    "namespace-prefix-long",
    "namespace-prefix-upper",
    "port-out-of-range",
    "scratch-class-is-the-shared-class",
    "scratch-class-on-local",
    "unknown-backend",
    "user-node-missing",
    "users-in-platform",
    "api-server-cidr-everything",
    "api-server-cidr-wider-than-8",
    "dns-cidr-everything-v6",
    "dns-cidr-wider-than-32-v6",
    "api-server-cidrs-without-ports",
    "api-server-ports-without-cidrs",
    "user-node-name-empty",
    "user-node-name-space",
    "user-node-name-upper",
    "placement-tolerates-control-plane",
    "placement-tolerates-cordoned",
    "placement-tolerates-user-node",
    "placement-selects-hostname",
    "placement-selects-control-plane",
    "placement-selects-user-node-label",
    "run-as-user-above-int32",
    "fs-group-above-int32",
    "gid-max-above-int32",
    "default-quota-memory-bare",
    "container-memory-bare",
    "default-quota-below-container-defaults",
    "default-quota-services-below-own-apps",
    "default-quota-role-bindings-below-own-objects",
    "heketi-url-port-too-big",
    "heketi-url-port-text",
    "heketi-url-no-host",
    "heketi-url-credentials",
    "heketi-url-user",
    "namespace-prefix-kube",
]
TENANT_CASES = [
    "keep-on-destroy-string",
    "log-size-trailing-space",
    "platform-stack-space",
    "quota-gpus-negative",
    "quota-one-claim",
    "quota-pods-zero",
    "quota-storage-below-volumes",
    "system-group",
    "system-user",
    "user-name-too-long",
    "data-size-fraction",
    "platform-stack-empty",
    "quota-cpu-text",
    "quota-memory-fraction",
    "user-name-digit",
    "user-name-space",
    "data-size-zero",
    "duplicate-identity",
    "platform-stack-missing",
    "tenant-missing",
    "user-name-missing",
    "user-name-upper",
    "identity-other-tenants-account",
    "identity-kube-system-account",
    "identity-account-name-upper",
    "identity-account-namespace-dot",
    "identity-wildcard-user",
    "identity-wildcard-in-user",
    "identity-wildcard-group",
    "identities-too-many",
    "data-size-bare-number",
    "log-size-bare-string",
    "quota-storage-bare",
    "quota-cpu-below-own-apps",
    "quota-memory-below-own-apps",
    "quota-pods-below-own-apps",
    "quota-services-below-own-apps",
    "quota-config-maps-below-own-objects",
    "quota-network-policies-below-own-objects",
    "tenant-namespace-gitops",
    "tenant-namespace-storage",
]


@pytest.mark.parametrize(("case", "mutate", "message"), BAD, ids=[i for i, _, _ in BAD])
def test_bad_config_is_rejected_with_the_key_named(case: str, mutate: Callable[[Raw], None], message: str) -> None:
    raw = copy.deepcopy(stack_config(_target(case)))
    mutate(raw)
    with pytest.raises(ConfigError, match=message):
        parse(raw)


# Valid controls: values at the edge of a refusal above, accepted (stack, mutation).
GOOD = [
    ("image-by-digest-alone", "platform-dev", _platform("images", {"tensorflow": "tensorflow/tensorflow@sha256:" + "a" * 64})),
    ("image-registry-port-tagged", "platform-dev", _platform("images", {"jupyter": "registry.local:5000/jupyter:2025-12-01"})),
    ("user-node-address-ipv6", "platform-dev", _platform("userNode", {"name": "tfk8s-user-node", "address": "fd00::5"})),
    ("user-node-address-host", "platform-dev", _platform("userNode", {"name": "tfk8s-user-node", "address": "node.example.com"})),
    ("code-url-highest-port", "dev", _code({"source": "url", "url": "http://10.0.0.9:65535/a.py"})),
    ("heketi-url-lowest-port", "platform-dev", _gluster_url("http://heketi:1")),
    ("heketi-url-at-in-path", "platform-dev", _gluster_url("http://heketi:8080/a@b")),
    ("identity-own-account", "tenant-alice", _identities(users=["system:serviceaccount:tfk8s-alice:ci.runner"])),
    ("identity-gitops-account", "tenant-alice", _identities(users=["alice", "system:serviceaccount:tfk8s-gitops:tfk8s-dev"])),
    ("identities-100", "tenant-alice", _identities(users=[f"u{i}" for i in range(50)], groups=[f"g{i}" for i in range(50)])),
    ("api-server-cidr-8", "platform-dev", _network(apiServer={"cidrs": ["10.0.0.0/8"], "ports": [6443]})),
    ("dns-cidr-32-v6", "platform-dev", _network(dns={"cidrs": ["2001:db8::/32", "169.254.20.10/32"]})),
    ("user-node-subdomain", "platform-dev", _set(lambda r: r["platform"]["userNode"], "name", "node-1.example.com")),
    (
        "placement-own-keys",
        "platform-dev",
        _platform("placement", {"tolerationKeys": ["nvidia.com/gpu"], "nodeSelectorKeys": ["node.kubernetes.io/instance-type"]}),
    ),
    ("node-selector-another-node-by-name", "dev", _workers("nodeSelector", {"kubernetes.io/hostname": "gpu-node-1"})),
    (
        "ids-at-int32-max",
        "platform-dev",
        _platform("podSecurity", {"tensorflow": {"runAsUser": 2**31 - 1, "runAsGroup": 0, "fsGroup": 2**31 - 1}}),
    ),
    ("gid-max-at-int32-max", "platform-dev", _gluster(restUrl="http://heketi:8080", gidMax=2**31 - 1)),
    ("data-size-with-unit", "tenant-alice", _tenant("volumes", {"dataSize": "10Gi", "logSize": "10G"})),
    ("memory-decimal-unit", "dev", _workers("memory", "2G")),
    ("memory-bytes-in-kibibytes", "dev", _set(lambda r: cluster(r)["ps"], "memory", "1048576Ki")),
    ("quota-exactly-own-apps", "tenant-alice", _tenant("quota", {"cpu": "2.1", "memory": "4224Mi", "pods": 2, "services": 3})),
    (
        "default-quota-exactly-own-apps",
        "platform-dev",
        _platform("defaultQuota", {"cpu": "2.1", "memory": "4224Mi", "services": 3}),
    ),
    (
        "default-quota-without-token-gate",
        "platform-dev",
        lambda r: r["platform"].update(tensorboardRequiresToken=False, defaultQuota={"cpu": "2", "memory": "4Gi"}),
    ),
    ("code-image-alone", "dev", _code({"source": "image"})),
    ("code-url-alone", "dev", _code({"source": "url", "url": "http://10.0.0.9/a.py"})),
    ("code-path-null-with-image", "dev", _code({"source": "image", "path": None})),
    ("in-graph-client-with-in-graph", "dev", lambda r: cluster(r).update(replication="in-graph", inGraphClient="notebook")),
    ("cluster-name-digit", "dev", _set(cluster, "name", "1mnist")),
    ("namespace-63-chars", "dev", _set(lambda r: r, "namespace", "a" * 63)),
    ("tenant-name-beside-reserved", "tenant-alice", _tenant("name", "gitops2")),
    ("namespace-prefix-kube-without-dash", "platform-dev", _platform("namespacePrefix", "kubeflow-")),
    ("metrics-port-highest", "platform-dev", _platform("ports", {"metrics": 65535})),
    ("monitoring-every-pod-of-its-namespace", "platform-dev", _platform("monitoring", {"namespace": "prom", "podLabels": {}})),
    ("monitoring-interval-hours", "platform-dev", _platform("monitoring", {"namespace": "prom", "interval": "1h"})),
]


@pytest.mark.parametrize(("case", "stack", "mutate"), GOOD, ids=[i for i, _, _ in GOOD])
def test_values_at_the_edge_of_a_refusal_are_accepted(case: str, stack: str, mutate: Callable[[Raw], None]) -> None:
    raw = copy.deepcopy(stack_config(stack))
    mutate(raw)
    parse(raw)


@pytest.mark.parametrize("value", ["", "[", "{not json", "[1, 2"])
def test_a_string_that_looks_like_json_or_is_empty_is_refused_never_a_traceback(value: str) -> None:
    """`pulumi config set tfk8s:namespace ''` (or '[x') reached json.loads and crashed; now the schema says what is wrong."""
    config = {"tfk8s:kind": "experiment", "tfk8s:namespace": value, "tfk8s:clusters": '[{"name": "mnist"}]'}
    raw = stack_values(config)
    assert raw["namespace"] == value and raw["clusters"] == [{"name": "mnist"}]
    with pytest.raises(ConfigError, match=r"^invalid tfk8s configuration:\n  - tfk8s:namespace: "):
        validate(raw)


@pytest.mark.parametrize(
    ("stack", "secrets", "message"),
    [
        (
            "platform-dev",
            ["jupyterToken"],
            r"tfk8s:jupyterToken: is a secret of tenant stacks, not of platform stacks; remove it",
        ),
        ("dev", ["jupyterToken"], r"tfk8s:jupyterToken: is a secret of tenant stacks, not of experiment stacks"),
        ("tenant-alice", ["heketiAdminKey"], r"tfk8s:heketiAdminKey: is a secret of platform stacks, not of tenant stacks"),
        (
            "platform-dev",
            ["heketiAdminKey"],
            r"tfk8s:heketiAdminKey: storage backend 'local' reads no heketiAdminKey; remove it: `pulumi config rm "
            r"tfk8s:heketiAdminKey`",
        ),
    ],
    ids=["token-on-platform", "token-on-experiment", "heketi-key-on-tenant", "heketi-key-without-glusterfs"],
)
def test_a_secret_of_another_kind_of_stack_is_an_error_not_ignored(stack: str, secrets: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        validate(stack_config(stack), secrets)


def test_the_secrets_each_kind_reads_are_accepted() -> None:
    assert validate(stack_config("imagenet-platform"), ["heketiAdminKey"])
    assert validate(stack_config("tenant-alice"), ["jupyterToken"])
    assert secret_keys({"tfk8s:jupyterToken": "x", "tfk8s:kind": "tenant", "other:heketiAdminKey": "y"}) == {"jupyterToken"}


@pytest.mark.parametrize(
    ("key", "raw", "is_secret", "message"),
    [
        ("heketiAdminKey", "admin-key", False, r"tfk8s:heketiAdminKey: is stored in plain text .*config set --secret"),
        ("heketiAdminKey", "admin\nkey", True, r"tfk8s:heketiAdminKey: holds a line break or another control character"),
        ("heketiAdminKey", "", True, r"tfk8s:heketiAdminKey: must be at least 1 characters"),
        ("jupyterToken", "0123456789\nabcdef", True, r"tfk8s:jupyterToken: holds a line break .*openssl rand -hex 24"),
        ("jupyterToken", "0123456789abcdef\x07", True, r"tfk8s:jupyterToken: holds a line break or another control"),
    ],
    ids=["heketi-plain-text", "heketi-newline", "heketi-empty", "token-newline", "token-bell"],
)
def test_a_secret_in_plain_text_or_with_a_line_break_is_refused(key: str, raw: str, is_secret: bool, message: str) -> None:
    rules = JUPYTER_TOKEN_RULES if key == "jupyterToken" else {}
    with pytest.raises(ConfigError, match=message):
        parse_secret(key, raw, is_secret, **rules)


def test_a_heketi_key_in_plain_text_stops_the_platform_before_anything_exists(imagenet_platform_config: Raw) -> None:
    """As a Jupyter token in plain text does: the key would sit readable in the stack file."""
    from tfk8s.stack_kinds.platform import backend_secret

    settings = validate(imagenet_platform_config).platform.storage  # type: ignore[union-attr]
    pulumi.runtime.set_all_config({"tfk8s:heketiAdminKey": "admin-key"}, secret_keys=[])
    with pytest.raises(ConfigError, match=r"tfk8s:heketiAdminKey: is stored in plain text"):
        backend_secret(settings)
    pulumi.runtime.set_all_config({"tfk8s:heketiAdminKey": "admin-key"}, secret_keys=["tfk8s:heketiAdminKey"])
    assert backend_secret(settings) is not None


@pytest.mark.parametrize(
    ("prefix", "name", "why"),
    [
        ("", "default", "one of Kubernetes' own namespaces"),
        ("", "kube-system", "one of Kubernetes' own namespaces"),
        ("kub", "e-flow", "one of Kubernetes' own namespaces"),  # the prefix is fine, prefix + name is not
        ("kube", "-flow", None),  # no tenant name starts with '-'
        ("", "tfk8s-gitops", "where the GitOps operator's Stacks"),
        ("", "dns", "where the cluster's DNS pods run"),
        ("team-", "keys", "where the platform keeps its storage Secret"),
        ("team-", "prom", "where the platform's Prometheus runs, whose pods read every tenant's metrics"),
    ],
    ids=["default", "kube-system", "kube-by-halves", "not-a-name", "gitops", "dns", "secret-namespace", "monitoring"],
)
def test_a_tenants_namespace_is_never_one_the_cluster_or_platform_keeps(
    platform_config: Raw, tenant_config: Raw, prefix: str, name: str, why: str | None
) -> None:
    platform_config["platform"].update(
        namespacePrefix=prefix,
        network={"dns": {"namespace": "dns"}, "podCidrs": ["10.244.0.0/16"]},
        monitoring={"namespace": "team-prom"},
    )
    platform_config["platform"].update(kubernetesVersion="1.25")
    platform_config["platform"]["storage"] = {
        "backend": "glusterfs",
        "glusterfs": {"restUrl": "http://heketi:8080", "secretNamespace": "team-keys"},
    }
    facts = PlatformFacts.model_validate(facts_for(platform_config), strict=False)
    tenant_config["tenant"]["name"] = name
    if why is None:
        with pytest.raises(ConfigError, match=r"tfk8s:tenant\.name: .*DNS-1123"):
            parse(tenant_config)
        return
    with pytest.raises(ConfigError, match=rf"tfk8s:tenant\.name: the tenant's namespace would be '{prefix}{name}' .*{why}"):
        check_tenant(validate(tenant_config), facts)  # type: ignore[arg-type]


def test_a_cluster_name_may_start_with_a_digit_as_every_name_it_makes_starts_with_the_experiment(dev_config: Raw) -> None:
    """Services need a letter first (DNS-1035); every object named after a cluster is `<experiment>-<cluster>-...`
    (or the experiment's own name), and the experiment's name starts with a letter."""
    import re

    from tfk8s.specs import fixed_names
    from tfk8s.specs.cluster_spec import cluster_spec

    cluster(dev_config).update(name="2d-unet", scratch={"size": "1Gi"})
    stack = validate(dev_config)
    facts = PlatformFacts.model_validate(facts_for(stack_config("platform-dev")), strict=False)
    for experiment in ("dev", "e"):
        c = stack.clusters[0]  # type: ignore[union-attr]
        names = [o.name for o in fixed_names.cluster_claims(experiment, c, "tfk8s-alice", facts.layouts, "k")]
        hosts = [h.split(".")[0].split(":")[0] for hosts in cluster_spec(c, 2222, experiment=experiment).values() for h in hosts]
        assert names and hosts
        for name in names + hosts:
            assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 63, name
            assert name.startswith(f"{experiment}-2d-unet"), name


def test_every_problem_is_reported_at_once(dev_config: Raw, platform_config: Raw, tenant_config: Raw) -> None:
    cluster(dev_config)["workers"]["count"] = 0
    cluster(dev_config)["replication"] = "nope"
    cluster(dev_config)["ps"]["memory"] = "lots"
    with pytest.raises(ConfigError) as error:
        parse(dev_config)
    assert len(error.value.problems) == 3
    platform_config["platform"]["storage"]["backend"] = "hdfs"
    platform_config["platform"]["namespacePrefix"] = "TF_"
    with pytest.raises(ConfigError) as error:
        parse(platform_config)
    assert len(error.value.problems) == 2
    tenant_config["tenant"]["name"] = "Bob"
    tenant_config["tenant"]["identities"]["groups"] = ["system:masters"]
    with pytest.raises(ConfigError) as error:
        parse(tenant_config)
    assert len(error.value.problems) == 2


def test_bad_config_creates_no_resources(dev_config: Raw) -> None:
    """The program parses before declaring anything: a bad stack leaves the mocks untouched."""
    from mocked_program import run_program

    cluster(dev_config)["workers"]["count"] = 0
    with pytest.raises(ConfigError):
        deployment = run_program(dev_config)
        pytest.fail(f"created {len(deployment.mocks.resources)} resources")


def test_stacks_parse_with_documented_defaults() -> None:
    experiment = parse(stack_config("dev"))
    c = experiment.clusters[0]
    assert (c.ps.count, c.workers.count, c.workers.resources.gpus) == (1, 2, 0)
    assert c.image is None and c.data_sub_path is None and experiment.experiment is None
    platform = parse(stack_config("platform-dev"))
    assert platform.platform.storage.backend == "local" and platform.platform.namespace_prefix == "tfk8s-"
    assert platform.platform.images.tensorflow == ImageSettings().tensorflow
    tenant = parse(stack_config("tenant-alice"))
    assert tenant.platform_stack == "platform-dev" and tenant.tenant.volumes.keep_on_destroy
    # alice, and the account GitOps runs her `dev` stack as (tfk8s_gitops.identity)
    assert (tenant.tenant.identities.users, tenant.tenant.identities.groups) == (
        (
            "alice",
            "system:serviceaccount:tfk8s-gitops:tfk8s-dev",
        ),
        (),
    )
    assert all(v is None for v in tenant.tenant.quota.model_dump().values())  # the platform's default quota


def test_numbers_are_accepted_for_cpu(dev_config: Raw) -> None:
    cluster(dev_config)["workers"]["cpu"] = 2
    assert parse(dev_config).clusters[0].workers.resources.cpu == "2"


def test_glusterfs_is_accepted_before_1_26(imagenet_platform_config: Raw) -> None:
    g = parse(imagenet_platform_config).platform.storage.glusterfs
    assert g is not None and g.rest_url == "http://heketi.storage.svc:8080"


def test_an_experiment_name_too_long_for_its_objects_names_the_key(dev_config: Raw) -> None:
    dev_config["experiment"] = "e" * 36
    with pytest.raises(ConfigError, match=r"tfk8s:clusters\[0\]\.name: '(e+)-mnist' .* at most 40"):
        parse(dev_config)


@pytest.mark.parametrize(
    ("raw", "is_secret", "message"),
    [
        (
            "0123456789abcdef",
            False,
            r"tfk8s:jupyterToken: is stored in plain text .*`pulumi config set --secret tfk8s:jupyterToken",
        ),
        ("short", True, r"tfk8s:jupyterToken: must be at least 16 characters without surrounding spaces; set it with"),
        (" 0123456789abcdef ", True, r"tfk8s:jupyterToken: must be at least 16 characters without surrounding spaces"),
    ],
    ids=["plain-text", "too-short", "surrounding-spaces"],
)
def test_a_bad_jupyter_token_names_the_key_and_the_fix(raw: str, is_secret: bool, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_jupyter_token(raw, is_secret)


def test_the_jupyter_token_is_optional() -> None:
    assert parse_jupyter_token(None, False) is None
    assert parse_jupyter_token("0123456789abcdef", True) == "0123456789abcdef"


def test_requirements_txt_is_generated_from_pyproject() -> None:
    """`pulumi install` (pip toolchain) reads requirements.txt only; it must list exactly the program's dependencies."""
    import subprocess
    import sys
    import tomllib

    check = subprocess.run([sys.executable, str(ROOT / "hack" / "requirements.py"), "--check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    listed = [line for line in (ROOT / "requirements.txt").read_text().splitlines() if line and not line.startswith("#")]
    assert listed == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]


def test_the_servers_version_wins_and_a_different_configured_one_is_an_error() -> None:
    raw = stack_config("platform-dev")
    assert parse(raw, server_version=(1, 34)).platform.version == (1, 34)
    with pytest.raises(ConfigError, match=r"kubernetesVersion: is 1.34 but the cluster serves 1.25: fix it, or remove the key"):
        parse(raw, server_version=(1, 25))
    del raw["platform"]["kubernetesVersion"]
    assert parse(raw, server_version=(1, 28)).platform.version == (1, 28)
    with pytest.raises(ConfigError, match=r"kubernetesVersion: the cluster did not say"):
        parse(raw)


def test_glusterfs_against_a_newer_server_is_refused_with_the_1_26_message() -> None:
    """The imagenet platform says 1.25; deployed against a 1.34 cluster it must stop before anything exists."""
    raw = stack_config("imagenet-platform")
    with pytest.raises(ConfigError) as error:
        parse(raw, server_version=(1, 34))
    text = str(error.value)
    assert "removed in Kubernetes 1.26; the cluster is 1.34" in text and "serves 1.34" in text
    assert parse(raw, server_version=(1, 25)).platform.storage.backend == "glusterfs"


@pytest.mark.parametrize("kind", ["platform", "tenant", "experiment"])
def test_published_json_schemas_are_current_and_accept_the_repos_stack_files(kind: str) -> None:
    """Editors check stack files against schema/<kind>.schema.json; it is generated from the models."""
    import subprocess
    import sys

    import jsonschema
    import yaml

    check = subprocess.run([sys.executable, str(ROOT / "hack" / "schema.py"), "--check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    schema = json.loads((SCHEMA_DIR / f"{kind}.schema.json").read_text())
    files = [f for f in sorted((ROOT / "stacks").glob("Pulumi.*.yaml")) if f"tfk8s:kind: {kind}" in f.read_text()]
    assert files
    for stack_file in files:
        jsonschema.validate(yaml.safe_load(stack_file.read_text()), schema)
    bad = yaml.safe_load(files[0].read_text())
    bad["config"]["tfk8s:typo"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def _models_by_name(model: type[Any], found: dict[str, type[Any]]) -> dict[str, type[Any]]:
    """`model` and every model its fields hold, by class name (the published schema's `$defs` keys)."""
    import typing

    from pydantic import BaseModel

    found[model.__name__] = model

    def held(annotation: Any) -> list[type[Any]]:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return [annotation]
        return [m for arg in typing.get_args(annotation) for m in held(arg)]

    for field in model.model_fields.values():
        for sub in held(field.annotation):
            if sub.__name__ not in found:
                _models_by_name(sub, found)
    return found


@pytest.mark.parametrize("kind", ["platform", "tenant", "experiment"])
def test_a_missing_key_says_what_the_published_schema_says_without_reading_docstrings(kind: str) -> None:
    """Programs build the models without their field docstrings (0.055 s of every `up`); only
    hack/schema.py reads them. A required field's description, the hint of its missing-key error,
    must not depend on that: the one published for editors is the one the error gives."""
    from tfk8s import settings as schemas
    from tfk8s.settings.types import Model

    assert Model.model_config["use_attribute_docstrings"] is False  # this process: as a program
    published = json.loads((SCHEMA_DIR / f"{kind}.schema.json").read_text())
    models = _models_by_name(schemas.STACK_KINDS[kind], {})
    checked = 0
    for name, definition in published["$defs"].items():
        fields = {f.alias or n: f for n, f in models[name].model_fields.items()}
        for key in definition.get("required", []):
            assert fields[key].description == definition["properties"][key].get("description"), f"{name}.{key}"
            checked += 1
    top = published["properties"]["config"]["properties"]
    for key, field in schemas.STACK_KINDS[kind].model_fields.items():
        if field.is_required():
            assert field.description == top[f"tfk8s:{field.alias or key}"].get("description"), key
            checked += 1
    assert checked >= 2


def test_the_schema_files_are_what_the_models_say(tmp_path: Path) -> None:
    """A default changed in the models reaches the published schema (or the check above fails)."""
    schema = json.loads((SCHEMA_DIR / "experiment.schema.json").read_text())
    clusters = schema["properties"]["config"]["properties"]["tfk8s:clusters"]
    assert "items" in clusters and clusters["minItems"] == 1


@pytest.mark.parametrize(
    ("run", "message"),
    [
        ({"number": -1}, r"run.number: must be 0 or more"),
        ({"activeDeadlineSeconds": 0}, r"run.activeDeadlineSeconds: must be at least 1"),
        ({"ttlSecondsAfterFinished": "1h"}, r"run.ttlSecondsAfterFinished: must be int"),
        ({"deadline": 5}, r"run.deadline: unknown key"),
    ],
    ids=["negative-number", "zero-deadline", "ttl-not-int", "unknown-key"],
)
def test_bad_run_policy_names_the_key(run: dict[str, Any], message: str) -> None:
    raw = stack_config("dev")
    cluster(raw)["run"] = run
    with pytest.raises(ConfigError, match=r"tfk8s:clusters\[0\]\." + message):
        parse(raw)


def test_the_repos_stack_files_carry_no_salt() -> None:
    """The salt belongs to a machine's (or team's) passphrase: the first command adds it (docs/guide/usage.md)."""
    for stack_file in (ROOT / "stacks").glob("Pulumi.*.yaml"):
        assert "encryptionsalt" not in stack_file.read_text(), stack_file.name


# --- a tenant's identities and volumes ----------------------------------------------------------------


def _tenant_with(**identities: list[str]) -> Raw:
    raw = copy.deepcopy(stack_config("tenant-alice"))
    raw["tenant"]["identities"] = identities
    return raw


OWN_GROUP = r"is one of Kubernetes' own groups \(system:authenticated is every client\): name a group of people"
OWN_USER = r"is one of Kubernetes' own identities; name a person's user name, or a service account"
BLANK = r"must be a non-empty name without surrounding spaces or control characters"


@pytest.mark.parametrize(
    ("identities", "message"),
    [
        ({"groups": ["system:authenticated"]}, r"tfk8s:tenant\.identities\.groups\[0\]: 'system:authenticated' " + OWN_GROUP),
        ({"groups": ["ml-team", "system:masters"]}, r"tfk8s:tenant\.identities\.groups\[1\]: 'system:masters' " + OWN_GROUP),
        ({"groups": ["system:serviceaccounts"]}, r"tfk8s:tenant\.identities\.groups\[0\]: 'system:serviceaccounts' " + OWN_GROUP),
        ({"users": ["system:admin"]}, r"tfk8s:tenant\.identities\.users\[0\]: 'system:admin' " + OWN_USER),
        ({"users": ["system:kube-scheduler"]}, r"tfk8s:tenant\.identities\.users\[0\]: 'system:kube-scheduler' " + OWN_USER),
        ({"users": ["system:anonymous"]}, r"tfk8s:tenant\.identities\.users\[0\]: 'system:anonymous' " + OWN_USER),
        (
            {"users": ["system:serviceaccount:ci"]},
            r"tfk8s:tenant\.identities\.users\[0\]: 'system:serviceaccount:ci' .*system:serviceaccount:<namespace>:<name>",
        ),
        ({"users": [""]}, r"tfk8s:tenant\.identities\.users\[0\]: " + BLANK),
        ({"users": ["alice", " bob"]}, r"tfk8s:tenant\.identities\.users\[1\]: " + BLANK),
        ({"users": ["alice "]}, r"tfk8s:tenant\.identities\.users\[0\]: " + BLANK),
        ({"groups": ["   "]}, r"tfk8s:tenant\.identities\.groups\[0\]: " + BLANK),
        ({"groups": ["ml\nteam"]}, r"tfk8s:tenant\.identities\.groups\[0\]: " + BLANK),
        ({"users": ["al\x00ice"]}, r"tfk8s:tenant\.identities\.users\[0\]: " + BLANK),
        ({"users": ["alice\x7f"]}, r"tfk8s:tenant\.identities\.users\[0\]: " + BLANK),
        ({"users": ["a" * 254]}, r"tfk8s:tenant\.identities\.users\[0\]: is 254 characters; at most 253"),
        ({"groups": ["ml-team", "ml-team"]}, r"tfk8s:tenant\.identities\.groups\[1\]: 'ml-team' is listed twice; remove one"),
        ({"users": ["alice", "bob", "alice"]}, r"tfk8s:tenant\.identities\.users\[2\]: 'alice' is listed twice; remove one"),
    ],
    ids=[
        "system-authenticated",
        "system-masters",
        "system-serviceaccounts-group",
        "system-admin",
        "system-component",
        "system-anonymous",
        "service-account-without-name",
        "empty",
        "leading-space",
        "trailing-space",
        "whitespace-only",
        "newline",
        "nul",
        "delete-char",
        "too-long",
        "duplicate-group",
        "duplicate-user",
    ],
)
def test_a_tenants_identities_never_hand_its_namespace_to_everyone(identities: dict[str, list[str]], message: str) -> None:
    """Binding a `system:` group (or user) would give the experimenter role to every client or to components."""
    with pytest.raises(ConfigError, match=message):
        parse(_tenant_with(**identities))


def test_people_groups_and_service_accounts_are_accepted_as_identities() -> None:
    users = ["alice@example.com", "system:serviceaccount:tfk8s-alice:runner", "CN with spaces"]
    stack = parse(_tenant_with(users=users, groups=["ml-team", "tfk8s:users"]))
    assert stack.tenant.identities.users == tuple(users)
    assert stack.tenant.identities.groups == ("ml-team", "tfk8s:users")
    assert parse(_tenant_with()).tenant.identities.users == ()  # none: only the platform team's own identities


@pytest.mark.parametrize(
    ("tenant", "message"),
    [
        (
            {"volumes": {"dataSize": "400Gi", "logSize": "200Gi"}},
            r"^invalid tfk8s configuration:\n  - tfk8s:tenant\.volumes: the data and log volumes \(400Gi \+ 200Gi\) do not fit "
            r"the tenant's storage quota \(500Gi\): shrink them, or raise tfk8s:tenant\.quota\.storage$",
        ),
        (
            {"quota": {"storage": "1.5Gi"}},
            r"tfk8s:tenant\.volumes: the data and log volumes \(1Gi \+ 1Gi\) do not fit the tenant's storage quota \(1\.5Gi\)",
        ),
        ({"quota": {"persistentVolumeClaims": 1}}, r"tfk8s:tenant\.quota\.persistentVolumeClaims: .* 2 claims; allow at least 2"),
    ],
    ids=["over-the-platforms-default", "over-its-own-quota", "too-few-claims"],
)
def test_a_tenants_volumes_must_fit_its_quota(tenant: Raw, message: str) -> None:
    raw = copy.deepcopy(stack_config("tenant-alice"))
    for key, value in tenant.items():
        raw["tenant"][key] = {**raw["tenant"].get(key, {}), **value}
    with pytest.raises(ConfigError, match=message):
        parse(raw)
    raw["tenant"]["quota"] = {"storage": "1Ti", "persistentVolumeClaims": 2}
    assert (
        parse(raw)
        .tenant.effective_quota(PlatformFacts.model_validate(facts_for(stack_config("platform-dev")), strict=False).default_quota)
        .storage
        == "1Ti"
    )


@pytest.mark.parametrize(
    ("workers", "refused"),
    [
        ({"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}, None),
        (
            {"tolerations": [{"key": "team-b.example.com/dedicated", "operator": "Exists"}]},
            r"tolerate \['nvidia\.com/gpu'\] alone",
        ),
        ({"nodeSelector": {"example.com/gpu": "a100"}}, None),
        (
            {"nodeSelector": {"team-b.example.com/pool": "x"}},
            r"select on \['example\.com/gpu'\] alone.*placement\.nodeSelectorKeys",
        ),
    ],
)
@pytest.mark.parametrize("role", ["ps", "workers"])
def test_training_pods_tolerate_and_select_only_what_the_platform_allows(
    dev_config: Raw, platform_config: Raw, role: str, workers: Raw, refused: str | None
) -> None:
    platform_config["platform"]["placement"] = {"tolerationKeys": ["nvidia.com/gpu"], "nodeSelectorKeys": ["example.com/gpu"]}
    facts = PlatformFacts.model_validate(facts_for(platform_config), strict=False)
    cluster(dev_config).setdefault(role, {}).update(workers)
    stack = validate(dev_config)
    if refused is None:
        check_experiment(stack, "dev", facts, ROOT)  # type: ignore[arg-type]
        return
    with pytest.raises(
        ConfigError, match=rf"tfk8s:clusters\[0\]\.{role}\.\w+(\[0\])?: the platform lets training pods " + refused
    ):
        check_experiment(stack, "dev", facts, ROOT)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("layout", "refused"),
    [
        ({"code/train.py": "print(1)", "code/config": ("link", ".git/config")}, r"code/config is a symbolic link"),
        ({"code/train.py": "print(1)", "code/lib": ("link", "shared")}, r"code/lib is a symbolic link"),
        ({"code/train.py": "print(1)", "code/.git/config": "[remote]"}, r"code/\.git: a git repository's \.git never ships"),
        ({"code/train.py": "print(1)", "code/lib/util.py": "x = 1"}, None),
    ],
    ids=["link-to-the-checkouts-git-config", "linked-directory", "a-git-directory", "plain-files"],
)
def test_a_code_directory_ships_no_link_and_no_git_file(
    dev_config: Raw, tmp_path: Path, layout: dict[str, Any], refused: str | None
) -> None:
    """A CI checkout that persists its credentials keeps its token in .git/config, inside the
    project: a link to it (or a .git directory) in the code directory would ship it in a ConfigMap."""
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text('[http]\n\textraheader = "AUTHORIZATION: basic c2VjcmV0"\n')
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "util.py").write_text("x = 1\n")
    for name, content in layout.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, tuple):
            path.symlink_to(tmp_path / content[1])
        else:
            path.write_text(content)
    cluster(dev_config)["code"] = {"source": "configmap", "path": "code"}
    stack = validate(dev_config)
    facts = PlatformFacts.model_validate(facts_for(stack_config("platform-dev")), strict=False)
    if refused is None:
        check_experiment(stack, "dev", facts, tmp_path)  # type: ignore[arg-type]
        return
    with pytest.raises(ConfigError, match=r"tfk8s:clusters\[0\]\.code\.path: " + refused):
        check_experiment(stack, "dev", facts, tmp_path)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("image", "floats"),
    [
        ("tensorflow/tensorflow:2.21.0", None),
        ("registry.local:5000/tf:2.21.0", None),
        ("registry.local:5000/tf", "untagged"),
        ("tf:latest", "tagged latest"),
        ("tf:latest@sha256:" + "0" * 64, None),  # a digest pins whatever the tag says
    ],
)
def test_an_image_floats_only_without_a_tag_or_on_latest_and_never_with_a_digest(image: str, floats: str | None) -> None:
    from tfk8s.settings.types import floating_tag

    assert floating_tag(image) == floats


def test_a_platform_that_allows_latest_lets_its_experiments_run_it() -> None:
    from tfk8s.errors import ConfigError
    from tfk8s.settings.contract import PlatformFacts
    from tfk8s.settings.stack_file import validate

    raw = stack_config("dev")
    raw["clusters"][0]["image"] = "tensorflow/tensorflow:latest"
    stack = validate(raw)
    published = facts_for(stack_config("platform-dev"))
    with pytest.raises(ConfigError, match=r"is tagged latest"):
        check_experiment(stack, "dev", PlatformFacts.model_validate(published, strict=False), ROOT)  # type: ignore[arg-type]
    published["images"]["allowLatest"] = True
    check_experiment(stack, "dev", PlatformFacts.model_validate(published, strict=False), ROOT)  # type: ignore[arg-type]
