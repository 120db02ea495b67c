"""`tfk8s doctor` on local clusters that fail it, each for its own reason, run as a platform team runs
it (the installed command, a kubeconfig, a platform stack file): this worker's kwok cluster, whose
nodes report pods Running without running them (the probes are not proven, never passed), with
queueing asked of a cluster without Kueue, with an identity the platform's rights were never
granted to, and an API server that does not answer. Kubernetes 1.25: test_legacy_cluster.py; the
real node, where the probes pass and a CNI without policy enforcement fails: test_real_network.py.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from doctor_run import doctor, sandboxes_kept, stack_file
from drivers import Kube, user_kube


def test_where_pods_never_really_run_every_probe_is_not_proven_and_the_sandbox_goes(kube: Kube) -> None:
    run = doctor(kube.kubeconfig, "--stack", "platform-dev", "--timeout", "10")
    assert run.code == 1 and run.report is not None and not run.report["ready"], run.stderr
    verdicts = run.verdicts()
    # Read: what the server says, and what the admin credentials may do.
    assert verdicts["version"] == "pass" and verdicts["admission-policies"] == "pass" and verdicts["rights"] == "pass"
    assert verdicts["user-node"] == "pass" and verdicts["pod-security"] == "pass"
    # Done: kwok marks the probe pods Running and Ready, and nothing in them ever runs.
    for check in ("dns", "pod-network", "network-policy-deny", "network-policy-allow", "rwx-two-nodes"):
        assert verdicts[check] == "not proven", (check, run.check(check))
    assert "not finished after 10 s" in run.check("dns")["detail"]
    images = [c for c in run.report["checks"] if c["check"].startswith("image:")]
    assert images and {c["verdict"] for c in images} == {"not proven"}
    # platform-dev says policies are not enforced (policyEnforced: false): the check is not required.
    assert run.check("network-policy-deny")["required"] is False
    assert sandboxes_kept(kube.kubeconfig) == []


def test_queueing_on_a_cluster_without_kueue_fails_with_the_fix(kube: Kube, tmp_path: Path) -> None:
    stack = stack_file(tmp_path, {"queueing": {"enabled": True, "capacity": {"cpu": "8", "memory": "16Gi"}}})
    run = doctor(kube.kubeconfig, "--stack", str(stack), "--no-probes")
    assert run.code == 1 and run.verdicts()["queueing"] == "fail"
    assert "kueue.x-k8s.io/v1beta2 clusterqueues" in run.check("queueing")["detail"]
    assert "install Kueue" in run.check("queueing")["fix"]
    assert "pod-security" not in run.verdicts()  # --no-probes creates nothing
    assert sandboxes_kept(kube.kubeconfig) == []


def test_an_identity_without_the_platforms_rights_is_told_what_it_lacks(kube: Kube) -> None:
    mallory = user_kube(kube, "mallory", ["tfk8s-doctor-test"])
    run = doctor(mallory.kubeconfig, "--stack", "platform-dev", "--timeout", "10")
    assert run.code == 1 and run.stderr == "", run.stderr  # a report, no traceback
    rights = run.check("rights")
    assert rights["verdict"] == "fail" and "user 'mallory'" in rights["detail"]
    assert "customresourcedefinitions.apiextensions.k8s.io" in rights["detail"] and "namespaces" in rights["detail"]
    assert run.check("network-policy-deny")["verdict"] == "not proven"
    assert "create namespaces" in run.check("network-policy-deny")["fix"]


def test_an_api_server_that_does_not_answer_is_one_line_and_exit_2(kube: Kube, tmp_path: Path) -> None:
    config = yaml.safe_load(kube.kubeconfig.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = "https://127.0.0.1:1"  # nothing listens on port 1
    dead = tmp_path / "kubeconfig"
    dead.write_text(yaml.safe_dump(config))
    run = doctor(dead)
    assert run.code == 2 and run.report is None
    assert run.stderr.count("\n") == 1 and "does not answer" in run.stderr, run.stderr
