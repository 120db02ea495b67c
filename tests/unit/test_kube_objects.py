"""tfk8s.kube.objects sends the engine what the Kubernetes SDK's generated classes send: for every
kind tfk8s declares, the two RegisterResource requests of the same object are compared field by
field (type, inputs, dependencies, provider version, secret outputs, reads), so URNs, state and
diffs of existing stacks stay the same. And the programs no longer import the SDK's classes."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from typing import Any

import pulumi
import pytest
from google.protobuf.json_format import MessageToDict
from mocked_program import ROOT
from pulumi.runtime.mocks import MockMonitor
from tfk8s.kube import objects as kube

KINDS = [
    value
    for value in vars(kube).values()
    if isinstance(value, type)
    and issubclass(value, kube.KubeObject)
    and value not in (kube.KubeObject, kube.CustomObject, kube.JobSet)  # JobSet: the SDK has no class of its own
]

# A value of each top-level field, as tfk8s writes them (camelCase, like the API).
SAMPLES: dict[str, Any] = {
    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}}, "template": {"spec": {"restartPolicy": "Never"}}},
    "data": {"key": "dmFsdWU="},
    "binaryData": {"blob": "AAE="},
    "stringData": {"token": "s3cret"},
    "immutable": True,
    "type": "Opaque",
    "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
    "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
    "subjects": [{"kind": "ServiceAccount", "name": "s", "namespace": "n"}],
    "automountServiceAccountToken": False,
    "imagePullSecrets": [{"name": "pull"}],
    "secrets": [{"name": "token"}],
    "provisioner": "kubernetes.io/glusterfs",
    "parameters": {"resturl": "http://heketi:8080"},
    "reclaimPolicy": "Retain",
    "volumeBindingMode": "Immediate",
    "allowVolumeExpansion": True,
    "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}],
    "mountOptions": ["noatime"],
}
# What may differ: where the call was made, and the aliases the SDK adds for API versions tfk8s
# never used (extensions/v1beta1 Deployments and the like): they name URNs no tfk8s stack has.
IGNORED = {"name", "sourcePosition", "stackTrace", "aliases", "aliasSpecs"}


class EchoMocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        # Metadata alone: the SDK's classes would check the samples' shapes against their output types.
        return f"{args.name}-id", {"metadata": {**args.inputs.get("metadata", {}), "uid": "u-1"}}

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        return {}


class RecordingMonitor(MockMonitor):
    def __init__(self) -> None:
        self.mocks = EchoMocks()
        super().__init__(self.mocks)
        self.requests: dict[str, dict[str, Any]] = {}
        self.reads: dict[str, dict[str, Any]] = {}
        self.invokes: list[dict[str, Any]] = []
        self.fail_invokes = False

    def RegisterResource(self, request: Any) -> Any:
        self.requests[request.name] = {k: v for k, v in MessageToDict(request).items() if k not in IGNORED}
        return super().RegisterResource(request)

    def Invoke(self, request: Any) -> Any:
        self.invokes.append(MessageToDict(request))
        if self.fail_invokes:
            raise RuntimeError("provider failed to start")
        return super().Invoke(request)

    def ReadResource(self, request: Any) -> Any:
        self.reads[request.name] = {k: v for k, v in MessageToDict(request).items() if k not in IGNORED}
        return super().ReadResource(request)


def sdk_class(kind: kube.Kind) -> Any:
    """The SDK's generated class of `kind` (networking.k8s.io/v1 NetworkPolicy -> pulumi_kubernetes.networking.v1)."""
    group, _, version = kind.api_version.rpartition("/")
    module = importlib.import_module(f"pulumi_kubernetes.{(group or 'core').split('.')[0]}.{version}")
    return getattr(module, kind.token.rsplit(":", 1)[1])


@pytest.fixture
def monitor() -> RecordingMonitor:
    recording = RecordingMonitor()
    pulumi.runtime.set_mocks(recording.mocks, monitor=recording, preview=False, organization="organization")
    return recording


