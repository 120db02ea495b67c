"""Each training cluster's progress in the experiment's `readiness` (tfk8s.stack_kinds.progress): read
from the tenant's TensorBoard gate during a real `up` with the token her Secret holds, never in a
preview, never without a URL; whatever goes wrong is an `unknown` naming the fix, the `up` goes on,
and the token is nowhere in what the stack exports."""

from __future__ import annotations

import base64
import json
import socket
import time
from collections.abc import Callable
from typing import Any

import pulumi
import pytest
from fake_gate import FakeGate, cluster, status_json
from mocked_program import facts_for, run_program, stack_config, tenant_facts_for
from tfk8s.kube.api_error import KubeApiError
from tfk8s.kube.api_paths import SECRET
from tfk8s.settings.contract import TenantFacts
from tfk8s.specs import readiness
from tfk8s.specs.readiness import PROGRESS_FIELDS, clusters_progress, experiment_readiness
from tfk8s.stack_kinds import progress

TOKEN = "the-token-of-alice"
SECRET_PATH = SECRET.path("tfk8s-jupyter-token", "tfk8s-alice")
TENSORBOARD = "http://10.0.0.10:30002"  # alice's, as tenant_facts_for publishes it
FIGURES = {key: cluster()[key] for key in PROGRESS_FIELDS}


def token_secret(token: str = TOKEN) -> dict[str, Any]:
    return {"data": {"token": base64.b64encode(token.encode()).decode()}}


class Api:
    """The cluster as the experiment's credentials read it: the tenant's token Secret (or what
    reading it raises), nothing else; records every path read."""

    def __init__(self, secret: Any = None) -> None:
        self.secret = token_secret() if secret is None else secret
        self.read: list[str] = []

    def __call__(self, path: str) -> Any:
        self.read.append(path)
        if path != SECRET_PATH:
            return None
        if isinstance(self.secret, Exception):
            raise self.secret
        return self.secret or None


