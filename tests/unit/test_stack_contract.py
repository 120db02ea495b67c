"""Three kinds of stack: the platform's and the tenant's contracts, the reads of them, and one owner per object."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pulumi
import pytest
from mocked_program import (
    CONFIG_MAP,
    PLATFORM_OWNER,
    ROOT,
    TEST_GROUP,
    after,
    contract_metadata,
    declared_types,
    facts_for,
    facts_with_scratch,
    run_program,
    stack_config,
    tenant_facts_for,
    tenant_owner,
)
from mocks import RecordingMocks
from tfk8s import program, release
from tfk8s.components import guard
from tfk8s.errors import ConfigError, ContractUnavailable, OwnershipConflict, StackUnavailable
from tfk8s.kube.api_error import KubeApiError
from tfk8s.settings import state_store
from tfk8s.settings.contract import PlatformFacts, TenantFacts
from tfk8s.settings.stack_file import validate
from tfk8s.specs import experimenter_rights, ownership
from tfk8s.stack_kinds import outputs as stack_outputs
from tfk8s.stack_kinds import ref as stack_ref
from tfk8s.stack_kinds import tenant_contract


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
    one = state_store.state_id({"PULUMI_BACKEND_URL": "file:///a/.state/backend"})
    assert one == state_store.state_id({"PULUMI_BACKEND_URL": "file:///a/.state/backend/"})
    assert one != state_store.state_id({"PULUMI_BACKEND_URL": "file:///b/.state/backend"})
    assert state_store.state_id({"HOME": "/nonexistent"}) is None


def test_a_copy_of_a_state_is_told_the_originals_id_and_a_bad_one_is_refused() -> None:
    copy = {"PULUMI_BACKEND_URL": "file:///scratch", state_store.STATE_ID_ENV: "41bb4c3d"}
    assert state_store.state_id(copy) == "41bb4c3d"
    with pytest.raises(ConfigError, match="TFK8S_STATE_ID: 'alice' is no state id"):
        state_store.state_id({**copy, state_store.STATE_ID_ENV: "alice"})
    assert ownership.label_value("team/a b") == "team-a-b" and len(ownership.label_value("x" * 80)) == 63


def existing(objects: dict[str, dict[str, Any] | None]) -> Any:
    """A cluster holding `objects` (API path -> object); everything else is absent."""
    return lambda path: objects.get(path)


TENANT_OWNER = tenant_owner("tenant-alice")  # what the `dev` experiment's tenant publishes as its owner
ALICE_NS = "/api/v1/namespaces/tfk8s-alice"


@pytest.mark.parametrize(
    ("path", "owner", "shown"),
    [
        (ALICE_NS, None, "tfk8s:tenant.name: namespace 'tfk8s-alice' already exists, managed by another tool"),
        (
            f"/apis/{TEST_GROUP}/v1/tenants/alice",
            "organization/tfk8s/tenant-alice-2@x",
            "tfk8s:tenant.name: Tenant 'alice' already exists, managed by tfk8s stack organization/tfk8s/tenant-alice-2@x",
        ),
    ],
    ids=["foreign-namespace", "another-tenant-stack-of-that-name"],
)
def test_a_tenant_that_would_adopt_what_it_does_not_own_is_refused_before_anything_exists(
    tenant_config: dict[str, Any], path: str, owner: str | None, shown: str
) -> None:
    read = existing({path: live(owner, () if owner else ("kubectl-create",))})
    with pytest.raises(OwnershipConflict) as error:
        run_program(tenant_config, read=read)
    message = str(error.value)
    assert shown in message
    assert "nothing was changed" in message and "Another tenant stack has this user name: choose another tenant.name" in message


def test_an_experiment_needs_the_namespace_its_tenant_owns(dev_config: dict[str, Any]) -> None:
    with pytest.raises(OwnershipConflict, match=r"namespace 'tfk8s-alice' of tenant 'alice' is not the tenant stack's"):
        run_program(dev_config, read=existing({}))
    # A namespace of the platform-era layout (the platform owned users' namespaces) is not the tenant's either.
    foreign = existing({ALICE_NS: live(PLATFORM_OWNER)})
    with pytest.raises(
        OwnershipConflict,
        match=r"managed by tfk8s stack organization/tfk8s/platform-dev@test. `pulumi up` the tenant stack of 'alice' again",
    ):
        run_program(dev_config, read=foreign)


def test_two_experiments_may_not_share_a_name(dev_config: dict[str, Any]) -> None:
    read = existing(
        {
            ALICE_NS: live(TENANT_OWNER),
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
            ALICE_NS: live(TENANT_OWNER),
            "/api/v1/namespaces/tfk8s-alice/persistentvolumeclaims/dev-mnist-scratch": live(managers=("kubectl-create",)),
        }
    )
    with pytest.raises(OwnershipConflict) as error:
        run_program(dev_config, read=read, platform=facts_with_scratch())
    assert "tfk8s:clusters[0].scratch: PersistentVolumeClaim tfk8s-alice/dev-mnist-scratch already exists" in str(error.value)


@pulumi.runtime.test
def test_an_experiment_in_its_tenants_namespace_creates_only_its_own_objects(dev_config: dict[str, Any]) -> None:
    read = existing({ALICE_NS: live(TENANT_OWNER)})
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
            f"kubernetes:{TEST_GROUP}/v1:Tenant",
        }
        declared = {(r.typ, r.inputs["metadata"].get("name")) for r in d.mocks.resources if r.typ.startswith("kubernetes:")}
        for r in d.mocks.resources:
            if r.typ == "kubernetes:apps/v1:DeploymentPatch":  # the fields it adds, to a Deployment of this stack
                assert ("kubernetes:apps/v1:Deployment", r.inputs["metadata"]["name"]) in declared
                assert r.inputs["metadata"]["namespace"] == "tfk8s-alice"
            elif r.typ.startswith("kubernetes:"):
                meta = r.inputs["metadata"]
                assert meta["namespace"] == "tfk8s-alice"
                assert meta["labels"][ownership.STACK] == "dev" and meta["labels"][ownership.STACK_KIND] == "experiment"
                assert meta["labels"]["tfk8s.io/experiment"] == "dev"
                assert meta["annotations"][ownership.OWNER].startswith("organization/tfk8s/dev@")
        # One Layout per cluster, of the platform's kind: the experiment registers with its tenant.
        (layout,) = d.mocks.of_type(f"kubernetes:{TEST_GROUP}/v1:Layout")
        assert layout.inputs["metadata"]["name"] == "dev-mnist-layout"

    return after(d, check)


# --- what an experiment reads: its tenant's contract, in its namespace (tfk8s.stack_kinds.tenant_contract) -----------


PLATFORM_DEV = {"platform": facts_for(stack_config("platform-dev"))}
TENANT_ALICE = {"tenant": tenant_facts_for("tenant-alice")}
CONTRACT_PATH = "/api/v1/namespaces/tfk8s-alice/configmaps/tfk8s-contract"


def outputs_of(stacks: dict[str, Any]) -> Any:
    """The engine's read of stack outputs: each qualified name's outputs, an exception to raise, or unknown."""

    def read(name: str) -> dict[str, Any]:
        found = stacks.get(name.rsplit("/", 1)[1], RuntimeError("unknown stack"))
        if isinstance(found, Exception):
            raise found
        return found

    return read


def contract_reader(data: dict[str, str] | None | Exception, **metadata: Any) -> Any:
    """The cluster's answer to a GET of alice's contract: its data (as her tenant stack writes it,
    but for `metadata`'s keys), no such object (None), or an error."""

    def get(path: str) -> dict[str, Any] | None:
        assert path == CONTRACT_PATH
        if isinstance(data, Exception):
            raise data
        if data is None:
            return None
        owner = json.loads(data.get(tenant_contract.TENANT_DATA, "{}")).get("owner", "")
        return {"metadata": {**contract_metadata("tfk8s-alice", owner), **metadata}, "data": data}

    return get


def alices_contract(**replaced: str) -> dict[str, str]:
    return {
        tenant_contract.TENANT_DATA: json.dumps(TENANT_ALICE["tenant"]),
        tenant_contract.PLATFORM_DATA: json.dumps(PLATFORM_DEV["platform"]),
        **replaced,
    }


FIX_TENANT = r"`pulumi up` the tenant stack of 'tfk8s-alice' with this version of tfk8s"


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            None,
            r"^tfk8s:namespace: namespace 'tfk8s-alice' has no tfk8s tenant contract \(ConfigMap tfk8s-contract\): it is "
            r"not a tenant's namespace, or its tenant stack is not deployed. Fix the namespace, or `pulumi up` the tenant "
            r"stack first$",
        ),
        (
            KubeApiError("GET ...: HTTP 403 Forbidden", 403),
            r"^tfk8s:namespace: user 'bob' may not read the tenant contract in namespace 'tfk8s-alice' \(ConfigMap "
            r"tfk8s-contract\): it is not one of that tenant's identities\. .*ask the platform team to add you",
        ),
        (
            {tenant_contract.PLATFORM_DATA: json.dumps(PLATFORM_DEV["platform"])},
            r"^tfk8s:namespace: the contract in 'tfk8s-alice' has no tenant's facts; " + FIX_TENANT,
        ),
        (
            alices_contract(**{tenant_contract.TENANT_DATA: json.dumps({"schemaVersion": 2})}),
            r"^tfk8s:namespace: the tenant's facts in 'tfk8s-alice''s contract is not what this tfk8s expects .*; " + FIX_TENANT,
        ),
        (
            alices_contract(**{tenant_contract.PLATFORM_DATA: "{not json"}),
            r"^tfk8s:namespace: the platform's facts in 'tfk8s-alice''s contract is not what this tfk8s expects",
        ),
    ],
    ids=["no-contract", "not-the-callers-tenant", "no-tenant-facts", "other-version", "not-json"],
)
def test_a_namespace_without_a_contract_the_caller_may_read_is_named_with_the_key_and_the_fix(answer: Any, message: str) -> None:
    with pytest.raises(ContractUnavailable, match=message):
        tenant_contract.read("tfk8s-alice", contract_reader(answer), lambda: "user 'bob'")