def _python(field: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in field)


@pytest.mark.parametrize("cls", KINDS, ids=[c.__name__ for c in KINDS])
@pulumi.runtime.test
def test_each_kind_registers_exactly_what_the_sdk_class_registers(cls: type[kube.KubeObject], monitor: RecordingMonitor) -> Any:
    parent = kube.ConfigMap("parent", metadata={"name": "p"})  # an Output input: a dependency to carry over
    fields = {
        _python(f): SAMPLES[f] if f != "metadata" else {"name": "x", "namespace": "n", "labels": {"from": parent.name}}
        for f in cls.KIND.fields
    }
    ours = cls("ours", **fields)
    theirs = sdk_class(cls.KIND)("theirs", **fields)

    def check(_: Any) -> None:
        assert monitor.requests["ours"] == monitor.requests["theirs"]
        request = monitor.requests["ours"]
        assert request["type"] == cls.KIND.token and request["version"] == kube.provider_version()
        assert request["object"]["apiVersion"] == cls.KIND.api_version and request["object"]["kind"] == cls.KIND.kind
        assert set(request["object"]) == {"apiVersion", "kind", *cls.KIND.fields}  # every field sent, none lost

    return pulumi.Output.all(ours.id, theirs.id).apply(check)


@pulumi.runtime.test
def test_a_read_of_a_live_object_is_the_sdk_classes_read(monitor: RecordingMonitor) -> Any:
    import pulumi_kubernetes as k8s

    ours = kube.Node.get("ours", "gpu-7")
    theirs = k8s.core.v1.Node.get("theirs", "gpu-7")

    def check(_: Any) -> None:
        assert monitor.reads["ours"] == monitor.reads["theirs"]
        assert monitor.reads["ours"]["id"] == "gpu-7" and monitor.reads["ours"]["type"] == "kubernetes:core/v1:Node"
        assert "ours" not in monitor.requests  # read, never registered as ours to create or delete

    return pulumi.Output.all(ours.id, theirs.id).apply(check)


@pulumi.runtime.test
def test_a_custom_object_is_the_sdks_custom_resource(monitor: RecordingMonitor) -> Any:
    import pulumi_kubernetes as k8s

    shape = {"api_version": "p1.layouts.tfk8s.io/v1", "kind": "Layout", "metadata": {"name": "l"}, "spec": {"hosts": ["a:2222"]}}
    ours = kube.CustomObject("ours", **shape)  # type: ignore[arg-type]
    theirs = k8s.apiextensions.CustomResource("theirs", **shape)

    def check(_: Any) -> None:
        assert monitor.requests["ours"] == monitor.requests["theirs"]
        assert monitor.requests["ours"]["type"] == "kubernetes:p1.layouts.tfk8s.io/v1:Layout"

    return pulumi.Output.all(ours.id, theirs.id).apply(check)


@pulumi.runtime.test
def test_a_jobset_is_the_sdks_custom_resource(monitor: RecordingMonitor) -> Any:
    import pulumi_kubernetes as k8s

    shape = {"metadata": {"name": "j", "namespace": "n"}, "spec": {"replicatedJobs": []}}
    ours = kube.JobSet("ours", **shape)
    theirs = k8s.apiextensions.CustomResource("theirs", api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet", **shape)

    def check(_: Any) -> None:
        request, sdk = monitor.requests["ours"], monitor.requests["theirs"]
        assert request["type"] == sdk["type"] == "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
        assert request["object"] == sdk["object"]

    return pulumi.Output.all(ours.id, theirs.id).apply(check)


@pulumi.runtime.test
def test_a_custom_object_without_a_spec_sends_its_top_level_fields(monitor: RecordingMonitor) -> Any:
    """Kueue's WorkloadPriorityClass: its `value` is top-level, beside no spec. The SDK's CustomResource
    cannot say it (it takes a spec only); the provider creates any object it is given under the token."""
    ours = kube.CustomObject(
        "ours",
        api_version="kueue.x-k8s.io/v1beta2",
        kind="WorkloadPriorityClass",
        metadata={"name": "urgent"},
        fields={"value": 1000},
    )

    def check(_: Any) -> None:
        request = monitor.requests["ours"]
        assert request["type"] == "kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass"
        assert request["object"] == {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "urgent"},
            "value": 1000,
        }

    return ours.id.apply(check)


