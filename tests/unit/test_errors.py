"""tfk8s's errors are one family under one root (tfk8s.errors.Tfk8sError), worded by one formatter,
Pulumi-free, and shown by Pulumi as their message alone where they reach the SDK (tfk8s.pulumi_errors)."""

from __future__ import annotations

import ast
import builtins
import importlib
import pkgutil
from pathlib import Path

import pulumi
import pytest
from tfk8s import errors
from tfk8s.pulumi_errors import Shown, shown_by_pulumi, shown_when_raised

INFRA = Path(__file__).resolve().parents[2] / "infra"
SOURCES = sorted(p for p in INFRA.rglob("*.py") if p != INFRA / "tfk8s" / "errors.py")
# Built-in exceptions a class of tfk8s's own might derive from instead of the root.
BUILT_IN = {name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)}


def own_errors() -> list[type[BaseException]]:
    """Every exception class the program's and GitOps' modules define."""
    found: list[type[BaseException]] = []
    for root in ("tfk8s", "tfk8s_gitops"):
        package = importlib.import_module(root)
        for module in pkgutil.walk_packages(package.__path__, f"{root}."):
            if module.name.endswith("__main__"):
                continue
            loaded = importlib.import_module(module.name)
            found += [
                value
                for value in vars(loaded).values()
                if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == module.name
            ]
    return found


def test_every_error_tfk8s_defines_is_a_tfk8s_error_and_only_the_adapter_is_pulumis() -> None:
    defined = own_errors()
    assert {e.__name__ for e in defined} >= {
        "KubeApiError",
        "GateError",
        "DiscoveryError",
        "TargetError",
        "GitError",
        "OperatorError",
    }
    assert [e for e in defined if not issubclass(e, errors.Tfk8sError)] == [Shown]
    assert [e for e in defined if issubclass(e, pulumi.RunError)] == [Shown]


def test_a_refusal_of_input_is_not_a_missing_prerequisite() -> None:
    refusals = {errors.ConfigError, errors.OwnershipConflict, errors.UserNodeTaken}
    missing = {errors.ClusterUnreachable, errors.ClusterLacks, errors.StackUnavailable, errors.ContractUnavailable}
    missing |= {errors.AccessDenied, errors.UserNodeTooSmall}
    assert all(issubclass(e, errors.Refusal) and not issubclass(e, errors.MissingPrerequisite) for e in refusals)
    assert all(issubclass(e, errors.MissingPrerequisite) and not issubclass(e, errors.Refusal) for e in missing)
    assert issubclass(errors.ConfigError, ValueError)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(INFRA)))
def test_no_other_module_defines_a_root_or_words_a_refusal_itself(path: Path) -> None:
    tree = ast.parse(path.read_text())
    bases = [ast.unparse(base) for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for base in node.bases]
    if path != INFRA / "tfk8s" / "pulumi_errors.py":
        assert not [b for b in bases if b.endswith("RunError")], "raise a tfk8s.errors error; tfk8s.pulumi_errors shows it"
    assert not [b for b in bases if b in BUILT_IN], "derive it from tfk8s.errors.Tfk8sError (or Refusal, MissingPrerequisite)"
    texts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert not [t for t in texts if errors.NOTHING_CHANGED in t and "Refused" not in t], "word it with tfk8s.errors"


def test_a_tfk8s_error_reaches_pulumi_as_a_run_error_with_its_message_and_a_bug_as_itself() -> None:
    refusal = errors.ConfigError(["tfk8s:x: is required"])
    with pytest.raises(Shown) as raised, shown_by_pulumi():
        raise refusal
    assert isinstance(raised.value, pulumi.RunError) and raised.value.__cause__ is refusal
    assert str(raised.value) == "invalid tfk8s configuration:\n  - tfk8s:x: is required"
    with pytest.raises(KeyError), shown_by_pulumi():
        raise KeyError("a bug keeps its own type (and the SDK shows its traceback)")

    def check(value: int) -> int:
        if value < 0:
            raise errors.UserNodeTaken(f"tfk8s:platform.userNode.name: {value}")
        return value

    shown = shown_when_raised(check)
    assert shown(2) == 2 and shown.__name__ == "check"
    with pytest.raises(Shown, match=r"^tfk8s:platform\.userNode\.name: -1$"):
        shown(-1)


def test_the_formats() -> None:
    assert errors.refusing(["a", "b"]) == "refusing: nothing was changed:\n  - a\n  - b"
    assert errors.refusing(["a"], "to adopt objects tfk8s does not own") == (
        "refusing to adopt objects tfk8s does not own; nothing was changed:\n  - a"
    )
    assert errors.unchanged("tfk8s:namespace: not yours") == "tfk8s:namespace: not yours; nothing was changed"
    assert str(errors.ConfigError(["tfk8s:x: is required"])) == "invalid tfk8s configuration:\n  - tfk8s:x: is required"
    assert str(errors.ClusterLacks(["tfk8s:y: no Kueue"])) == "the cluster lacks what the stack needs:\n  - tfk8s:y: no Kueue"


def test_a_library_users_mistake_in_a_components_arguments_is_a_refusal_naming_the_argument(tmp_path: Path) -> None:
    """What a program of one's own passes the platform's components, and `code_bundle`, is input
    too: a mistake is a ConfigError (a Refusal) naming the argument and the fix, raised before
    anything is declared (no Pulumi engine is needed to see it)."""
    import tfk8s
    from tfk8s.components.monitoring import TrainingScrape, TrainingScrapeArgs
    from tfk8s.components.queueing import QueueingPlatform, QueueingPlatformArgs
    from tfk8s.components.storage import SharedStorage, SharedStorageArgs
    from tfk8s.settings.monitoring import MonitoringSettings
    from tfk8s.settings.queueing import QueueingSettings
    from tfk8s.settings.storage import StorageSettings
    from tfk8s.specs.ownership import Owner

    owner = Owner(organization="organization", project="tfk8s", stack="mine", kind="platform")
    mistakes = {
        "TrainingScrapeArgs.monitoring": lambda: TrainingScrape(
            "scrape", TrainingScrapeArgs(monitoring=MonitoringSettings(), namespace_prefix="tfk8s-", owner=owner)
        ),
        "QueueingPlatformArgs.queueing": lambda: QueueingPlatform(
            "queueing", QueueingPlatformArgs(queueing=QueueingSettings(), owner=owner)
        ),
        "SharedStorageArgs.secret_value": lambda: SharedStorage(
            "storage",
            SharedStorageArgs(storage=StorageSettings(backend="glusterfs"), owner=owner, kubernetes_version=(1, 25)),
        ),
        "code_bundle": lambda: tfk8s.code_bundle(tmp_path),
    }
    for argument, declare in mistakes.items():
        with pytest.raises(errors.ConfigError) as refused:
            declare()
        (problem,) = refused.value.problems
        assert problem.startswith(f"{argument}: ") and ": " in problem.removeprefix(f"{argument}: "), problem
    # Through a stack file, the key that names the directory.
    from tfk8s.specs.code import bundle

    with pytest.raises(errors.ConfigError, match=r"^invalid .*\n.*tfk8s:clusters\[0\]\.code\.path: .* holds no file to ship"):
        bundle(tmp_path, key="tfk8s:clusters[0].code.path")