def test_a_contract_of_another_namespace_is_refused() -> None:
    """A copy of bob's contract in alice's namespace would place alice's experiment in bob's."""
    bobs = {**TENANT_ALICE["tenant"], "name": "bob", "namespace": "tfk8s-bob"}
    with pytest.raises(ContractUnavailable, match=r"is tenant 'bob''s of namespace 'tfk8s-bob'"):
        tenant_contract.read(
            "tfk8s-alice", contract_reader(alices_contract(**{tenant_contract.TENANT_DATA: json.dumps(bobs)})), str
        )


def test_an_other_error_of_the_api_server_is_not_taken_for_a_refusal() -> None:
    with pytest.raises(KubeApiError, match="HTTP 500"):
        tenant_contract.read("tfk8s-alice", contract_reader(KubeApiError("GET ...: HTTP 500 x", 500)), str)


def test_an_experiment_on_an_undeployed_tenant_declares_nothing(dev_config: dict[str, Any]) -> None:
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="tfk8s", stack="dev", organization="organization")
    with pytest.raises(ContractUnavailable, match="has no tfk8s tenant contract"):
        program.run_experiment(validate(dev_config), None, None, {}, ROOT, read_whole=contract_reader(None))  # type: ignore[arg-type]
    assert mocks.resources == []