@pulumi.runtime.test
def test_outputs_are_the_apis_json(monitor: RecordingMonitor) -> Any:
    secret = kube.Secret("s", metadata={"name": "token", "namespace": "n"}, data={"token": "dg=="})

    def check(values: list[Any]) -> None:
        name, uid, metadata = values
        assert (name, uid) == ("token", "u-1")
        assert metadata == {"name": "token", "namespace": "n", "uid": "u-1"}  # camelCase JSON, as the API has it

    return pulumi.Output.all(secret.name, secret.uid, secret.metadata).apply(check)


@pulumi.runtime.test
def test_the_warm_up_asks_the_objects_provider_for_a_function_that_changes_nothing(monitor: RecordingMonitor) -> Any:
    """New stacks too (no outputs of a last `up`): the provider's start is then on a first `up`'s way."""
    kube.warm_up_provider().join(timeout=10)
    (warm,) = monitor.invokes
    assert warm == {
        "tok": "kubernetes:yaml:decode",
        "args": {"text": ""},
        "version": kube.provider_version(),
        "acceptResources": True,
    }
    assert monitor.requests == {}  # nothing declared
    declared = kube.ConfigMap("after", metadata={"name": "c"})

    def check(_: Any) -> None:  # the same provider (its version) as every object's
        assert monitor.requests["after"]["version"] == warm["version"]

    return declared.id.apply(check)


def test_a_warm_up_that_fails_is_silent(monitor: RecordingMonitor) -> None:
    monitor.fail_invokes = True
    thread = kube.warm_up_provider()
    thread.join(timeout=10)
    assert not thread.is_alive() and len(monitor.invokes) == 1  # asked once, failed quietly: the first object reports


def test_a_field_the_kind_does_not_have_is_refused_before_registering() -> None:
    with pytest.raises(TypeError, match=r"ConfigMap has no field spec; its fields: metadata, data, binaryData, immutable"):
        kube.ConfigMap("c", spec={"a": 1})


@pytest.mark.parametrize(
    ("pep440", "semver"),
    [
        ("4.25.0a1768448096", "4.25.0-alpha.1768448096"),
        ("4.18.3", "4.18.3"),
        ("4.19.0b2", "4.19.0-beta.2"),
        ("4.19.0rc1", "4.19.0-rc.1"),
        ("4.19.0.dev7", "4.19.0-dev.7"),
    ],
)
def test_the_provider_version_is_spelt_as_the_sdk_spells_it(pep440: str, semver: str) -> None:
    assert kube.provider_version(pep440) == semver


def test_the_installed_sdks_version_is_the_one_its_classes_ask_for() -> None:
    from pulumi_kubernetes import _utilities

    assert kube.provider_version() == _utilities.get_version()


def test_a_version_it_cannot_spell_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"pulumi_kubernetes 4\.0\.0\+local: not a release"):
        kube.provider_version("4.0.0+local")


PROGRAMS = """
import json, sys
sys.path[:0] = {paths}
from mocked_program import run_program, stack_config
for stack in ("platform-dev", "tenant-alice", "dev"):
    run_program(stack_config(stack))
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "pulumi_kubernetes")))
"""


def test_no_program_imports_the_sdks_classes() -> None:
    """What the 0.5 s were spent on: not one pulumi_kubernetes module is loaded by any kind of stack."""
    paths = [str(ROOT / p) for p in ("tests/unit", "infra", "training")]
    done = subprocess.run(
        [sys.executable, "-c", PROGRAMS.format(paths=paths)], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
