"""The Pulumi SDK's internals tfk8s relies on are still there, and still behave as relied on.

tfk8s.pulumi_internals is the program's one door onto them; hack/langhost/run_program.py (the
language host's runner) uses a few of its own. Private APIs change without notice or deprecation,
so an SDK upgrade must fail here, naming what moved, and not at a user's `pulumi up`:
- the pin in pyproject.toml, the installed SDK and `REVIEWED_SDK` are one version, so a bump
  fails until the adapter has been read against the new SDK;
- each internal accepts the call made of it (`inspect.signature(...).bind`), and each protobuf
  message has the fields, types and RPC method used;
- and each does what the adapter expects of it, on the engine's wire format.
And no other module of the program reaches them (`pulumi.runtime`, protobuf): one door stays one.
"""

from __future__ import annotations

import ast
import contextvars
import importlib.metadata
import importlib.util
import inspect
import re
import threading
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest
from google.protobuf import struct_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from tfk8s import pulumi_internals
from tfk8s.pulumi_internals import REVIEWED_SDK

ROOT = Path(__file__).resolve().parents[2]
SDK = "pulumi"

# The engine's markers of a secret value on the wire (sdk/go/common/resource/sig in pulumi/pulumi).
SIG_KEY, SECRET_SIG = "4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270"


def pinned_sdk() -> str:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [found.group(1) for found in (re.fullmatch(rf"{SDK}==(\S+)", d) for d in dependencies) if found]
    return pin


# The SDK's internal modules: only tfk8s.pulumi_internals may touch them.
INTERNAL = re.compile(r"pulumi\.runtime(\.|$)|google\.protobuf(\.|$)|pulumi\.provider\.(server|experimental\.component)(\.|$)")
ADAPTER = ROOT / "infra" / "tfk8s" / "pulumi_internals.py"