def test_an_experiment_without_credentials_tfk8s_can_use_is_refused(dev_config: dict[str, Any]) -> None:
    """Without a reader (kubernetes:kubeconfig in config) there is no contract to read."""
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="tfk8s", stack="dev", organization="organization")
    with pytest.raises(ContractUnavailable, match="set KUBECONFIG to your kubeconfig file instead"):
        program.run_experiment(validate(dev_config), None, None, {}, ROOT, read_whole=None)  # type: ignore[arg-type]
    assert mocks.resources == []


def test_the_contract_an_experiment_reads_parses_back_to_what_its_tenant_published() -> None:
    tenant, platform = tenant_contract.read("tfk8s-alice", contract_reader(alices_contract()), str)
    assert tenant == TenantFacts.model_validate(TENANT_ALICE["tenant"], strict=False)
    assert platform == PlatformFacts.model_validate(PLATFORM_DEV["platform"], strict=False)


# Mappings whose keys are the user's (labels, a driver's parameters, class names), not the schema's.
USERS_MAPPINGS = {"parameters", "podLabels", "monitorLabels", "priorityClasses"}


def with_a_new_key_at_every_depth(facts: Any) -> Any:
    """`facts` as a newer release might publish them: a key this release does not know in every
    mapping of the schema's."""
    if isinstance(facts, dict):
        kept = {k: v if k in USERS_MAPPINGS else with_a_new_key_at_every_depth(v) for k, v in facts.items()}
        return {**kept, "addedByANewerRelease": {"x": 1}}
    if isinstance(facts, list):
        return [with_a_new_key_at_every_depth(item) for item in facts]
    return facts


