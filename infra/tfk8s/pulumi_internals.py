"""Every use tfk8s's program makes of the Pulumi SDK's internals, in one place.

The rest of the program uses the SDK's public API (`pulumi.Config`, `pulumi.CustomResource`,
`pulumi.Output`, `pulumi.log`, ...) and, for what that API cannot do, the functions below. Each
is a small, typed door onto one internal; tests/unit/test_pulumi_internals.py checks that every
internal is still there, with the names, parameters and protobuf fields used here, so an SDK
upgrade fails in the unit tests instead of at run time. The SDK version they were read against is
`REVIEWED_SDK`: a bump of the pin in pyproject.toml fails that test until this module has been
read again against the new SDK and `REVIEWED_SDK` follows it.

The internals, what each is for, and what public API would replace it:

- **The resource monitor** (`pulumi.runtime.settings.get_monitor`) -> `resource_monitor`. Two
  reads start in threads of their own at the program's first line, while the program imports its
  modules: the provider's warm-up (tfk8s.kube.objects.warm_up_provider) and the read ahead of
  the stack a tenant builds on (tfk8s.stack_kinds.outputs.prefetch). The SDK keeps its settings in
  context variables, which a new thread does not inherit: there it sees the first values ever set
  (the SDK's ContextProperty keeps them as a process-wide default), which for the monitor happens
  to be the engine's and for the project is the placeholder "project". So the monitor is taken
  in the program's thread and handed to the reading thread. Public replacement: none for a
  thread. The SDK's own invokes go through the program's event loop: `pulumi.runtime.invoke`
  blocks the program until the answer, and `invoke_output` only schedules the request on a loop
  that runs after the program's synchronous part (all of tfk8s's) has declared everything: too
  late for a warm-up or a read ahead. pulumi/pulumi#24403 copies the context into the SDK's own
  executor threads, not into a thread a program starts.
- **A raw invoke request** (`pulumi.runtime.proto.resource_pb2.ResourceInvokeRequest` on the
  monitor's `Invoke`) -> `invoke`. The same request `pulumi.runtime.invoke` sends (token, args as
  a `google.protobuf.Struct`, provider version, `acceptResources`), sent synchronously from any
  thread. Public replacement: `pulumi.runtime.invoke` from the program's thread, which blocks the
  program for the engine's answer (the warm-up would then cost what it saves); for another stack's
  outputs, `await pulumi.StackReference(name).get_output_details(key)` inside an async entry point
  (`pulumi.run`, pulumi/pulumi#23945, closing #12172): it also registers a StackReference resource
  in every tenant's state, and the read could no longer overlap the program's imports.
- **Property deserialization** (`pulumi.runtime.rpc.deserialize_properties_unwrap_secrets`), in
  `invoke`: the engine's answer as Python values, secrets unwrapped, as `pulumi.runtime.invoke`
  returns it. Public replacement: none (`google.protobuf.json_format.MessageToDict` is public but
  keeps the engine's secret and resource wrappers: decoding those ourselves would copy the same
  internal wire format).
- **The runtime's config** (`pulumi.runtime.config.CONFIG` and `get_config_env`) -> `all_config`.
  Every key the stack sets, so the stack file is validated whole, typos in key names included
  (tfk8s.stack_kinds.config). Public replacement: none; `pulumi.Config` reads a key the program names
  and cannot list the keys that are set.
- **Raw config reads** (`pulumi.runtime.get_config`, `pulumi.runtime.is_config_secret`) ->
  `raw_config`, `is_config_secret`. Exported by `pulumi.runtime`, whose config module says "Please
  use pulumi.Config instead": runtime support, not the program's API, so they come through here
  too. `raw_config` reads a value without `pulumi.Config.get`'s warning for a secret (the
  kubeconfig's presence, the stack a tenant builds on before validation); `is_config_secret` tells
  a secret set in plain text from one set with `--secret`, which tfk8s refuses (tfk8s.stack_kinds.config
  .parse_secret). Public replacements: `pulumi.Config(namespace).get(key)` where the warning does
  not matter; for `is_config_secret` none (`Config.get_secret` answers an Output, after the program
  has run; pulumi/pulumi#13063 found `is_config_secret` undocumented, and blind to `--path` keys).
- **Whether this run is a preview** (`pulumi.runtime.is_dry_run`) -> `is_preview`. An experiment's
  readiness asks its tenant's TensorBoard gate for progress during an `up` alone, never in a
  preview (tfk8s.stack_kinds.progress). Exported by `pulumi.runtime` and what Pulumi's docs show for
  this, but runtime support like the config reads above, so it comes through here too. Public
  replacement: none outside `pulumi.runtime`.
- **The component provider's construct** (`pulumi.provider.experimental.component
  .ComponentProvider`, `pulumi.provider.server.ComponentInitError`) -> `component_provider`. The
  SDK's host of components (`component_provider_host`) wraps whatever a component's constructor
  raises in a ComponentInitError and reports it as a bug: "Unexpected <class 'Exception'>", the
  message, then the provider's traceback. The package's refusals are the user's to fix, not bugs
  (tfk8s.component_package.provider): the provider here hands each to `refused`, whose answer (the SDK's
  public `pulumi.InputPropertiesError`, which the engine shows as the message and a line per
  property) is raised instead. Public replacement: none; `component_provider_host` takes no
  provider and no error handler.

Not here: the language host's runner (hack/langhost/run_program.py) uses internals too
(`Settings`, `configure`, `run_in_stack`, `set_all_config`, the engine's gRPC stub). It is the
counterpart of the SDK's own program launcher, not part of the program: it sets up the SDK before
the program's package is on `sys.path`, and the official language host starts the same program
without it. Its internals are the host's business, checked by the same test so an SDK bump tells
it too.

Light on purpose: imported before the program's own modules (tfk8s.entry), so only `pulumi` and
`google.protobuf`, both already loaded by `import pulumi`; the component provider's modules are
imported by `component_provider`, which the package's provider alone calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from google.protobuf import struct_pb2
from pulumi.runtime import config as runtime_config
from pulumi.runtime import rpc
from pulumi.runtime import settings as runtime_settings
from pulumi.runtime.proto import resource_pb2

# The SDK these internals were last read against (the pin in pyproject.toml): see the docstring.
REVIEWED_SDK = "3.259.0"


class ResourceMonitor(Protocol):
    """The engine's resource monitor, as `invoke` uses it: a gRPC stub, or the SDK's MockMonitor in tests."""

    def Invoke(self, request: Any) -> Any: ...  # noqa: N802 -- the gRPC method's name


def resource_monitor() -> ResourceMonitor | None:
    """The engine's monitor for this thread's context (None outside a Pulumi run, and in a thread
    the program started: take it in the program's thread and pass it on)."""
    return runtime_settings.get_monitor()


def invoke(monitor: ResourceMonitor, token: str, args: Mapping[str, Any], *, version: str | None = None) -> dict[str, Any]:
    """The function `token` of a provider (or the engine's builtins), called now, from any thread:
    its result as `pulumi.runtime.invoke` returns it (Python values, secrets unwrapped). `version`:
    the provider's, which selects the engine's default provider of that version. Raises
    RuntimeError with the provider's reason when it reports a failure, and the gRPC error when the
    call itself fails."""
    body = struct_pb2.Struct()
    body.update(dict(args))
    request = resource_pb2.ResourceInvokeRequest(tok=token, args=body, version=version or "", acceptResources=True)
    response = monitor.Invoke(request)
    if response.failures:
        raise RuntimeError(f"invoke of {token} failed: {response.failures[0].reason}")
    value, _ = rpc.deserialize_properties_unwrap_secrets(getattr(response, "return"))
    return dict(value or {})


def all_config() -> dict[str, Any]:
    """Every config key the running stack sets (`namespace:key` -> the value as the engine passed
    it, objects as JSON text), secrets included: the caller decides what it reads of them."""
    return runtime_config.get_config_env() | dict(runtime_config.CONFIG.get())


def raw_config(key: str) -> Any:
    """The value of config key `namespace:key` (None: unset), without `pulumi.Config.get`'s warning
    when it is a secret."""
    return runtime_config.get_config(key)


def is_config_secret(key: str) -> bool:
    """Whether config key `namespace:key` was set as a secret (`pulumi config set --secret`)."""
    return runtime_config.is_config_secret(key)


def is_preview() -> bool:
    """Whether this run is a preview (`pulumi preview`, or the one before an `up`), not an update."""
    return runtime_settings.is_dry_run()


def component_provider(
    components: Sequence[type[Any]], *, name: str, version: str, refused: Callable[[Exception], Exception | None]
) -> Any:
    """The provider `component_provider_host` serves `components` with (a
    `pulumi.provider.Provider`, for `pulumi.provider.main`), except that what a component's
    constructor raises goes to `refused` first: the error to raise in its place, or None to let the
    SDK report it as it would (a bug, with its traceback)."""
    from pulumi.provider.experimental.component import ComponentProvider
    from pulumi.provider.server import ComponentInitError

    class Refusing(ComponentProvider):  # type: ignore[misc]
        def construct(self, name: str, resource_type: str, inputs: Any, options: Any = None) -> Any:
            try:
                return super().construct(name, resource_type, inputs, options)
            except ComponentInitError as error:
                instead = refused(error.inner)
                if instead is None:
                    raise
                raise instead from None

    return Refusing(list(components), name, None, version)
