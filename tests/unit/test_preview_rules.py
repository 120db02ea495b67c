"""The pull requests' preview identity (`platform.gitops.previewIdentity`, tfk8s.specs.preview_identity):
what it may touch, the policy that keeps it to dry runs, and who declares what. That the API server
holds it to them, with its own token: tests/e2e/test_preview_identity.py."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
from mocked_program import PREVIEW_ROLE, TEST_GROUP, after, facts_for, run_program, stack_config
from tfk8s.components import guard
from tfk8s.errors import ConfigError
from tfk8s.specs import experimenter_rights, preview_identity
from tfk8s.specs.ownership import Owner

CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
POLICY_BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
# What would let a pull request's code out of a dry run's bounds: read a Secret or a log, run a
# command in a pod, act as someone else, or grant itself more.
NEVER = {"secrets", "pods/log", "pods/exec", "pods/attach", "pods/portforward", "pods/proxy", "services/proxy", "nodes/proxy"}
NEVER_VERBS = {"impersonate", "escalate", "*"}
PLATFORM = Owner(organization="organization", project="tfk8s", stack="platform-dev", kind="platform")  # run_program's


def previewing(raw: dict[str, Any]) -> dict[str, Any]:
    raw["platform"]["gitops"] = {"previewIdentity": True}
    return raw


@pytest.mark.parametrize("queueing", [False, True], ids=["unqueued", "queueing"])
def test_the_preview_role_is_what_the_program_needs_and_holds_nothing_that_leaves_a_dry_run(queueing: bool) -> None:
    layouts = guard.layout_kind(TEST_GROUP)
    rules = experimenter_rights.program_rules(layouts, queueing=queueing)
    experimenter = experimenter_rights.experimenter_rules(layouts, queueing=queueing)
    assert {p.resource for p in rules} == {p.resource for p in experimenter} - {"pods/log"}
    assert not {p.resource for p in rules} & NEVER
    assert not {v for p in rules for v in p.verbs} & NEVER_VERBS
    assert all(p.namespaced for p in rules), "a tenant binds it in her namespace: nothing cluster-wide"


def test_the_policy_refuses_every_write_of_the_preview_identity_but_a_dry_run() -> None:
    spec = preview_identity.dry_run_only()
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule["operations"] == ["CREATE", "UPDATE", "DELETE", "CONNECT"]
    assert rule["resources"] == ["*/*"] and rule["apiGroups"] == ["*"], "every kind and subresource (the API server: `*/*` alone)"
    (condition,) = spec["matchConditions"]
    assert condition["expression"] == "request.userInfo.username == 'system:serviceaccount:tfk8s-gitops:tfk8s-preview'"
    (validation,) = spec["validations"]
    assert validation["expression"] == "request.dryRun == true"


@pulumi.runtime.test
def test_a_platform_with_it_declares_the_role_after_the_policy_binding_and_publishes_the_role() -> None:
    d = run_program(previewing(stack_config("platform-dev")))

    def check(facts: dict[str, Any]) -> None:
        (policy,) = [r for r in d.mocks.of_type(POLICY) if r.name == "preview-identity-dry-run-only"]
        assert policy.inputs["spec"] == preview_identity.dry_run_only()
        (binding,) = [r for r in d.mocks.of_type(POLICY_BINDING) if r.name == "preview-identity-dry-run-only"]
        assert binding.inputs["spec"]["validationActions"] == ["Deny"] and "matchResources" not in binding.inputs["spec"]
        role_key = f"{CLUSTER_ROLE}::preview-identity-role"
        assert d.declared[f"{POLICY_BINDING}::preview-identity-dry-run-only"] in d.options[role_key].depends_on
        role = d.mocks.named(CLUSTER_ROLE, "preview-identity-role")
        layouts = guard.layout_kind(guard.platform_group(PLATFORM))
        assert role.inputs["rules"] == experimenter_rights.rules_for_role(
            experimenter_rights.program_rules(layouts, queueing=False)
        )
        # The role is named by the provider (the mocks: `<logical name>-auto`): tenants read its name from the contract.
        assert "name" not in role.inputs["metadata"] and facts["previewRole"] == f"{role.name}-auto"

    pulumi.Output.from_input(d.components["platform"]).apply(lambda facts: after(d, lambda: check(facts)))


@pulumi.runtime.test
def test_without_it_the_platform_declares_none_and_its_contract_is_as_before() -> None:
    d = run_program(stack_config("platform-dev"))

    def check(facts: dict[str, Any]) -> None:
        assert not [r for r in d.mocks.of_type(POLICY) if r.name.startswith("preview-identity")]
        assert "previewRole" not in facts, "a platform without it publishes the contract it published before"

    pulumi.Output.from_input(d.components["platform"]).apply(lambda facts: after(d, lambda: check(facts)))


@pulumi.runtime.test
def test_a_tenant_binds_the_preview_role_in_her_namespace_alone_to_the_preview_account() -> None:
    platform = facts_for(previewing(stack_config("platform-dev")))
    d = run_program(stack_config("tenant-alice"), platform=platform)

    def check() -> None:
        binding = d.mocks.named(ROLE_BINDING, "previews")
        assert binding.inputs["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": PREVIEW_ROLE}
        assert binding.inputs["subjects"] == [{"kind": "ServiceAccount", "name": "tfk8s-preview", "namespace": "tfk8s-gitops"}]
        assert binding.inputs["metadata"]["namespace"] == "tfk8s-alice"

    after(d, check)


@pulumi.runtime.test
def test_a_tenant_of_a_platform_without_it_binds_no_preview_role() -> None:
    d = run_program(stack_config("tenant-alice"))
    after(d, lambda: not [r for r in d.mocks.of_type(ROLE_BINDING) if r.name == "previews"] or pytest.fail("a previews binding"))


def test_a_cluster_without_admission_policies_is_refused_naming_the_key() -> None:
    raw = previewing(stack_config("platform-dev"))
    raw["platform"]["kubernetesVersion"] = "1.29"
    with pytest.raises(ConfigError) as refused:
        run_program(raw)
    assert "tfk8s:platform.gitops.previewIdentity: Kubernetes 1.29 has no ValidatingAdmissionPolicy" in str(refused.value)