def test_facts_of_a_newer_release_parse_with_the_keys_this_one_does_not_know_ignored_at_every_depth() -> None:
    """The window (docs/operations/releases.md): a reader takes facts one release line newer. The
    settings nested in them are the stack files' models, which refuse unknown keys; 0.3.0's readers
    refused a 0.4 platform's facts so (tests/e2e/test_upgrade.py found it going back)."""
    platform, tenant = PLATFORM_DEV["platform"], TENANT_ALICE["tenant"]
    newer = with_a_new_key_at_every_depth(platform)
    assert newer["network"]["addedByANewerRelease"] and newer["userNode"]["addedByANewerRelease"]
    assert PlatformFacts.model_validate(newer, strict=False) == PlatformFacts.model_validate(platform, strict=False)
    newer_tenant = with_a_new_key_at_every_depth(tenant)
    assert TenantFacts.model_validate(newer_tenant, strict=False) == TenantFacts.model_validate(tenant, strict=False)
    # Read from the tenant's contract ConfigMap, as an experiment reads them.
    contract = {name: json.dumps(with_a_new_key_at_every_depth(json.loads(text))) for name, text in alices_contract().items()}
    read_tenant, read_platform = tenant_contract.read("tfk8s-alice", contract_reader(contract), str)
    assert read_platform == PlatformFacts.model_validate(platform, strict=False) and read_tenant.name == "alice"


def test_a_stack_file_still_refuses_an_unknown_key_in_the_settings_facts_share(platform_config: dict[str, Any]) -> None:
    config = copy.deepcopy(platform_config)
    config["platform"].setdefault("network", {})["addedByANewerRelease"] = True
    with pytest.raises(ValueError, match=r"platform\.network\.addedByANewerRelease: unknown key"):
        validate(config)


def test_a_tenants_platform_is_named_with_its_own_key() -> None:
    pulumi.runtime.set_mocks(RecordingMocks(), project="tfk8s", stack="tenant-alice", organization="organization")
    with pytest.raises(StackUnavailable, match=r"^tfk8s:platformStack: stack 'organization/tfk8s/p' has no 'platform'"):
        stack_ref.platform_facts("p", outputs_of({"p": TENANT_ALICE}))
    assert stack_ref.platform_facts("org/proj/p", outputs_of({"p": PLATFORM_DEV})).namespace_prefix == "tfk8s-"


@pytest.mark.parametrize("ref", ["platform-dev", "tfk8s/platform-dev", "organization/tfk8s/platform-dev"])
def test_every_form_of_stack_reference_the_schema_offers_reads_the_same_stack(ref: str) -> None:
    """`stack`, `project/stack` and `org/project/stack` (tfk8s.settings.types.StackReference) all name
    the same stack: the engine's stack-reference call is asked for its qualified name, never
    `org/project/project/stack`."""
    asked: list[str] = []

    class Engine(RecordingMocks):
        def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
            assert args.token == stack_outputs.READ_STACK_OUTPUTS
            asked.append(args.args["name"])
            return {"name": args.args["name"], "outputs": PLATFORM_DEV, "secretOutputNames": []}

    pulumi.runtime.set_mocks(Engine(), project="tfk8s", stack="tenant-alice", organization="organization")
    platform = stack_ref.platform_facts(ref)
    assert asked == ["organization/tfk8s/platform-dev"]
    assert platform.ports.tensorflow == 2222


# --- what the platform and a tenant publish and declare ------------------------------------------------


@pulumi.runtime.test
def test_what_a_platform_publishes_is_what_tenants_and_experiments_read(platform_config: dict[str, Any]) -> None:
    """The contract both ways: the platform's real `platform` output parses as PlatformFacts."""
    d = run_program(platform_config)
    published = d.components["platform"]

    def check(raw: dict[str, Any]) -> None:
        facts = PlatformFacts.model_validate(copy.deepcopy(raw), strict=False)
        assert "users" not in raw  # tenants publish their own
        group = guard.platform_group(
            ownership.Owner(organization="organization", project="tfk8s", stack="platform-dev", kind="platform", state=None)
        )
        assert (facts.layouts, facts.tenants) == (guard.layout_kind(group), guard.tenant_kind(group))
        assert facts.experimenter_role == guard.experimenter_role(group)
        assert (facts.user_node.name, facts.user_node.address) == ("tfk8s-user-node", "10.0.0.10")
        assert (facts.namespace_prefix, facts.storage_class, facts.storage.backend) == ("tfk8s-", "tfk8s-local", "local")
        assert facts.default_quota.cpu == "32" and facts.container_defaults.memory == "2Gi"
        assert facts.owner.startswith("organization/tfk8s/platform-dev@") and facts.kubernetes_version == "1.34"

    return pulumi.Output.from_input(published).apply(check)


