"""The component package (package/, tfk8s.component_package) in process: its generated argument types and
schema are current, its TrainingCluster declares under mocks what an experiment stack of the same
cluster declares, and bad properties are refused with their path before anything is declared.

The CLI's view of the same package (`pulumi package get-schema`) is tests/langhost; a Pulumi YAML
program declaring it for real is tests/e2e/test_yaml_package.py."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pulumi
import pytest
import yaml
from mocked_program import (
    ROOT,
    Deployment,
    after,
    declared_types,
    facts_for,
    platform_of,
    run_program,
    stack_config,
    tenant_facts_for,
    tenant_of,
    with_contract,
)
from mocks import RecordingMocks, healthy_status, plain_nodes
from pulumi.provider.server import ProviderServicer
from test_golden_manifests import GOLDEN, UPDATE, manifests
from tfk8s.component_package import VERSION, training_cluster
from tfk8s.component_package.provider import invalid_inputs
from tfk8s.component_package.training_cluster import TrainingCluster
from tfk8s.components.training_cluster import TOKEN
from tfk8s.components.training_cluster import TrainingCluster as LibraryTrainingCluster
from tfk8s.errors import ConfigError, OwnershipConflict
from tfk8s.kube import api_paths
from tfk8s.kube import client as kube_client
from tfk8s.pulumi_errors import Shown
from tfk8s.settings.types import PUBLISH_DOCSTRINGS_ENV
from tfk8s.specs import ownership, quota
from tfk8s.specs.code import installed_launcher_bundle
from tfk8s.specs.labels import CLUSTER, EXPERIMENT
from tfk8s.specs.ownership import Owner

SCHEMA = json.loads((ROOT / "package" / "schema.json").read_text())


@pytest.fixture(autouse=True)
def one_program_per_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test a program of its own: the clusters a provider process has declared start empty."""
    monkeypatch.setattr(training_cluster, "_DECLARED", {})


class ContractApi:
    """The API server as an experimenter with every right sees it: the tenant's namespace and
    contract, `objects` (path -> object) besides, every access review allowed; it records the
    paths read."""

    def __init__(
        self, namespace: str, tenant: dict[str, Any], platform: dict[str, Any], objects: dict[str, Any] | None = None
    ) -> None:
        namespace_path = api_paths.NAMESPACE.path(namespace)
        self.objects = {
            namespace_path: {"metadata": {"name": namespace, "annotations": {ownership.OWNER: tenant["owner"]}}},
            **(objects or {}),
        }
        self.read_whole = with_contract(namespace, tenant, platform, lambda path: self.objects.get(path))
        self.read: list[str] = []

    def get(self, path: str, metadata_only: bool = False) -> Any:
        self.read.append(path)
        return self.read_whole(path)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "status": {"allowed": True, "incomplete": True, "resourceRules": []}}


def dev_cluster() -> dict[str, Any]:
    """The dev experiment stack's one cluster, as its stack file says it (camelCase)."""
    raw = stack_config("dev")
    assert len(raw["clusters"]) == 1
    return copy.deepcopy(raw["clusters"][0])


def dev_properties(**changes: Any) -> dict[str, Any]:
    """The dev experiment's cluster as the package's properties (as the provider passes them: the
    Python names of the TypedDicts), with `changes` to the cluster."""
    return {"namespace": stack_config("dev")["namespace"], "cluster": {**snake(dev_cluster()), **changes}}


def package_api(
    monkeypatch: pytest.MonkeyPatch, namespace: str, platform: dict[str, Any] | None = None, objects: dict[str, Any] | None = None
) -> ContractApi:
    """The API the package's checks reach (its `connect`), for `namespace`'s tenant of stacks/ on
    `platform` (default: that tenant's platform of stacks/)."""
    facts = platform or facts_for(stack_config(platform_of(tenant_of(namespace))))
    api = ContractApi(namespace, tenant_facts_for(tenant_of(namespace), facts), facts, objects)
    monkeypatch.setattr(training_cluster, "connect", lambda environ: kube_client.Cluster(None, api))
    monkeypatch.setenv("PULUMI_BACKEND_URL", "file:///test-state")
    return api


@contextmanager
def refused(kind: type[Exception], match: str | None = None) -> Iterator[pytest.ExceptionInfo[Shown]]:
    """The constructor refuses with a `kind` the SDK is handed as a RunError (one message, no traceback)."""
    with pytest.raises(Shown, match=match) as raised:
        yield raised
    assert isinstance(raised.value.__cause__, kind), repr(raised.value.__cause__)


