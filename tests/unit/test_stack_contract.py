"""Two kinds of stack: the platform's contract, the experiment's read of it, and one owner per object."""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pytest
from mocked_program import PLATFORM_OWNER, after, facts_for, facts_with_scratch, run_program, stack_config
from mocks import RecordingMocks
from tfk8s import ownership, platform_ref
from tfk8s.contract import PlatformFacts
from tfk8s.program import OwnershipConflict


def live(owner: str | None = None, managers: tuple[str, ...] = ()) -> dict[str, Any]:
    meta: dict[str, Any] = {"annotations": {ownership.OWNER: owner} if owner else {}}
    meta["managedFields"] = [{"manager": m} for m in managers]
    return {"metadata": meta}


@pytest.mark.parametrize(
    ("obj", "verdict"),
    [
        (None, None),
        (live("org/tfk8s/dev@abc"), None),
        (live("org/tfk8s/dev2@abc"), "tfk8s stack org/tfk8s/dev2@abc"),
        (live("org/tfk8s/dev@fff"), "the same stack name in another Pulumi state"),
        (live(managers=("kubectl-create",)), "another tool, field managers kubectl-create"),
    ],
    ids=["absent", "ours", "other-stack", "other-state", "other-tool"],
)
def test_foreign_tells_who_else_manages_an_object(obj: dict[str, Any] | None, verdict: str | None) -> None:
    found = ownership.foreign(obj, "org/tfk8s/dev@abc")
    assert (found is None) if verdict is None else (verdict in (found or ""))


def test_the_state_id_tells_two_checkouts_apart_and_is_stable() -> None:
    one = ownership.state_id({"PULUMI_BACKEND_URL": "file:///a/.state/backend"})
    assert one == ownership.state_id({"PULUMI_BACKEND_URL": "file:///a/.state/backend/"})
    assert one != ownership.state_id({"PULUMI_BACKEND_URL": "file:///b/.state/backend"})
    assert ownership.state_id({"HOME": "/nonexistent"}) is None
    assert ownership.label_value("team/a b") == "team-a-b" and len(ownership.label_value("x" * 80)) == 63


def existing(objects: dict[str, dict[str, Any] | None]) -> Any:
    """A cluster holding `objects` (API path -> object); everything else is absent."""
    return lambda path: objects.get(path)


def test_a_platform_that_would_adopt_a_foreign_namespace_is_refused_before_anything_exists(
    platform_config: dict[str, Any],
) -> None:
    read = existing({"/api/v1/namespaces/tfk8s-bob": live(managers=("kubectl-create",))})
    with pytest.raises(OwnershipConflict) as error:
        run_program(platform_config, read=read)
    message = str(error.value)
    assert "tfk8s:users[1].name: namespace 'tfk8s-bob' already exists, managed by another tool" in message
    assert "nothing was changed" in message and "Choose another name" in message


def test_an_experiment_needs_the_namespace_its_platform_owns(dev_config: dict[str, Any]) -> None:
    with pytest.raises(OwnershipConflict, match=r"namespace 'tfk8s-alice' of user 'alice' is not the platform stack's"):
        run_program(dev_config, read=existing({}))
    foreign = existing({"/api/v1/namespaces/tfk8s-alice": live("organization/tfk8s/other-platform@x")})
    with pytest.raises(OwnershipConflict, match=r"managed by tfk8s stack organization/tfk8s/other-platform@x"):
        run_program(dev_config, read=foreign)


def test_two_experiments_may_not_share_a_name(dev_config: dict[str, Any]) -> None:
    read = existing(
        {
            "/api/v1/namespaces/tfk8s-alice": live(PLATFORM_OWNER),
            "/api/v1/namespaces/tfk8s-alice/services/dev-mnist-ps-0": live("organization/tfk8s/someone-else@x"),
        }
    )
    with pytest.raises(OwnershipConflict) as error:
        run_program(dev_config, read=read)
    assert "tfk8s:clusters[0].name: Service tfk8s-alice/dev-mnist-ps-0 already exists" in str(error.value)
    assert "set a different tfk8s:experiment" in str(error.value)


def test_a_scratch_claim_someone_else_owns_is_refused(dev_config: dict[str, Any]) -> None:
    dev_config["clusters"][0]["scratch"] = {"size": "1Gi"}
    read = existing(
        {
            "/api/v1/namespaces/tfk8s-alice": live(PLATFORM_OWNER),
            "/api/v1/namespaces/tfk8s-alice/persistentvolumeclaims/dev-mnist-scratch": live(managers=("kubectl-create",)),
        }
    )
    with pytest.raises(OwnershipConflict) as error:
        run_program(dev_config, read=read, platform=facts_with_scratch())
    assert "tfk8s:clusters[0].scratch: PersistentVolumeClaim tfk8s-alice/dev-mnist-scratch already exists" in str(error.value)