@pulumi.runtime.test
def test_what_a_tenant_publishes_is_what_its_experiments_read(
    platform_config: dict[str, Any], tenant_config: dict[str, Any]
) -> None:
    """The tenant's real `tenant` output parses as TenantFacts, with its quota as applied, and its
    contract ConfigMap is what its experiments read back: the same facts, and the platform's."""
    platform_config["platform"]["defaultQuota"] = {"memory": "64Gi"}
    tenant_config["tenant"]["quota"] = {"cpu": "8"}
    d = run_program(tenant_config, platform=facts_for(platform_config))

    def check(raw: dict[str, Any]) -> pulumi.Output[Any]:
        facts = TenantFacts.model_validate(copy.deepcopy(raw), strict=False)
        assert (facts.name, facts.namespace, facts.data_claim, facts.log_claim, facts.notebook_host) == (
            "alice",
            "tfk8s-alice",
            "tfk8s-data",
            "tfk8s-log",
            "jupyter-tf:2222",
        )
        assert (facts.quota.cpu, facts.quota.memory, facts.quota.gpus) == ("8", "64Gi", 4)  # own key, platform's, default
        assert facts.platform_stack == "organization/tfk8s/platform-dev"
        assert facts.owner.startswith("organization/tfk8s/tenant-alice@")
        assert facts.jupyter_url and facts.jupyter_url.startswith("http://10.0.0.10:3")
        assert facts.tensorboard_url and facts.tensorboard_url.startswith("http://10.0.0.10:3")

        def contract_read_back() -> None:
            (contract,) = [c for c in d.mocks.of_type(CONFIG_MAP) if c.inputs["metadata"].get("name") == tenant_contract.NAME]
            assert contract.inputs["metadata"]["namespace"] == "tfk8s-alice"
            assert contract.inputs["metadata"]["labels"]["tfk8s.io/stack-kind"] == "tenant"  # the platform team's alone
            # Read back as declared, metadata included: what the tenant stack writes is what a reader trusts.
            declared = {"metadata": contract.inputs["metadata"], "data": contract.inputs["data"]}
            read_back = tenant_contract.read("tfk8s-alice", lambda _: declared, str)
            assert read_back == (facts, PlatformFacts.model_validate(facts_for(platform_config), strict=False))

        return after(d, contract_read_back)

    return pulumi.Output.from_input(d.components["tenant"]).apply(check)


RBAC = "rbac.authorization.k8s.io"
ROLE_BINDING = f"kubernetes:{RBAC}/v1:RoleBinding"


def experimenter_bindings(d: Any) -> list[Any]:
    return [r for r in d.mocks.of_type(ROLE_BINDING) if r.inputs["roleRef"]["kind"] == "ClusterRole"]