def readiness_of(config: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """The experiment's `readiness` output, once resolved, under mocks."""
    found: list[dict[str, Any]] = []

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        return run_program(config, **kw).components["readiness"].apply(found.append)

    run()
    assert len(found) == 1, "readiness never resolved"
    return found[0]


def test_progress_joins_each_clusters_report_and_ready_says_nothing_of_it() -> None:
    clusters = {"mnist": {"phase": "Running", "problems": []}, "cifar": {"phase": "Pending", "problems": ["chief: not ready"]}}
    links = {"tensorboard": f"{TENSORBOARD}/"}
    without = experiment_readiness(clusters, links)
    with_ = experiment_readiness(clusters, links, {"mnist": FIGURES, "cifar": {"unknown": "why, and the fix"}})
    assert "progress" not in without["clusters"]["mnist"] and "progress" not in without["clusters"]["cifar"]
    assert with_["clusters"]["mnist"] == {**clusters["mnist"], "progress": FIGURES}
    assert with_["clusters"]["cifar"]["progress"] == {"unknown": "why, and the fix"}
    assert {k: v for k, v in with_.items() if k != "clusters"} == {k: v for k, v in without.items() if k != "clusters"}
    assert "progress" not in clusters["mnist"]  # the clusters' own reports are left as they were


def test_a_clusters_progress_is_the_figures_a_user_asks_for_or_why_not() -> None:
    summary = status_json(mnist=cluster(), other=cluster(step=3))["experiments"]["mnist-exp"]
    found = clusters_progress(["mnist", "cifar"], summary, "none yet")
    assert found == {"mnist": FIGURES, "cifar": {"unknown": "none yet"}}
    assert set(FIGURES) == {
        "step",
        "target_steps",
        "fraction",
        "steps_per_second",
        "eta_seconds",
        "state",
        "first_step_seconds",
        "last_checkpoint",
        "updated_at",
    }
    assert clusters_progress(["mnist"], None, "none yet") == {"mnist": {"unknown": "none yet"}}
    assert clusters_progress(["mnist"], {"clusters": {"mnist": cluster(eta_seconds=None)}}, "")["mnist"]["eta_seconds"] is None


def test_with_the_gate_answering_each_cluster_reports_its_progress(dev_config: dict[str, Any]) -> None:
    gate, api = FakeGate(status_json("dev", mnist=cluster())), Api()
    report = readiness_of(dev_config, read_whole=api, open_gate=gate)
    assert report["clusters"]["mnist"]["progress"] == FIGURES
    assert report["ready"] is True and report["clusters"]["mnist"]["phase"] == "Running"
    (request,) = gate.asked
    assert request.full_url == f"{TENSORBOARD}/tfk8s/status?experiment=dev"
    assert request.get_header("Authorization") == f"token {TOKEN}"
    assert gate.timeouts == [progress.TIMEOUT_SECONDS]
    assert api.read.count(SECRET_PATH) == 1
    assert TOKEN not in json.dumps(report)


FAILURES = [
    (
        "wrong-token",
        None,
        (401, b"tfk8s: TensorBoard needs the tenant's token"),
        ["refused the token (401)", "restart that TensorBoard so its gate reads the Secret again"],
    ),
    (
        "unreachable",
        None,
        ConnectionRefusedError(111, "Connection refused"),
        [f"nothing answers at {TENSORBOARD}", "reachable from where `pulumi up` runs", "readiness waits 0.5 s"],
    ),
    ("timed-out", None, TimeoutError("timed out"), [f"nothing answers at {TENSORBOARD} (timed out)"]),
    (
        "no-run-yet",
        None,
        (404, b"tfk8s: no experiment 'dev' on the log volume"),
        ["no progress on the log volume yet", "`tfk8s status --stack dev --watch`"],
    ),
    ("old-gate", None, (404, b"<html>Not found</html>"), ["answers, but not /tfk8s/", "`pulumi up` the tenant stack"]),
    (
        "crash",
        None,
        RuntimeError(f"a bug that says {TOKEN}"),
        ["progress could not be read (RuntimeError): `tfk8s status --stack dev` says why"],
    ),
    (
        "token-forbidden",
        KubeApiError(f"GET {SECRET_PATH}: HTTP 403 Forbidden", 403),
        None,
        ["may not be read by the identity running `pulumi up`", "Run `up` as one of them", "TFK8S_TOKEN"],
    ),
    (
        "no-token-secret",
        {},
        None,
        ["no Secret tfk8s-jupyter-token in namespace 'tfk8s-alice': `pulumi up` the tenant stack of 'alice' again"],
    ),
    ("token-unreadable", KubeApiError(f"GET {SECRET_PATH}: timed out"), None, ["the tenant's token could not be read"]),
]


@pytest.mark.parametrize(("secret", "answer", "says"), [f[1:] for f in FAILURES], ids=[f[0] for f in FAILURES])
def test_what_cannot_be_read_is_unknown_with_the_fix_and_the_up_goes_on(
    dev_config: dict[str, Any], secret: Any, answer: Any, says: list[str]
) -> None:
    gate = FakeGate(answer if answer is not None else status_json("dev", mnist=cluster()))
    report = readiness_of(dev_config, read_whole=Api(secret), open_gate=gate)
    unknown = report["clusters"]["mnist"]["progress"]["unknown"]
    for words in says:
        assert words in unknown, unknown
    assert report["ready"] is True  # the clusters run: progress unread changes nothing of that
    assert len(gate.asked) == (0 if secret is not None else 1)  # without a token, the gate is not asked
    assert TOKEN not in json.dumps(report)


NO_GATE_CASES = [
    ("no-user-node-address", {}, {"tensorboardUrl": None}, ["has no TensorBoard URL", "tfk8s:platform.userNode.address"]),
    ("gate-off", {"tensorboardRequiresToken": False}, {}, ["without its token gate", "ask the platform team"]),
    ("not-http", {}, {"tensorboardUrl": "file:///etc/passwd"}, ["is not http(s)://host:port/"]),
]


@pytest.mark.parametrize(("platform", "tenant", "says"), [c[1:] for c in NO_GATE_CASES], ids=[c[0] for c in NO_GATE_CASES])
def test_without_a_gate_to_ask_nothing_is_asked_and_readiness_says_why(
    dev_config: dict[str, Any], platform: dict[str, Any], tenant: dict[str, Any], says: list[str]
) -> None:
    """The local kwok demo's User Node has no address: no URL, so no request of any kind."""
    facts = {**facts_for(stack_config("platform-dev")), **platform}
    gate, api = FakeGate(status_json("dev", mnist=cluster())), Api()
    report = readiness_of(
        dev_config,
        read_whole=api,
        open_gate=gate,
        platform=facts,
        tenant={**tenant_facts_for("tenant-alice", facts), **tenant},
    )
    unknown = report["clusters"]["mnist"]["progress"]["unknown"]
    for words in says:
        assert words in unknown, unknown
    assert gate.asked == [] and SECRET_PATH not in api.read


def test_a_preview_asks_nothing_and_reports_no_progress(dev_config: dict[str, Any]) -> None:
    gate, api = FakeGate(status_json("dev", mnist=cluster())), Api()
    report = readiness_of(dev_config, read_whole=api, open_gate=gate, preview=True)
    assert "progress" not in report["clusters"]["mnist"]
    assert gate.asked == [] and SECRET_PATH not in api.read


def alice_at(url: str) -> TenantFacts:
    return TenantFacts.model_validate({**tenant_facts_for("tenant-alice"), "tensorboardUrl": url}, strict=False)


def timed(read: Callable[[], dict[str, dict[str, Any]]]) -> tuple[dict[str, dict[str, Any]], float]:
    start = time.monotonic()
    found = read()
    return found, time.monotonic() - start


def test_a_silent_or_absent_gate_costs_about_a_second_at_most() -> None:
    """A real socket, urllib's real timeouts: a gate that takes the connection and never answers,
    then nothing listening at all."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the connection; nobody ever answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/"
        found, seconds = timed(lambda: progress.read("dev", ["mnist"], alice_at(url), "dev", Api()))
    assert seconds < 1.5, seconds
    assert "timed out" in found["mnist"]["unknown"] and "readiness waits 0.5 s" in found["mnist"]["unknown"]
    found, seconds = timed(lambda: progress.read("dev", ["mnist"], alice_at(url), "dev", Api()))  # closed now
    assert seconds < 1.5 and found["mnist"]["unknown"].startswith(f"nothing answers at {url.rstrip('/')}")
    assert TOKEN not in json.dumps(found)


def test_unknown_progress_names_every_cluster() -> None:
    assert readiness.unknown_progress(["a", "b"], "why") == {"a": {"unknown": "why"}, "b": {"unknown": "why"}}