def declare_package_clusters(
    monkeypatch: pytest.MonkeyPatch,
    declared: dict[str, dict[str, Any]],
    *,
    platform: dict[str, Any] | None = None,
    objects: dict[str, Any] | None = None,
    preview: bool = False,
    opts: pulumi.ResourceOptions | None = None,
    config: dict[str, str] | None = None,
) -> tuple[RecordingMocks, ContractApi]:
    """One program under mocks declaring a package TrainingCluster per (resource name -> properties),
    against the tenant of their namespace; raises what the component raises."""
    (namespace,) = {properties["namespace"] for properties in declared.values()}
    api = package_api(monkeypatch, namespace, platform, objects)
    mocks = RecordingMocks(healthy_status, plain_nodes)
    pulumi.runtime.set_mocks(mocks, project="tfk8s", stack="dev", preview=preview, organization="organization")
    pulumi.runtime.set_all_config(config or {})

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        clusters = [TrainingCluster(name, properties, opts) for name, properties in declared.items()]  # type: ignore[arg-type]
        return pulumi.Output.all(*[pulumi.Output.all(c.ready, c.cluster_spec, c.readiness) for c in clusters])

    run()
    return mocks, api


def declare_package_cluster(
    monkeypatch: pytest.MonkeyPatch, properties: dict[str, Any], name: str | None = None
) -> RecordingMocks:
    """Declare one package TrainingCluster of `properties` under mocks (its name: dev-<cluster>)."""
    mocks, _ = declare_package_clusters(monkeypatch, {name or f"dev-{properties['cluster']['name']}": properties})
    return mocks


def snake(value: Any) -> Any:
    """A stack file's camelCase keys as the provider hands the component its properties."""
    if isinstance(value, dict):
        return {"".join("_" + ch.lower() if ch.isupper() else ch for ch in k): snake(v) for k, v in value.items()}
    if isinstance(value, list):
        return [snake(v) for v in value]
    return value