@pulumi.runtime.test
def test_an_experiment_on_its_platforms_namespace_creates_only_its_own_objects(dev_config: dict[str, Any]) -> None:
    read = existing({"/api/v1/namespaces/tfk8s-alice": live(PLATFORM_OWNER)})
    d = run_program(dev_config, read=read)

    def check() -> None:
        kinds = {r.typ for r in d.mocks.resources}
        assert not kinds & {
            "kubernetes:core/v1:Namespace",
            "kubernetes:core/v1:PersistentVolumeClaim",
            "kubernetes:core/v1:PersistentVolume",
            "kubernetes:storage.k8s.io/v1:StorageClass",
            "kubernetes:core/v1:NodePatch",
            "kubernetes:core/v1:Secret",
        }
        for r in d.mocks.resources:
            if r.typ.startswith("kubernetes:"):
                meta = r.inputs["metadata"]
                assert meta["namespace"] == "tfk8s-alice"
                assert meta["labels"][ownership.STACK] == "dev" and meta["labels"][ownership.STACK_KIND] == "experiment"
                assert meta["labels"]["tfk8s.io/experiment"] == "dev"
                assert meta["annotations"][ownership.OWNER].startswith("organization/tfk8s/dev@")
        # One Layout per cluster, of the platform's kind: the experiment registers with its platform.
        (layout,) = d.mocks.of_type("kubernetes:ptest.layouts.tfk8s.io/v1:Layout")
        assert layout.inputs["metadata"]["name"] == "dev-mnist-layout"

    return after(d, check)


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        (
            RuntimeError("unknown stack"),
            r"tfk8s:platformStack: cannot read the platform stack 'organization/tfk8s/p' \(unknown stack\)",
        ),
        ({}, r"stack 'organization/tfk8s/p' has no 'platform' output"),
        ({"platform": {"schemaVersion": 1}}, r"the 'platform' output of 'organization/tfk8s/p' is not what this tfk8s expects"),
        (None, r"tfk8s:user: the platform stack 'organization/tfk8s/p' has no user 'carol' \(it has \['alice', 'bob'\]\)"),
    ],
    ids=["no-stack", "not-a-platform", "other-version", "no-such-user"],
)
def test_a_missing_platform_or_user_is_named_with_the_fix(outputs: Any, message: str) -> None:
    pulumi.runtime.set_mocks(RecordingMocks(), project="tfk8s", stack="exp", organization="organization")

    def read(name: str) -> dict[str, Any]:
        if isinstance(outputs, Exception):
            raise outputs
        return {"platform": facts_for(stack_config("platform-dev"))} if outputs is None else outputs

    with pytest.raises(platform_ref.PlatformUnavailable, match=message):
        platform_ref.platform_facts("p", "carol", read)


def test_the_platform_output_is_read_through_the_engines_stack_reference_call() -> None:
    """`read_outputs` is the invoke `pulumi.StackReference` makes; mocks answer it like the engine."""
    published = facts_for(stack_config("platform-dev"))

    class Platform(RecordingMocks):
        def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
            assert args.token == platform_ref.READ_STACK_OUTPUTS
            return {"name": args.args["name"], "outputs": {"platform": published}, "secretOutputNames": []}

    pulumi.runtime.set_mocks(Platform(), project="tfk8s", stack="dev", organization="organization")
    facts = platform_ref.platform_facts("platform-dev", "alice")
    assert facts.users["alice"].namespace == "tfk8s-alice" and facts.ports.tensorflow == 2222


@pulumi.runtime.test
def test_what_a_platform_publishes_is_what_experiments_read(platform_config: dict[str, Any]) -> None:
    """The contract both ways: the platform's real `platform` output parses as PlatformFacts."""
    d = run_program(platform_config)
    published = d.components["platform"]

    def check(raw: dict[str, Any]) -> None:
        facts = PlatformFacts.model_validate(copy.deepcopy(raw), strict=False)
        assert sorted(facts.users) == ["alice", "bob"]
        alice = facts.users["alice"]
        assert (alice.namespace, alice.data_claim, alice.log_claim, alice.notebook_host) == (
            "tfk8s-alice",
            "tfk8s-data",
            "tfk8s-log",
            "jupyter-tf:2222",
        )
        assert alice.jupyter_url and alice.jupyter_url.startswith("http://10.0.0.10:3")
        assert facts.owner.startswith("organization/tfk8s/platform-dev@") and facts.kubernetes_version == "1.34"

    return pulumi.Output.from_input(published).apply(check)