@pytest.mark.parametrize(
    ("identities", "subjects"),
    [
        ({"users": ["alice"]}, [{"kind": "User", "apiGroup": RBAC, "name": "alice"}]),
        (
            {"users": ["alice@example.com", "system:serviceaccount:tfk8s-gitops:tfk8s-dev"], "groups": ["ml-team"]},
            [
                {"kind": "User", "apiGroup": RBAC, "name": "alice@example.com"},
                {"kind": "ServiceAccount", "name": "tfk8s-dev", "namespace": "tfk8s-gitops"},
                {"kind": "Group", "apiGroup": RBAC, "name": "ml-team"},
            ],
        ),
        ({}, None),
    ],
    ids=["a-user", "users-a-service-account-and-a-group", "none"],
)
def test_a_tenant_registers_then_binds_exactly_its_identities_in_its_namespace(
    tenant_config: dict[str, Any], identities: dict[str, list[str]], subjects: list[dict[str, str]] | None
) -> None:
    tenant_config["tenant"]["identities"] = identities
    platform = facts_for(stack_config("platform-dev"))

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(tenant_config, platform=platform)

        def check() -> None:
            tenants = platform["tenants"]
            (registration,) = d.mocks.of_type(f"kubernetes:{tenants['group']}/{tenants['version']}:{tenants['kind']}")
            assert (registration.inputs["apiVersion"], registration.inputs["kind"]) == (f"{tenants['group']}/v1", "Tenant")
            meta = registration.inputs["metadata"]
            assert meta["name"] == "alice" and "namespace" not in meta  # cluster-scoped, named after the user
            assert registration.inputs["spec"]["namespace"] == "tfk8s-alice"
            # Registered first: the namespace, and so everything in it, waits for it (and goes before it on destroy).
            depends = d.options["kubernetes:core/v1:Namespace::alice"].depends_on or []
            assert d.components["registration"] in depends
            found = experimenter_bindings(d)
            if subjects is None:
                assert found == []  # nobody to bind: only the platform team's own identities act here
                return
            (binding,) = found
            assert binding.inputs["metadata"]["namespace"] == "tfk8s-alice"
            assert binding.inputs["roleRef"] == {"apiGroup": RBAC, "kind": "ClusterRole", "name": platform["experimenterRole"]}
            assert binding.inputs["subjects"] == subjects

        return after(d, check)

    run()


@pytest.mark.parametrize(("version", "guarded"), [("1.34", True), ("1.25", False)], ids=["1.34", "1.25"])
def test_a_tenant_guards_its_namespace_while_experiments_exist(
    tenant_config: dict[str, Any], version: str, guarded: bool
) -> None:
    platform = facts_for(stack_config("platform-dev"))
    platform["kubernetesVersion"] = version

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(tenant_config, platform=platform)

        def check() -> None:
            guards = [
                r for r in d.mocks.of_type("kubernetes:core/v1:ConfigMap") if r.inputs["metadata"].get("name") == guard.GUARD_NAME
            ]
            if not guarded:
                assert guards == []
                return
            (found,) = guards
            meta = found.inputs["metadata"]
            assert meta["name"] == "tfk8s-tenant" and meta["namespace"] == "tfk8s-alice"
            # The label the platform's policy selects on: its Layouts' group.
            assert meta["labels"]["tfk8s.io/platform-guard"] == platform["layouts"]["group"]
            # Deleted first on destroy: it depends on the tenant's environment and its experimenters' binding.
            depends = d.options[f"kubernetes:core/v1:ConfigMap::{found.name}"].depends_on or []
            assert d.components["user"] in depends
            (binding,) = experimenter_bindings(d)
            assert binding.name in {getattr(r, "_name", None) for r in depends}

        return after(d, check)

    run()