def test_the_generated_args_and_schema_are_current() -> None:
    done = subprocess.run([sys.executable, "hack/package_args.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_schema_declares_the_training_cluster_under_the_token_every_experiments_state_holds() -> None:
    assert TOKEN == "tfk8s:index:TrainingCluster"
    assert list(SCHEMA["resources"]) == [TOKEN]
    resource = SCHEMA["resources"][TOKEN]
    assert resource["isComponent"] is True
    assert sorted(resource["requiredInputs"]) == ["cluster", "namespace"]
    assert set(resource["properties"]) == {"clusterSpec", "readiness", "ready"}
    assert SCHEMA["name"] == "tfk8s" and SCHEMA["version"] == VERSION


def test_the_package_version_is_tfk8s_version() -> None:
    from tfk8s import release

    assert VERSION is release.VERSION  # tests/unit/test_releases.py: the wheel's and the schema's too


def test_the_schema_documents_the_fields_as_the_models_do() -> None:
    """The descriptions are the models' field docstrings (read here from the published JSON Schema
    of experiment stack files, which hack/schema.py writes from the same docstrings)."""
    stack_schema = json.loads((ROOT / "schema" / "experiment.schema.json").read_text())
    defs = stack_schema["$defs"]
    workers = SCHEMA["types"]["tfk8s:index:Workers"]["properties"]
    assert workers["count"]["description"].startswith(defs["WorkerSettings"]["properties"]["count"]["description"])
    assert workers["backoffLimitPerIndex"]["description"].startswith(
        " ".join(defs["WorkerSettings"]["properties"]["backoffLimitPerIndex"]["description"].split())
    )
    replication = SCHEMA["types"]["tfk8s:index:Replication"]
    assert [e["value"] for e in replication["enum"]] == ["between-graph", "in-graph"]
    cluster = SCHEMA["types"]["tfk8s:index:Cluster"]
    assert cluster["required"] == ["name"]
    assert cluster["properties"]["command"]["type"] == "array"  # a tuple in the model


def test_a_type_the_schema_cannot_hold_fails_the_generator_instead_of_dropping_the_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The generator sets this for its own process when imported; the session's later processes
    # (pulumi runs among them) must not inherit it.
    monkeypatch.setenv(PUBLISH_DOCSTRINGS_ENV, "1")
    import package_args
    from pydantic import BaseModel

    class Odd(BaseModel):
        either: int | str

    with pytest.raises(package_args.Unmappable, match=r"Odd.either: a union"):
        package_args.Writer().model(Odd)


def test_the_package_cluster_declares_what_an_experiment_stack_of_that_cluster_declares(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Same objects, names and manifests as `dev` (the Python program's experiment stack) but for
    where the trainer package comes from: a cluster outside an Experiment ships its own copy,
    `<experiment>-<cluster>-trainer-<digest>`, instead of the experiment's `<experiment>-trainer-<digest>`."""
    raw = stack_config("dev")
    runs: list[Deployment] = []

    @pulumi.runtime.test
    def experiment() -> pulumi.Output[Any]:
        runs.append(run_program(raw, stack="dev"))
        return after(runs[0], lambda: None)

    experiment()
    # The Experiment component holds the cluster in the program; the package's cluster stands alone.
    program_rows = [json.loads(line) for line in manifests(runs[0]).splitlines() if '"tfk8s:index:Experiment"' not in line]
    package_mocks = declare_package_cluster(monkeypatch, {"namespace": raw["namespace"], "cluster": snake(dev_cluster())})
    package_rows = [json.loads(line) for line in manifests(Deployment(mocks=package_mocks, components={})).splitlines()]

    (shared,) = [r for r in program_rows if r["type"] == "kubernetes:core/v1:ConfigMap" and "-trainer-" in r["name"]]
    (own,) = [r for r in package_rows if r["type"] == "kubernetes:core/v1:ConfigMap" and "-trainer" in r["name"]]
    shared_name, own_name = shared["inputs"]["metadata"]["name"], own["inputs"]["metadata"]["name"]
    assert shared_name.startswith("dev-trainer-") and own_name.startswith("dev-mnist-trainer-")
    assert shared["inputs"]["binaryData"] == own["inputs"]["binaryData"]

    def comparable(rows: list[dict[str, Any]], trainer: dict[str, Any]) -> str:
        return json.dumps([r for r in rows if r is not trainer], sort_keys=True).replace(own_name, shared_name)

    assert len(package_rows) == len(program_rows)
    assert comparable(package_rows, own) == comparable(program_rows, shared)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"workers": {"count": 0}}, "cluster.workers.count: must be at least 1, got 0"),
        ({"replication": "sideways"}, "cluster.replication"),
        ({"name": "Not_A_Label"}, "cluster.name"),
        ({"code": {"path": "../secrets"}}, "cluster.code.path: the package ships no directory of yours"),
    ],
)
def test_bad_properties_are_refused_by_path_before_anything_is_declared(
    monkeypatch: pytest.MonkeyPatch, change: dict[str, Any], expected: str
) -> None:
    properties = {"namespace": stack_config("dev")["namespace"], "cluster": {**snake(dev_cluster()), **change}}
    with refused(ConfigError) as raised:
        declare_package_cluster(monkeypatch, properties)
    assert expected in str(raised.value)
    assert "tfk8s:" not in str(raised.value).split("\n", 1)[1]  # keyed as properties, not as a stack file


def test_the_library_cluster_keeps_its_token_and_is_not_the_package_class() -> None:
    assert not issubclass(TrainingCluster, LibraryTrainingCluster)
    assert "__annotations__" not in vars(training_cluster.TrainingClusterBody)


EXAMPLE = ROOT / "examples" / "yaml-training-cluster" / "Pulumi.yaml"
EXAMPLE_GOLDEN = GOLDEN / "package" / "yaml-training-cluster.jsonl"


def example_properties() -> dict[str, Any]:
    """The properties examples/yaml-training-cluster gives its TrainingCluster, its config at the
    defaults, as the provider hands them to the component."""
    program = yaml.safe_load(EXAMPLE.read_text())
    (resource,) = program["resources"].values()
    assert resource["type"] == TOKEN
    defaults = {name: spec["default"] for name, spec in program["config"].items()}
    text = json.dumps(resource["properties"])
    for name, value in defaults.items():
        text = text.replace("${" + name + "}", value)
    return snake(json.loads(text))


