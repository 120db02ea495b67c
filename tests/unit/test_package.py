"""The component package (package/, tfk8s.package) in process: its generated argument types and
schema are current, its TrainingCluster declares under mocks what an experiment stack of the same
cluster declares, and bad properties are refused with their path before anything is declared.

The CLI's view of the same package (`pulumi package get-schema`) is tests/langhost; a Pulumi YAML
program declaring it for real is tests/e2e/test_yaml_package.py."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from typing import Any

import pulumi
import pytest
import yaml
from mocked_program import (
    ROOT,
    Deployment,
    after,
    facts_for,
    platform_of,
    run_program,
    stack_config,
    tenant_facts_for,
    tenant_of,
    with_contract,
)
from mocks import RecordingMocks, healthy_status, plain_nodes
from test_golden_manifests import GOLDEN, UPDATE, manifests
from tfk8s.checks import preflight
from tfk8s.components.training_cluster import TOKEN
from tfk8s.components.training_cluster import TrainingCluster as LibraryTrainingCluster
from tfk8s.errors import ConfigError
from tfk8s.kube import api_paths
from tfk8s.package import VERSION, training_cluster
from tfk8s.package.training_cluster import TrainingCluster
from tfk8s.specs import ownership
from tfk8s.specs.ownership import Owner

SCHEMA = json.loads((ROOT / "package" / "schema.json").read_text())


class ContractApi:
    """The API server as an experimenter with every right sees it: the tenant's namespace and
    contract, none of the experiment's objects yet, every access review allowed."""

    def __init__(self, namespace: str, tenant: dict[str, Any], platform: dict[str, Any]) -> None:
        self.namespace_path = api_paths.NAMESPACE.path(namespace)
        self.namespace = {"metadata": {"name": namespace, "annotations": {ownership.OWNER: tenant["owner"]}}}
        self.read_whole = with_contract(namespace, tenant, platform, None)

    def get(self, path: str, metadata_only: bool = False) -> Any:
        if path == self.namespace_path:
            return self.namespace
        return None if metadata_only else self.read_whole(path)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "status": {"allowed": True, "incomplete": True, "resourceRules": []}}


def dev_cluster() -> dict[str, Any]:
    """The dev experiment stack's one cluster, as its stack file says it (camelCase)."""
    raw = stack_config("dev")
    assert len(raw["clusters"]) == 1
    return copy.deepcopy(raw["clusters"][0])


def declare_package_cluster(
    monkeypatch: pytest.MonkeyPatch, properties: dict[str, Any], name: str | None = None
) -> RecordingMocks:
    """Declare the package's TrainingCluster of `properties` (as the provider passes them: the
    Python names of the TypedDicts) under mocks, against dev's tenant and platform."""
    namespace = properties["namespace"]
    facts = facts_for(stack_config(platform_of(tenant_of(namespace))))
    api = ContractApi(namespace, tenant_facts_for(tenant_of(namespace), facts), facts)
    monkeypatch.setattr(training_cluster, "connect", lambda environ: preflight.Cluster(None, api))
    monkeypatch.setenv("PULUMI_BACKEND_URL", "file:///test-state")
    mocks = RecordingMocks(healthy_status, plain_nodes)
    pulumi.runtime.set_mocks(mocks, project="tfk8s", stack="dev", preview=False, organization="organization")

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        cluster = TrainingCluster(name or f"dev-{properties['cluster']['name']}", properties)  # type: ignore[arg-type]
        return pulumi.Output.all(cluster.ready, cluster.cluster_spec, cluster.readiness)

    run()
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
    import tomllib

    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"] == VERSION


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


def test_a_type_the_schema_cannot_hold_fails_the_generator_instead_of_dropping_the_field() -> None:
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
    with pytest.raises(ConfigError) as raised:
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