@pytest.mark.parametrize(("version", "guarded"), [("1.34", True), ("1.25", False)], ids=["1.34", "1.25"])
def test_the_platform_defines_its_kinds_the_experimenter_role_and_the_guards(
    platform_config: dict[str, Any], version: str, guarded: bool
) -> None:
    platform_config["platform"]["kubernetesVersion"] = version

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(platform_config)

        def check() -> None:
            crds = {
                r.inputs["spec"]["names"]["kind"]: r.inputs
                for r in d.mocks.of_type("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")
            }
            assert sorted(crds) == ["Layout", "Tenant"]
            group = crds["Layout"]["spec"]["group"]
            # The platform's own group: two platforms on one cluster never share it.
            assert group.endswith(".layouts.tfk8s.io") and crds["Tenant"]["spec"]["group"] == group
            assert (crds["Layout"]["metadata"]["name"], crds["Layout"]["spec"]["scope"]) == (f"layouts.{group}", "Namespaced")
            assert (crds["Tenant"]["metadata"]["name"], crds["Tenant"]["spec"]["scope"]) == (f"tenants.{group}", "Cluster")
            (role,) = d.mocks.of_type(f"kubernetes:{RBAC}/v1:ClusterRole")
            assert role.inputs["metadata"]["name"] == guard.experimenter_role(group)
            assert role.inputs["rules"] == experimenter_rights.rules_for_role(
                experimenter_rights.experimenter_rules(guard.layout_kind(group))
            )
            assert role.inputs["metadata"]["labels"][guard.GUARD_LABEL] == group
            # Deleted first on destroy: after it, only what no tenant uses any more.
            depends = {
                getattr(r, "_name", None) for r in d.options[f"kubernetes:{RBAC}/v1:ClusterRole::{role.name}"].depends_on or []
            }
            assert {"storage", "user-node", "platform-guard-layouts", "platform-guard-tenants"} <= depends
            assert not d.mocks.of_type(ROLE_BINDING) and not d.mocks.of_type("kubernetes:core/v1:ConfigMap")  # nothing per tenant
            policies = d.mocks.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
            bindings = d.mocks.of_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")
            if not guarded:
                assert (policies, bindings) == ([], [])
                return
            # The guards are the policies with params (tfk8s.components.tenant_admission's have none).
            guards = [p for p in policies if "paramKind" in p.inputs["spec"]]
            by_resource = {p.inputs["spec"]["matchConstraints"]["resourceRules"][0]["resources"][0]: p for p in guards}
            assert sorted(by_resource) == ["clusterroles", "configmaps"] and len(guards) == 2
            for resource, (api_group, kind) in {"configmaps": ("", "Layout"), "clusterroles": (RBAC, "Tenant")}.items():
                spec = by_resource[resource].inputs["spec"]
                (rule,) = spec["matchConstraints"]["resourceRules"]
                assert (rule["operations"], rule["apiGroups"]) == (["DELETE", "UPDATE"], [api_group])
                assert spec["matchConstraints"]["objectSelector"] == {"matchLabels": {guard.GUARD_LABEL: group}}
                # Params of a CRD kind: built-in kinds stop resolving once unbound (kubernetes#130887).
                assert spec["paramKind"] == {"apiVersion": f"{group}/v1", "kind": kind}
            assert {b.inputs["spec"]["policyName"] for b in bindings} == {f"{p.name}-auto" for p in policies}
            for b in bindings:
                if b.inputs["spec"]["policyName"] in {f"{p.name}-auto" for p in guards}:
                    assert b.inputs["spec"]["paramRef"] == {"selector": {}, "parameterNotFoundAction": "Allow"}
                assert b.inputs["spec"]["validationActions"] == ["Deny"]

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
    from tfk8s.errors import ConfigError

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


def published_by(facts: dict[str, Any], version: str | None) -> dict[str, Any]:
    """`facts` as the release `version` published them (None: before releases were recorded)."""
    found = {k: v for k, v in facts.items() if k != "release"}
    return found if version is None else {**found, "release": version}


def test_every_stacks_facts_say_the_release_that_published_them() -> None:
    assert PLATFORM_DEV["platform"]["release"] == release.VERSION
    assert TENANT_ALICE["tenant"]["release"] == release.VERSION


def one_line(offset: int) -> str:
    """A release `offset` lines from this one's (0.x: its minor)."""
    return f"0.{release.line(release.VERSION)[1] + offset}.0"


@pytest.mark.parametrize("offset", [-1, 0], ids=["one-line-older", "this-line"])
def test_an_experiment_reads_a_contract_one_release_line_older_or_of_its_own(offset: int) -> None:
    written = one_line(offset)
    contract = alices_contract(
        **{
            tenant_contract.TENANT_DATA: json.dumps(published_by(TENANT_ALICE["tenant"], written)),
            tenant_contract.PLATFORM_DATA: json.dumps(published_by(PLATFORM_DEV["platform"], written)),
        }
    )
    tenant, platform = tenant_contract.read("tfk8s-alice", contract_reader(contract), str)
    assert tenant.release == platform.release == written


def contract_of(version: str | None) -> dict[str, str]:
    """Alice's contract with the tenant's and the platform's facts as release `version` published them."""
    return alices_contract(
        **{
            tenant_contract.TENANT_DATA: json.dumps(published_by(TENANT_ALICE["tenant"], version)),
            tenant_contract.PLATFORM_DATA: json.dumps(published_by(PLATFORM_DEV["platform"], version)),
        }
    )


def test_0_3_reads_a_contract_from_before_releases_were_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(release, "VERSION", "0.3.0")
    contract = contract_of(None)
    assert tenant_contract.read("tfk8s-alice", contract_reader(contract), str)[0].release is None


def test_an_experiment_reads_a_tenant_upgraded_one_line_before_it() -> None:
    """The upgrade order (platform, tenants, experiments) has experiments read newer contracts."""
    newer = one_line(1)
    contract = alices_contract(**{tenant_contract.TENANT_DATA: json.dumps(published_by(TENANT_ALICE["tenant"], newer))})
    assert tenant_contract.read("tfk8s-alice", contract_reader(contract), str)[0].release == newer