def without_owner(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows without what names the owning stack (its project and stack differ between a
    Pulumi YAML project and these mocks): the owner labels and annotation."""
    owner_keys = {ownership.OWNER, *Owner(organization="o", project="p", stack="s", kind="experiment").labels()}

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in owner_keys}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return [strip(row) for row in rows]


def test_the_yaml_examples_cluster_declares_the_golden_manifests(monkeypatch: pytest.MonkeyPatch) -> None:
    """What tests/e2e/test_yaml_package.py compares the live objects of the example with."""
    program = yaml.safe_load(EXAMPLE.read_text())
    mocks = declare_package_cluster(monkeypatch, example_properties(), name=next(iter(program["resources"])))
    rows = without_owner([json.loads(line) for line in manifests(Deployment(mocks=mocks, components={})).splitlines()])
    rendered = "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows)
    if UPDATE:
        EXAMPLE_GOLDEN.parent.mkdir(exist_ok=True)
        EXAMPLE_GOLDEN.write_text(rendered)
    assert EXAMPLE_GOLDEN.is_file(), "no golden manifests for the YAML example: `make golden` writes them"
    assert rendered == EXAMPLE_GOLDEN.read_text(), "the YAML example's manifests changed; if that was meant, `make golden`"


def test_numbers_the_engine_sends_as_doubles_are_the_models_integers() -> None:
    """Pulumi sends every number as a double; the provider makes only top-level integers ints."""
    cluster = {**snake(dev_cluster()), "workers": {"count": 3.0}, "ps": {"count": 1.0}}
    stack = training_cluster.settings({"namespace": "tfk8s-alice", "cluster": cluster})
    assert (stack.clusters[0].workers.count, stack.clusters[0].ps.count) == (3, 1)
    with pytest.raises(ConfigError, match=r"cluster.workers.count"):
        training_cluster.settings({"namespace": "tfk8s-alice", "cluster": {**cluster, "workers": {"count": 2.5}}})


def test_a_refused_cluster_registers_nothing_not_even_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    with declared_types() as declared, refused(ConfigError, match=r"cluster\.workers\.count"):
        declare_package_clusters(monkeypatch, {"dev-mnist": dev_properties(workers={"count": 0})})
    assert declared == []


def test_another_resources_output_or_a_secret_is_refused_by_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine hands the component such values as Outputs, whatever the schema's `plain` says:
    they cannot name objects, so they are refused naming where they are."""
    properties = dev_properties(image=pulumi.Output.secret("tensorflow/tensorflow:2.21.0"))
    properties["cluster"]["workers"] = {"count": pulumi.Output.from_input(2)}
    with refused(ConfigError) as raised:
        declare_package_clusters(monkeypatch, {"dev-mnist": properties})
    assert "cluster.image: must be a value known before the deployment" in str(raised.value)
    assert "cluster.workers.count: must be a value known before the deployment" in str(raised.value)


@pytest.mark.parametrize("key", training_cluster.KUBERNETES_CONFIG)
def test_kubernetes_config_of_the_programs_own_is_refused(monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    """The checks read with the environment's kubeconfig: objects written with other credentials
    would pass checks made as someone else, or on another cluster."""
    with declared_types() as declared, refused(ConfigError, match=rf"{key}: set in the stack's config"):
        declare_package_clusters(monkeypatch, {"dev-mnist": dev_properties()}, config={key: "elsewhere"})
    assert declared == []


def test_a_kubernetes_provider_of_the_programs_own_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    opts = pulumi.ResourceOptions(providers={"kubernetes": object()})  # type: ignore[dict-item]
    with refused(ConfigError, match=r"options\.providers: a Kubernetes provider of the program's own"):
        declare_package_clusters(monkeypatch, {"dev-mnist": dev_properties()}, opts=opts)


def test_one_program_cannot_declare_the_same_cluster_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither exists yet for the ownership check to find: the provider process remembers."""
    with refused(ConfigError, match=r"cluster\.name: TrainingCluster 'first' of this program already declares"):
        declare_package_clusters(monkeypatch, {"first": dev_properties(), "second": dev_properties()})
    monkeypatch.setattr(training_cluster, "_DECLARED", {})  # another program: another provider process
    mocks, _ = declare_package_clusters(monkeypatch, {"one": dev_properties(), "two": dev_properties(name="other")})
    jobs = sorted(r.inputs["metadata"]["name"] for r in mocks.resources if r.typ == "kubernetes:batch/v1:Job")
    assert jobs == ["dev-mnist-worker", "dev-other-worker"]


def test_a_preview_declares_what_the_update_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    previewed, _ = declare_package_clusters(monkeypatch, {"dev-mnist": dev_properties()}, preview=True)
    monkeypatch.setattr(training_cluster, "_DECLARED", {})
    updated, _ = declare_package_clusters(monkeypatch, {"dev-mnist": dev_properties()})
    assert sorted((r.typ, r.name) for r in previewed.resources) == sorted((r.typ, r.name) for r in updated.resources)


def test_on_a_queueing_platform_it_declares_a_jobset_and_reads_its_workload(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = copy.deepcopy(stack_config("platform-dev"))
    raw["platform"]["queueing"] = {"enabled": True, "capacity": {"cpu": "64", "memory": "256Gi", "gpus": 8}}
    mocks, api = declare_package_clusters(monkeypatch, {"dev-mnist": dev_properties()}, platform=facts_for(raw))
    types = {r.typ for r in mocks.resources}
    assert "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet" in types and "kubernetes:batch/v1:Job" not in types
    assert any("/workloads" in path for path in api.read), api.read  # readiness asks Kueue once the JobSet exists


def test_its_own_trainer_configmap_is_claimed_and_not_the_experiments(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster outside an Experiment ships `<experiment>-<cluster>-trainer-<digest>`: another
    stack's object of that name is refused; the experiment's shared `<experiment>-trainer-<digest>`
    is another stack's business."""
    launcher = installed_launcher_bundle("experiment")
    theirs = {"metadata": {"annotations": {ownership.OWNER: "organization/other/stack"}}}
    own = api_paths.CONFIG_MAP.path(f"dev-mnist-trainer-{launcher.digest[:10]}", "tfk8s-alice")
    shared = api_paths.CONFIG_MAP.path(f"dev-trainer-{launcher.digest[:10]}", "tfk8s-alice")
    with refused(OwnershipConflict, match=r"dev-mnist-trainer-"):
        declare_package_clusters(monkeypatch, {"dev-mnist": dev_properties()}, objects={own: theirs})
    mocks, _ = declare_package_clusters(monkeypatch, {"dev-mnist": dev_properties()}, objects={shared: theirs})
    assert mocks.resources


def test_the_quota_counts_the_experiments_other_clusters_against_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another stack's cluster of the same experiment holds 2.5 of the 4 CPUs: not this cluster's
    own usage (an experiment stack would replace it; the package's cluster would not)."""
    hard = {"requests.cpu": "4", "limits.cpu": "4"}
    other = {"spec": {"containers": [{"resources": {"requests": {"cpu": "2500m"}, "limits": {"cpu": "2500m"}}}]}}
    experiment, this_cluster = {EXPERIMENT: "dev"}, {EXPERIMENT: "dev", CLUSTER: "mnist"}
    objects = {
        api_paths.RESOURCE_QUOTA.path(quota.QUOTA_NAME, "tfk8s-alice"): {
            "spec": {"hard": hard},
            "status": {"hard": hard, "used": {"requests.cpu": "2500m", "limits.cpu": "2500m"}},
        },
        api_paths.POD.list_path("tfk8s-alice", experiment): {"items": [{**other, "status": {"phase": "Running"}}]},
        api_paths.POD.list_path("tfk8s-alice", this_cluster): {"items": []},
    }
    with refused(ConfigError, match=r"cluster\.workers\.count: the experiment asks cpu 2\.5.*has 1\.5 of 4 left"):
        declare_package_clusters(monkeypatch, {"dev-mnist": dev_properties()}, objects=objects)


def test_the_engine_gets_a_refusal_as_its_message_alone_and_a_bug_as_the_sdk_reports_it() -> None:
    """No per-property details: the engine would print each named property's value, a secret's in
    plain text; the message already names each property and its fix."""
    refusal = ConfigError(["cluster.workers.count: must be at least 1"])
    shown = Shown(str(refusal))
    shown.__cause__ = refusal
    for raised in (shown, refusal, OwnershipConflict("cluster.name: taken")):
        given = invalid_inputs(raised)
        assert isinstance(given, pulumi.InputPropertiesError) and given.errors == []
        assert given.message == str(raised)
        # What the SDK's server makes of it for the engine: a status it can abort with (its trailing
        # metadata; without it, abort_with_status raised AttributeError and the user read that).
        status = ProviderServicer.create_grpc_invalid_properties_status(None, given.message, given.errors)  # type: ignore[arg-type]
        assert status.details == str(raised) and status.trailing_metadata[0][0] == "grpc-status-details-bin"
    assert invalid_inputs(KeyError("cluster")) is None