def _internal_uses(path: Path) -> list[str]:
    """`pulumi.runtime...` (imported, or reached as an attribute of `pulumi`) and protobuf, by line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "pulumi":
            names = [f"pulumi.{node.attr}"]
        else:
            continue
        found += [f"{path.relative_to(ROOT)}:{node.lineno}: {name}" for name in names if INTERNAL.match(name)][:1]
    return found


def test_only_the_adapter_touches_the_sdks_internals() -> None:
    program = sorted((ROOT / "infra").rglob("*.py"))
    assert ADAPTER in program
    uses = [use for path in program if path != ADAPTER for use in _internal_uses(path)]
    assert uses == [], "call tfk8s.pulumi_internals (and say there why and what would replace it) instead of"


def test_the_pinned_sdk_is_the_one_the_internals_were_read_against() -> None:
    pin, installed = pinned_sdk(), importlib.metadata.version(SDK)
    assert installed == pin, f"the virtualenv has {SDK} {installed}, pyproject.toml pins {pin}: reinstall (`make venv`)"
    assert pin == REVIEWED_SDK, (
        f"{SDK} is now pinned at {pin}; tfk8s.pulumi_internals was read against {REVIEWED_SDK}. Read each internal its "
        "docstring lists (and hack/langhost/run_program.py's) in the new SDK, run these tests, then set REVIEWED_SDK"
    )


def _sdk(dotted: str) -> Any:
    """`pulumi.runtime.config.CONFIG` -> the object, imported the way the adapter imports it."""
    module, _, name = dotted.rpartition(".")
    return getattr(__import__(module, fromlist=[name]), name)


# (internal, the call made of it: positional args, keyword args) -- its users in the comment.
CALLS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    # tfk8s.pulumi_internals
    ("pulumi.runtime.settings.get_monitor", (), {}),
    ("pulumi.runtime.rpc.deserialize_properties_unwrap_secrets", (struct_pb2.Struct(),), {}),
    ("pulumi.runtime.config.get_config_env", (), {}),
    ("pulumi.runtime.config.get_config", ("tfk8s:kind",), {}),
    ("pulumi.runtime.config.is_config_secret", ("tfk8s:kind",), {}),
    ("pulumi.runtime.settings.is_dry_run", (), {}),
    # hack/langhost/run_program.py
    (
        "pulumi.runtime.Settings",
        (),
        {
            "project": "p",
            "stack": "s",
            "monitor": object(),
            "engine": object(),
            "parallel": 4,
            "dry_run": True,
            "organization": "o",
            "root_directory": "/r",
        },
    ),
    ("pulumi.runtime.configure", (object(),), {}),
    ("pulumi.runtime.set_all_config", ({}, []), {}),
    ("pulumi.runtime.run_in_stack", (lambda: None,), {}),
    ("pulumi.runtime.proto.engine_pb2_grpc.EngineStub", (object(),), {}),
]


@pytest.mark.parametrize(("internal", "args", "kwargs"), CALLS, ids=[c[0] for c in CALLS])
def test_each_internal_accepts_the_call_made_of_it(internal: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    found = _sdk(internal)
    assert callable(found), f"{internal} is no longer callable"
    try:
        inspect.signature(found).bind(*args, **kwargs)
    except TypeError as error:
        pytest.fail(f"{internal}{inspect.signature(found)} no longer accepts the call tfk8s makes: {error}")


def test_the_runtime_config_is_a_context_variable_holding_a_dict() -> None:
    config = _sdk("pulumi.runtime.config.CONFIG")
    assert isinstance(config, contextvars.ContextVar) and isinstance(config.get(), dict)


def _fields(message: Descriptor) -> dict[str, tuple[int, bool, str | None]]:
    return {f.name: (f.type, f.is_repeated, f.message_type.full_name if f.message_type else None) for f in message.fields}


ONE, MANY = False, True  # repeated or not
STRING, BOOL, MESSAGE = FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BOOL, FieldDescriptor.TYPE_MESSAGE
STRUCT = "google.protobuf.Struct"

# (module, message, the fields read or written: name -> (type, repeated, message type)).
MESSAGES = [
    (
        "resource_pb2",
        "ResourceInvokeRequest",
        {
            "tok": (STRING, ONE, None),
            "args": (MESSAGE, ONE, STRUCT),
            "version": (STRING, ONE, None),
            "acceptResources": (BOOL, ONE, None),
        },
    ),
    (
        "resource_pb2",
        "ResourceInvokeResponse",
        {"return": (MESSAGE, ONE, STRUCT), "failures": (MESSAGE, MANY, "pulumirpc.CheckFailure")},
    ),
    ("provider_pb2", "CheckFailure", {"reason": (STRING, ONE, None)}),
    ("engine_pb2", "LogRequest", {"severity": (FieldDescriptor.TYPE_ENUM, ONE, None)}),
]


@pytest.mark.parametrize(("module", "message", "used"), MESSAGES, ids=[m[1] for m in MESSAGES])
def test_each_protobuf_message_has_the_fields_used(module: str, message: str, used: dict[str, Any]) -> None:
    fields = _fields(_sdk(f"pulumi.runtime.proto.{module}.{message}").DESCRIPTOR)
    assert {name: fields.get(name) for name in used} == used


# (module, service, method, request, response): the RPCs called on the stubs.
METHODS = [
    ("resource_pb2", "ResourceMonitor", "Invoke", "pulumirpc.ResourceInvokeRequest", "pulumirpc.ResourceInvokeResponse"),
    ("engine_pb2", "Engine", "Log", "pulumirpc.LogRequest", "google.protobuf.Empty"),
]


@pytest.mark.parametrize(("module", "service", "method", "request_type", "response_type"), METHODS, ids=[m[2] for m in METHODS])
def test_each_rpc_takes_and_answers_the_messages_used(
    module: str, service: str, method: str, request_type: str, response_type: str
) -> None:
    found = _sdk(f"pulumi.runtime.proto.{module}.DESCRIPTOR").services_by_name[service].methods_by_name[method]
    assert (found.input_type.full_name, found.output_type.full_name) == (request_type, response_type)


class Monitor:
    """A resource monitor answering every invoke with `answer` (a Struct) or `failure`, recording requests."""

    def __init__(self, answer: dict[str, Any] | None = None, failure: str | None = None) -> None:
        from pulumi.runtime.proto import provider_pb2, resource_pb2

        self.requests: list[Any] = []
        body = struct_pb2.Struct()
        body.update(answer or {})
        failures = [provider_pb2.CheckFailure(property="name", reason=failure)] if failure else []
        self.response = resource_pb2.ResourceInvokeResponse(failures=failures, **{"return": body})

    def Invoke(self, request: Any) -> Any:  # noqa: N802 -- the gRPC method's name
        self.requests.append(request)
        return self.response


def test_an_invoke_sends_the_sdks_request_and_answers_python_values_with_secrets_unwrapped() -> None:
    monitor = Monitor({"outputs": {"platform": {"x": 1.0}, "key": {SIG_KEY: SECRET_SIG, "value": "s3cret"}}})
    got = pulumi_internals.invoke(monitor, "pulumi:pulumi:readStackOutputs", {"name": "o/p/s"}, version="4.25.0")
    assert got == {"outputs": {"platform": {"x": 1.0}, "key": "s3cret"}}
    (request,) = monitor.requests
    assert (request.tok, dict(request.args), request.version, request.acceptResources) == (
        "pulumi:pulumi:readStackOutputs",
        {"name": "o/p/s"},
        "4.25.0",
        True,
    )


def test_an_invoke_the_provider_refuses_raises_its_reason() -> None:
    with pytest.raises(RuntimeError, match="invoke of kubernetes:yaml:decode failed: no such stack"):
        pulumi_internals.invoke(Monitor(failure="no such stack"), "kubernetes:yaml:decode", {})


def _in_thread(read: Callable[[], Any]) -> Any:
    found: list[Any] = []
    thread = threading.Thread(target=lambda: found.append(read()))
    thread.start()
    thread.join(10)
    return found[0]


def test_the_monitor_is_the_programs_in_its_own_thread_and_not_in_a_thread_it_starts() -> None:
    """Why the warm-up and the read ahead take the monitor before starting their threads: a new
    thread does not see the program's settings (in 3.259 it sees the first ones ever set, which the
    SDK's ContextProperty keeps as a process-wide default). Should this fail because the thread now
    sees them, the SDK passes its settings on to threads and the hand-over could go."""
    first, current = Monitor(), Monitor()

    def program() -> None:  # in a context of its own: configure() sets the SDK's settings there alone
        pulumi.runtime.configure(pulumi.runtime.Settings(project="first", stack="s", monitor=first))
        pulumi.runtime.configure(pulumi.runtime.Settings(project="tfk8s", stack="s", monitor=current))
        assert pulumi_internals.resource_monitor() is current and pulumi.get_project() == "tfk8s"
        assert _in_thread(pulumi_internals.resource_monitor) is not current
        assert _in_thread(pulumi.get_project) != "tfk8s"

    contextvars.Context().run(program)


def test_all_config_is_the_engines_environment_overlaid_with_what_was_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULUMI_CONFIG", '{"tfk8s:kind": "tenant", "tfk8s:gpus": "1"}')
    pulumi.runtime.set_all_config({"tfk8s:kind": "platform", "tfk8s:jupyterToken": "t" * 16}, ["tfk8s:jupyterToken"])
    try:
        assert pulumi_internals.all_config() == {"tfk8s:kind": "platform", "tfk8s:gpus": "1", "tfk8s:jupyterToken": "t" * 16}
        assert pulumi_internals.raw_config("tfk8s:gpus") == "1" and pulumi_internals.raw_config("tfk8s:nope") is None
        assert pulumi_internals.is_config_secret("tfk8s:jupyterToken")
        assert not pulumi_internals.is_config_secret("tfk8s:kind")
    finally:
        pulumi.runtime.set_all_config({}, [])


class Engine:
    """The engine's gRPC stub, recording each Log request and the thread that sent it."""

    def __init__(self) -> None:
        self.logs: list[tuple[int, str, str]] = []

    def Log(self, request: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N802 -- the gRPC method's name
        self.logs.append((request.severity, request.message, threading.current_thread().name))


def test_the_runners_engine_client_receives_the_sdks_logs() -> None:
    """run_program.BackgroundDebugLogs stands in for the SDK's engine stub: the SDK must still log
    through `engine.Log(LogRequest)`, debug messages with severity `engine_pb2.DEBUG`."""
    from pulumi.runtime.proto import engine_pb2

    spec = importlib.util.spec_from_file_location("run_program", ROOT / "hack" / "langhost" / "run_program.py")
    assert spec is not None and spec.loader is not None
    run_program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_program)
    engine = Engine()
    client = run_program.BackgroundDebugLogs(engine)

    def log() -> None:  # in a context of its own: configure() sets the SDK's settings there alone
        pulumi.runtime.configure(pulumi.runtime.Settings(project="p", stack="s", engine=client))
        pulumi.log.debug("step")
        pulumi.log.info("told")

    contextvars.Context().run(log)
    assert client.drain(10)
    assert sorted(engine.logs) == [(engine_pb2.DEBUG, "step", "debug-logs"), (engine_pb2.INFO, "told", "MainThread")]


def test_a_component_constructors_error_goes_to_refused_and_what_it_answers_is_raised_instead() -> None:
    """The SDK's ComponentProvider still wraps a constructor's error in a ComponentInitError (its
    `inner`), which `component_provider` hands to `refused`; None lets the SDK's error through."""
    from pulumi.provider.server import ComponentInitError
    from refusing_component import Refusing

    seen: list[Exception] = []

    def refused(error: Exception) -> Exception | None:
        seen.append(error)
        return RuntimeError(f"instead: {error}") if isinstance(error, ValueError) else None

    provider = pulumi_internals.component_provider([Refusing], name="check", version="0.0.1", refused=refused)
    with pytest.raises(RuntimeError, match=r"^instead: one: refused$") as raised:
        provider.construct(name="one", resource_type="check:index:Refusing", inputs={"reason": "value"}, options=None)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    with pytest.raises(ComponentInitError) as bug:
        provider.construct(name="two", resource_type="check:index:Refusing", inputs={"reason": "key"}, options=None)
    assert isinstance(bug.value.inner, KeyError)
    assert [type(error) for error in seen] == [ValueError, KeyError]