@pytest.mark.parametrize(
    ("data", "written", "message"),
    [
        (
            tenant_contract.TENANT_DATA,
            "0.1.0",
            r"^tfk8s:namespace: the tenant's contract in 'tfk8s-alice' was published by tfk8s 0\.1\.0, 2 release lines "
            r"before this experiment's tfk8s 0\.3\.0; .* Upgrade in order: the tenant stack of 'tfk8s-alice' with a "
            r"release of tfk8s at most 1 line before 0\.3\.0, then this experiment$",
        ),
        (
            tenant_contract.PLATFORM_DATA,
            "0.1.0",
            r"^tfk8s:namespace: the platform's facts in 'tfk8s-alice''s contract was published by tfk8s 0\.1\.0, .* "
            r"Upgrade in order: the platform stack 'organization/tfk8s/platform-dev', then the tenant stack of 'tfk8s-alice'",
        ),
        (
            tenant_contract.TENANT_DATA,
            "0.5.0",
            r"^tfk8s:namespace: the tenant's contract in 'tfk8s-alice' was published by tfk8s 0\.5\.0, 2 release lines "
            r"after this experiment's tfk8s 0\.3\.0; .* Upgrade this experiment's tfk8s first, to a release at most 1 "
            r"line before 0\.5\.0$",
        ),
        (tenant_contract.TENANT_DATA, "latest", r"published by release 'latest', which is not a tfk8s release"),
    ],
    ids=["tenant-too-old", "platform-too-old", "tenant-too-new", "not-a-release"],
)
def test_a_contract_outside_the_window_is_refused_naming_both_releases_and_what_to_upgrade_first(
    data: str, written: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(release, "VERSION", "0.3.0")  # the messages' numbers, whatever this release is
    facts = {tenant_contract.TENANT_DATA: TENANT_ALICE["tenant"], tenant_contract.PLATFORM_DATA: PLATFORM_DEV["platform"]}[data]
    # The other facts of the contract published by 0.3.0 too: only `data` is outside the window.
    contract = {**contract_of("0.3.0"), data: json.dumps(published_by(facts, written))}
    with pytest.raises(ContractUnavailable, match=message):
        tenant_contract.read("tfk8s-alice", contract_reader(contract), str)


def test_a_tenant_refuses_a_platform_outside_the_window_before_anything_is_declared() -> None:
    far = one_line(2)
    pulumi.runtime.set_mocks(RecordingMocks(), project="tfk8s", stack="tenant-alice", organization="organization")
    old = {"platform": published_by(PLATFORM_DEV["platform"], far)}
    with pytest.raises(
        StackUnavailable,
        match=rf"^tfk8s:platformStack: the platform stack 'organization/tfk8s/p''s facts was published by tfk8s {far}, 2 "
        r"release lines after this tenant's",
    ):
        stack_ref.platform_facts("p", outputs_of({"p": old}))
    with declared_types() as declared, pytest.raises(StackUnavailable, match="release lines after this tenant's"):
        run_program(stack_config("tenant-alice"), platform=old["platform"])
    assert declared == []


@pytest.mark.parametrize(
    ("metadata", "said"),
    [
        (
            {"labels": {}, "annotations": {}, "managedFields": [{"manager": "kubectl-create"}]},
            "another tool, field managers kubectl-create",
        ),
        ({"labels": {}}, "it lacks the tenant stack label tfk8s.io/stack-kind: tenant"),
        (
            {"annotations": {ownership.OWNER: "organization/tfk8s/tenant-mallory"}},
            "tfk8s stack organization/tfk8s/tenant-mallory",
        ),
    ],
    ids=["kubectl-made", "unlabelled", "another-stacks"],
)
def test_a_contract_its_tenant_stack_did_not_write_is_not_trusted(metadata: dict[str, Any], said: str) -> None:
    """A ConfigMap named like the contract, written by someone else (a tenant's kubectl where no
    admission policy stops her, another stack): refused, whatever its data says."""
    with pytest.raises(
        ContractUnavailable, match=r"^tfk8s:namespace: the contract in 'tfk8s-alice' was not written by its tenant stack"
    ):
        tenant_contract.read("tfk8s-alice", contract_reader(alices_contract(), **metadata), str)
    with pytest.raises(ContractUnavailable, match=re.escape(said)):
        tenant_contract.read("tfk8s-alice", contract_reader(alices_contract(), **metadata), str)