@pytest.mark.parametrize(("version", "guarded"), [("1.34", True), ("1.29", False)], ids=["1.34", "1.29"])
def test_the_platform_guards_its_users_namespaces_against_destroy_while_experiments_exist(
    platform_config: dict[str, Any], version: str, guarded: bool
) -> None:
    platform_config["platform"]["kubernetesVersion"] = version

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(platform_config)

        def check() -> None:
            (crd,) = d.mocks.of_type("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")
            group = crd.inputs["spec"]["group"]
            # The platform's own kind: two platforms on one cluster never share it.
            assert group.endswith(".layouts.tfk8s.io") and crd.inputs["metadata"]["name"] == f"layouts.{group}"
            assert crd.inputs["spec"]["scope"] == "Namespaced"
            policies = d.mocks.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
            bindings = d.mocks.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")
            guards = [
                r for r in d.mocks.of_type("kubernetes:core/v1:ConfigMap") if r.inputs["metadata"].get("name") == "tfk8s-platform"
            ]
            if not guarded:
                assert (policies, bindings, guards) == ([], [], [])
                return
            (policy,), (binding,) = policies, bindings
            # Params of a CRD kind: built-in kinds stop resolving once unbound (kubernetes#130887).
            assert policy.inputs["spec"]["paramKind"] == {"apiVersion": f"{group}/v1", "kind": "Layout"}
            rule = policy.inputs["spec"]["matchConstraints"]
            assert rule["resourceRules"][0]["operations"] == ["DELETE"] and rule["resourceRules"][0]["resources"] == [
                "configmaps"
            ]
            assert binding.inputs["spec"]["paramRef"] == {"selector": {}, "parameterNotFoundAction": "Allow"}
            assert sorted(g.inputs["metadata"]["namespace"] for g in guards) == ["tfk8s-alice", "tfk8s-bob"]
            for g in guards:
                assert all(g.inputs["metadata"]["labels"].get(k) == v for k, v in rule["objectSelector"]["matchLabels"].items())
                # Deleted first on destroy: the guard depends on the user's environment, the storage and the node.
                depends = {r._name for r in d.options[f"kubernetes:core/v1:ConfigMap::{g.name}"].depends_on}  # type: ignore[attr-defined]
                user = g.name.removesuffix("-guard")
                assert {user, "storage", "user-node"} <= depends

        return after(d, check)

    run()


@pytest.mark.parametrize(
    ("in_cluster", "missing"),
    [(("cephfs-tmp",), ("className", "cephfs")), (("cephfs",), ("scratchClassName", "cephfs-tmp"))],
    ids=["shared-class", "scratch-class"],
)
def test_an_existing_class_the_cluster_lacks_is_named_before_anything_exists(
    platform_config: dict[str, Any], in_cluster: tuple[str, ...], missing: tuple[str, str]
) -> None:
    from tfk8s.config_errors import ConfigError

    platform_config["platform"]["storage"] = {"backend": "existing", "className": "cephfs", "scratchClassName": "cephfs-tmp"}
    classes = existing({f"/apis/storage.k8s.io/v1/storageclasses/{name}": live() for name in in_cluster})
    with pytest.raises(ConfigError) as error:
        run_program(platform_config, read=classes)
    key, name = missing
    assert f"storage.{key}: backend 'existing' uses class {name!r}, which the cluster does not have" in str(error.value)
    assert len(error.value.problems) == 1  # the class the cluster has is not named


@pytest.mark.parametrize(
    ("taken", "key"), [("nfs", "className"), ("nfs-scratch", "scratchClassName")], ids=["shared-class", "scratch-class"]
)
def test_a_platform_refuses_to_adopt_either_class_it_would_create(platform_config: dict[str, Any], taken: str, key: str) -> None:
    platform_config["platform"]["storage"] = {"backend": "csi", "className": "nfs", "csi": {"provisioner": "nfs.csi.k8s.io"}}
    read = existing({f"/apis/storage.k8s.io/v1/storageclasses/{taken}": live(managers=("kubectl-create",))})
    with pytest.raises(OwnershipConflict) as error:
        run_program(platform_config, read=read)
    assert f"tfk8s:platform.storage.{key}: StorageClass '{taken}' already exists, managed by another tool" in str(error.value)
