"""`tfk8s status` and `tfk8s logs` (tfk8s.cli) with stand-ins for pulumi, the API server and the
gate: what the user reads (a progress bar per cluster, refreshed in place), how the command finds
the gate and the token from what she has (her stack's outputs, her kubeconfig), and errors that name
what is missing and the fix, never the token. Against a real gate: tests/training/test_gate_routes.py."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from fake_gate import FakeGate, cluster, status_json
from mocked_program import facts_for, stack_config, tenant_facts_for, with_contract
from tfk8s import tenant_gate
from tfk8s.cli import gate_client, render
from tfk8s.cli import main as cli
from tfk8s.cli.discovery import Discovery, DiscoveryError, pulumi_runner
from tfk8s.kube.api_error import KubeApiError
from tfk8s.kube.api_paths import SECRET

TOKEN = "the-token-of-alice"
URL = "http://192.0.2.10:30002"
SECRET_PATH = SECRET.path("tfk8s-jupyter-token", "tfk8s-alice")
OUTPUTS = {"experiment": "mnist-exp", "ready": True, "readiness": {"tensorboard": f"{URL}/", "clusters": {}}}


class FakeApi:
    def __init__(self, answers: dict[str, Any] | Callable[[str], Any]) -> None:
        self.answers, self.asked = answers, []  # type: ignore[var-annotated]

    def get(self, path: str, *, metadata_only: bool = False) -> dict[str, Any] | None:
        self.asked.append(path)
        answer = self.answers(path) if callable(self.answers) else self.answers.get(path)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"status": {"userInfo": {"username": "carol", "groups": ["tfk8s-users"]}}}


def token_secret(token: str = TOKEN) -> dict[str, Any]:
    return {"data": {"token": base64.b64encode(token.encode()).decode()}}


def pulumi_of(outputs: dict[str, Any] | None = OUTPUTS, namespace: str = "tfk8s-alice") -> Callable[[Path], Any]:
    """A `pulumi` that knows stack `dev` alone: its outputs and its `tfk8s:namespace`."""
    calls: list[Sequence[str]] = []

    def run(args: Sequence[str]) -> tuple[int, str, str]:
        calls.append(list(args))
        if list(args[-2:]) != ["--stack", "dev"]:
            return 255, "", f"error: no stack named '{args[-1]}' found"
        if list(args[:2]) == ["stack", "output"] and outputs is not None:
            return 0, json.dumps(outputs), ""
        if list(args[:3]) == ["config", "get", "tfk8s:namespace"]:
            return 0, namespace + "\n", ""
        return 255, "", "error: something else"

    factory = lambda cwd: run  # noqa: E731
    factory.calls = calls  # type: ignore[attr-defined]
    return factory


def world(gate: FakeGate, api: FakeApi | None = None, *, environ: dict[str, str] | None = None, **kw: Any) -> cli.World:
    return cli.World(
        environ=environ or {},
        out=io.StringIO(),
        err=io.StringIO(),
        run=kw.pop("run", pulumi_of()),
        connect=lambda environ: api or FakeApi({SECRET_PATH: token_secret()}),
        open_url=gate,
        sleep=kw.pop("sleep", lambda seconds: None),
        terminal=kw.pop("terminal", False),
    )


def said(w: cli.World) -> tuple[str, str]:
    return w.out.getvalue(), w.err.getvalue()  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "fraction, drawn",
    [
        (0.0, "[" + "-" * 30 + "]"),
        (0.4, "[" + "#" * 12 + "-" * 18 + "]"),
        (1.0, "[" + "#" * 30 + "]"),
        (None, "[" + " " * 14 + "?" + " " * 15 + "]"),
    ],
    ids=["none-yet", "forty-percent", "done", "no-target"],
)
def test_the_progress_bar_fills_with_the_fraction_of_the_target(fraction: float | None, drawn: str) -> None:
    assert render.bar(fraction) == drawn


@pytest.mark.parametrize(
    "seconds, text", [(None, "-"), (42.4, "42s"), (371, "6m11s"), (7500, "2h05m"), (3 * 86400 + 4 * 3600, "3d04h")]
)
def test_durations_read_like_a_clock(seconds: float | None, text: str) -> None:
    assert render.duration(seconds) == text


def test_a_running_cluster_shows_its_bar_figures_eta_and_tasks() -> None:
    found = status_json(mnist=cluster())["experiments"]["mnist-exp"]
    lines = render.render("mnist-exp", {**found, "now": 1000.0})
    assert lines[0] == "mnist-exp/mnist  [############------------------]  40%  120/300  4.20 steps/s  ETA 43s  running"
    assert lines[1] == "  run 6f1c2d  512 examples/s  loss 0.310  first step after 12s  checkpoint at step 100 (30s ago)"
    assert lines[2].split() == ["worker-0", "running", "step", "120", "starts", "1", "updated", "2s", "ago"]
    assert lines[3].split() == ["ps-0", "running", "step", "-", "starts", "2", "updated", "3s", "ago"]


def test_unknowns_show_as_such_and_a_stale_or_failed_cluster_says_so() -> None:
    unknown = cluster(step=None, target_steps=None, fraction=None, steps_per_second=None, eta_seconds=None, tasks=[])
    lines = render.render("e", {"clusters": {"c": unknown}, "now": 1000.0})
    assert lines[0] == f"e/c  {render.bar(None)}    -  -/?  - steps/s  ETA -  running"
    stale = render.render("e", {"clusters": {"c": cluster(stale=True, updated_at=700.0)}, "now": 1000.0}, tasks=False)
    assert stale[0].endswith("running (no update for 5m00s)") and len(stale) == 2
    failed = cluster(state="failed", tasks=[{"task": "worker-1", "state": "failed", "step": 3, "starts": 2, "exit_code": 1}])
    lines = render.render("e", {"clusters": {"c": failed}, "now": 1000.0})
    assert lines[0].endswith("failed") and "exit code 1" in lines[2]
    assert render.render("e", None) == ["e: no run on the log volume yet (its tasks write progress once they start)"]


def test_a_restarted_task_says_where_it_resumed_and_what_its_restart_cost() -> None:
    resumed = {"after_step": 1218, "at_step": 1205, "steps_lost": 13, "seconds": 31.2}
    tasks = [
        {"task": "worker-0", "state": "running", "step": 1230, "starts": 2, "resumed": resumed},
        {"task": "worker-1", "state": "running", "step": 1230, "starts": 2, "resumed": {**resumed, "at_step": None}},
        {"task": "ps-0", "state": "running", "step": None, "starts": 1, "resumed": None},
    ]
    lines = render.render("e", {"clusters": {"c": cluster(tasks=tasks)}, "now": 1000.0})
    assert "starts 2  resumed at step 1205 after 1218 (13 lost, 31s out)" in lines[2], lines
    assert "restarted after step 1218, not training yet" in lines[3], lines
    assert "resumed" not in lines[4] and "restarted" not in lines[4], lines


def test_the_gate_and_token_come_from_the_stacks_outputs_and_the_tenants_secret() -> None:
    api = FakeApi({SECRET_PATH: token_secret()})
    run = pulumi_of()
    found = Discovery("dev", environ={}, run=run(Path(".")), connect=lambda: api).gate()
    assert (found.url, found.experiment, found.token) == (URL, "mnist-exp", TOKEN)
    assert TOKEN not in repr(found)
    assert api.asked == [SECRET_PATH]
    assert run.calls == [["stack", "output", "--json", "--stack", "dev"], ["config", "get", "tfk8s:namespace", "--stack", "dev"]]  # type: ignore[attr-defined]


def test_flags_and_the_environment_come_first() -> None:
    api = FakeApi({})
    environ = {"TFK8S_TOKEN": "from-env", "TFK8S_TENSORBOARD_URL": "http://elsewhere:1/"}
    found = Discovery("dev", environ=environ, run=pulumi_of()(Path(".")), connect=lambda: api).gate()
    assert (found.url, found.token, found.experiment) == ("http://elsewhere:1", "from-env", "mnist-exp")
    assert not api.asked
    # Without a stack to ask, the experiment is the stack's name.
    found = Discovery("other", environ=environ, run=pulumi_of()(Path(".")), connect=lambda: api, url="http://flag:2").gate()
    assert (found.url, found.experiment) == ("http://flag:2", "other")
    namespaced = Discovery("dev", environ={}, run=pulumi_of()(Path(".")), connect=lambda: FakeApi({}), namespace="tfk8s-bob")
    assert namespaced.namespace() == "tfk8s-bob"


def test_without_a_url_in_the_outputs_the_tenant_contract_gives_it() -> None:
    contract = with_contract("tfk8s-alice", tenant_facts_for("tenant-alice"), facts_for(stack_config("platform-dev")), None)
    api = FakeApi(lambda path: token_secret() if path == SECRET_PATH else contract(path))
    outputs = {**OUTPUTS, "readiness": {"tensorboard": None}}
    found = Discovery("dev", environ={}, run=pulumi_of(outputs)(Path(".")), connect=lambda: api).gate()
    assert found.url == tenant_facts_for("tenant-alice")["tensorboardUrl"].rstrip("/")


@pytest.mark.parametrize(
    "stack, environ, api, says",
    [
        (
            "gone",
            {},
            FakeApi({}),
            ["`pulumi stack output --json --stack gone` failed: error: no stack named 'gone' found", "TFK8S_TOKEN"],
        ),
        (
            "dev",
            {},
            FakeApi({SECRET_PATH: None}),
            ["no Secret tfk8s-jupyter-token in namespace 'tfk8s-alice'", "`pulumi up` the tenant stack"],
        ),
        (
            "dev",
            {},
            FakeApi({SECRET_PATH: KubeApiError("forbidden", 403)}),
            ["user 'carol' (groups tfk8s-users) may not read the token", "set TFK8S_TOKEN"],
        ),
        ("dev", {}, FakeApi({SECRET_PATH: {"data": {}}}), ["holds no `token`"]),
        ("dev", {"TFK8S_TOKEN": TOKEN, "TFK8S_TENSORBOARD_URL": "ftp://x/"}, FakeApi({}), ["must be http(s)://host:port/"]),
    ],
    ids=["no-stack", "no-secret", "not-allowed", "empty-secret", "not-http"],
)
def test_what_cannot_be_found_is_named_with_its_fix(stack: str, environ: dict[str, str], api: FakeApi, says: list[str]) -> None:
    w = world(FakeGate(status_json()), api, environ=environ)
    assert cli.main(["status", "--stack", stack], w) == 2
    out, err = said(w)
    assert out == "" and err.startswith("tfk8s: ") and "Traceback" not in err
    for words in says:
        assert words in err, err


def test_a_missing_pulumi_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(DiscoveryError, match="`pulumi` is not on PATH; .*TFK8S_TOKEN"):
        pulumi_runner(tmp_path)(["stack", "output"])


@pytest.mark.parametrize(
    "answer, says",
    [
        ((401, b"tfk8s: TensorBoard needs the tenant's token"), "refused the token (401)"),
        ((404, b"<html>Not found</html>"), "answers, but not /tfk8s/: its gate predates"),
        ((429, b"tfk8s: too many wrong tokens from 10.0.0.1 (--max-failures): retry in 30 s\n"), "too many wrong tokens"),
        ((502, b""), "answered HTTP 502"),
        (ConnectionRefusedError(111, "Connection refused"), "nothing answers at http://192.0.2.10:30002"),
    ],
    ids=["wrong-token", "old-gate", "throttled", "bad-gateway", "unreachable"],
)
def test_what_the_gate_answers_is_told_plainly_and_never_with_the_token(answer: Any, says: str) -> None:
    w = world(FakeGate(answer))
    assert cli.main(["status", "--stack", "dev"], w) == 2
    out, err = said(w)
    assert says in err and TOKEN not in out + err, err


def test_status_asks_the_gate_with_the_token_in_a_header_never_in_the_address() -> None:
    gate = FakeGate(status_json(mnist=cluster()))
    w = world(gate)
    assert cli.main(["status", "--stack", "dev"], w) == 0
    (request,) = gate.asked
    assert request.full_url == f"{URL}/tfk8s/status?experiment=mnist-exp"
    assert request.get_header("Authorization") == f"token {TOKEN}" and TOKEN not in request.full_url
    out, _ = said(w)
    assert out.startswith("mnist-exp/mnist  [############---") and "worker-0" in out


def test_no_run_yet_is_said_and_watched_for() -> None:
    finished = cluster(state="succeeded", finished=True, step=300, fraction=1.0, eta_seconds=0.0)
    gate = FakeGate((404, b"tfk8s: no experiment 'mnist-exp' on the log volume"), status_json(mnist=finished))
    w = world(gate)
    assert cli.main(["status", "--stack", "dev", "--watch"], w) == 0
    out, _ = said(w)
    assert out.startswith("mnist-exp: no run on the log volume yet") and "100%" in out


def test_watch_redraws_in_place_until_every_cluster_finished() -> None:
    running = status_json(mnist=cluster(), cifar=cluster(step=10, fraction=10 / 300))
    one_done = status_json(mnist=cluster(state="succeeded", finished=True, step=300, fraction=1.0), cifar=cluster(step=200))
    failed = status_json(mnist=cluster(state="succeeded", finished=True), cifar=cluster(state="failed", finished=True))
    slept: list[float] = []
    w = world(FakeGate(running, one_done, failed), sleep=slept.append, terminal=True)
    assert cli.main(["status", "--stack", "dev", "--watch", "--interval", "0.5", "--no-tasks"], w) == 1  # a cluster failed
    out, _ = said(w)
    assert slept == [0.5, 0.5]
    # Each refresh moves up over the lines drawn before (2 clusters of 2 lines) and clears below.
    assert out.count("\x1b[4F\x1b[J") == 2 and out.index("mnist-exp/cifar") < out.index("\x1b[4F")


def test_watch_in_a_pipe_prints_one_block_per_refresh_and_json_one_line_each() -> None:
    done = status_json(mnist=cluster(state="succeeded", finished=True))
    w = world(FakeGate(status_json(mnist=cluster()), done))
    assert cli.main(["status", "--stack", "dev", "--watch"], w) == 0
    out, _ = said(w)
    assert "\x1b" not in out and out.count("mnist-exp/mnist") == 2 and "\n\n" in out
    w = world(FakeGate(status_json(mnist=cluster()), done))
    assert cli.main(["status", "--stack", "dev", "--watch", "--json"], w) == 0
    lines = said(w)[0].splitlines()
    assert [json.loads(line)["clusters"]["mnist"]["state"] for line in lines] == ["running", "succeeded"]


def test_logs_stream_the_tasks_log_and_name_the_run() -> None:
    gate = FakeGate(b"line 1\nline 2\n\xe2\x9c\x93 done\n", headers={"X-Tfk8s-Run": "6f1c2d"})
    w = world(gate)
    argv = ["logs", "--stack", "dev", "--cluster", "mnist", "--task", "worker-0", "--tail", "3", "--run", "6f1c2d"]
    assert cli.main(argv, w) == 0
    out, err = said(w)
    assert out == "line 1\nline 2\n\u2713 done\n" and err == "tfk8s: mnist-exp/mnist worker-0, run 6f1c2d\n"
    (request,) = gate.asked
    assert request.full_url == f"{URL}/tfk8s/logs/mnist-exp/mnist/worker-0?run=6f1c2d&tail=3"
    w = world(FakeGate((404, b"tfk8s: no log of worker-9 in run 6f1c2d of mnist-exp/mnist; tasks with logs: ps-0\n")))
    assert cli.main(["logs", "--stack", "dev", "--cluster", "mnist", "--task", "worker-9"], w) == 2
    assert said(w)[1] == "tfk8s: no log of worker-9 in run 6f1c2d of mnist-exp/mnist; tasks with logs: ps-0\n"
    w = world(FakeGate(b""))
    assert cli.main(["logs", "--stack", "dev", "--cluster", "mnist", "--task", "worker-0", "--tail", "0"], w) == 2
    assert "--tail 0: must be at least 1 line" in said(w)[1]


def test_a_redirect_is_refused_and_never_followed_with_the_token() -> None:
    """Two loopback servers: the gate's address answers 302 to another, which records what reaches it.
    The real opener (tfk8s.tenant_gate.opener) stops at the redirect: the token goes nowhere else."""
    import http.server
    import threading

    reached: list[str | None] = []

    class Elsewhere(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            reached.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    elsewhere = http.server.HTTPServer(("127.0.0.1", 0), Elsewhere)

    class Redirecting(Elsewhere):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{elsewhere.server_address[1]}/collect")
            self.end_headers()

    gate_server = http.server.HTTPServer(("127.0.0.1", 0), Redirecting)
    for server in (elsewhere, gate_server):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        gate = tenant_gate.Gate(url=f"http://127.0.0.1:{gate_server.server_address[1]}", token=TOKEN, experiment="mnist-exp")
        with pytest.raises(tenant_gate.GateError, match=r"answered with a redirect \(302\); tfk8s does not follow one") as caught:
            tenant_gate.status(gate, gate_client.CALLER)
        assert reached == [] and TOKEN not in str(caught.value)
    finally:
        for server in (elsewhere, gate_server):
            server.shutdown()
