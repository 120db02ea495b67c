"""Training code delivered to pods: the launcher package (always) and the user's code directory.

Both become ConfigMaps whose content hash is part of the run id, so changed code means a new
run (new Job, fresh parameter servers), never a silent mix of old and new tasks.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tfk8s.errors import ConfigError, MissingPrerequisite
from tfk8s.settings.experiment import LAUNCHER_PACKAGE
from tfk8s.specs.pods import TRAINER_ARCHIVE, TRAINER_PACKAGE, key_of


@dataclass(frozen=True)
class CodeBundle:
    """Files of one directory, keyed by their path relative to it."""

    files: dict[str, str]

    @property
    def digest(self) -> str:
        h = hashlib.sha256()
        for name in sorted(self.files):
            h.update(name.encode() + b"\0" + self.files[name].encode() + b"\0")
        return h.hexdigest()[:12]

    def config_map_data(self) -> dict[str, str]:
        return {key_of(name): text for name, text in sorted(self.files.items())}

    def zipped(self, package: str) -> bytes:
        """The files as the package `package` in a zip archive Python imports from (zipimport), every
        entry deflated, with a fixed date and mode, in name order. Only deflate's bytes depend on
        the zlib this Python links (zlib and zlib-ng differ): the digest, and so the ConfigMap's
        name and the run, are of the sources, and Pulumi ignores changes of the archive's bytes."""
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as archive:
            for name in sorted(self.files):
                entry = zipfile.ZipInfo(f"{package}/{name}", date_time=ZIP_DATE)
                entry.compress_type = zipfile.ZIP_DEFLATED
                entry.external_attr = 0o644 << 16
                archive.writestr(entry, self.files[name].encode("utf-8"), compresslevel=9)
        return out.getvalue()


# zipfile's earliest date: an archive of the same files is the same archive whenever it is made.
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def base64_of(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def trainer_archive(launcher: CodeBundle) -> dict[str, str]:
    """A trainer ConfigMap's `binaryData`: the package as one zip archive, which pods put on their
    `PYTHONPATH` (tfk8s.specs.pods.TRAINER_PATH). Its bytes depend on the zlib Python links: the
    ConfigMap is named after the sources' digest and Pulumi ignores changes of them."""
    return {TRAINER_ARCHIVE: base64_of(launcher.zipped(TRAINER_PACKAGE))}


def code_files(directory: Path, pattern: str = "**/*") -> list[Path]:
    """The files of `directory` that ship (caches and notebooks never do), in order."""
    return [
        path
        for path in sorted(directory.glob(pattern))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in {".pyc", ".ipynb"}
    ]


def bundle(directory: Path, pattern: str = "**/*", *, key: str = "code_bundle") -> CodeBundle:
    """Read a directory's text files for shipping as a ConfigMap (tfk8s.checks.context vetted them).
    `key` names the directory in a refusal: the stack file's key, or the library's function."""
    files = {}
    for path in code_files(directory, pattern):
        files[path.relative_to(directory).as_posix()] = path.read_text(encoding="utf-8")
    if not files:
        raise ConfigError([f"{key}: {directory} holds no file to ship: name the directory of your training code"])
    return CodeBundle(files=files)


# Which pods a copy of the trainer package is for: an experiment's training pods, or a tenant's
# apps (Jupyter, the TensorBoard gate).
PackageUse = Literal["experiment", "tenant"]
# Modules of tfk8s_train no pod imports: the local runner's, for tests, benches and laptops.
HOST_ONLY = frozenset({"cluster.py", "runner.py"})
# Modules only a tenant's apps import: the TensorBoard gate (with its progress and log routes) and
# the notebook's layout reader.
TENANT_APPS_ONLY = frozenset(
    {"token_gate.py", "gate_session.py", "gate_limits.py", "gate_routes.py", "run_status.py", "log_tree.py", "layouts.py"}
)
NOT_SHIPPED: dict[PackageUse, frozenset[str]] = {"experiment": HOST_ONLY | TENANT_APPS_ONLY, "tenant": HOST_ONLY}


def launcher_bundle(project_root: Path, use: PackageUse) -> CodeBundle:
    """The tfk8s_train package (launcher and trainer), flat: `tfk8s_train/*.py`, without the
    modules those pods never import. Every `pulumi preview` and `up` checks and diffs the copy, and
    the state keeps it twice: the experiment's lost 30 KB of its 108 KB this way (docs/benchmarks.md
    "Fixed cost"). tests/unit/test_code.py checks that each copy holds every module its pods' entry
    points import."""
    return package_bundle(project_root / LAUNCHER_PACKAGE, use)


def package_bundle(directory: Path, use: PackageUse) -> CodeBundle:
    """The trainer package in `directory`, flat, as `use`'s pods get it (see `launcher_bundle`)."""
    package = bundle(directory, "*.py")
    return CodeBundle(files={name: text for name, text in package.files.items() if name not in NOT_SHIPPED[use]})


def installed_trainer_package() -> Path:
    """Where the tfk8s_train package this process would import lies: beside tfk8s in an installed
    wheel (a program that imports tfk8s as a library has no checkout), or training/ of a checkout
    installed in editable mode. Found, never imported: its modules are for pods."""
    spec = importlib.util.find_spec(TRAINER_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingPrerequisite(
            f"the {TRAINER_PACKAGE} package is not installed beside tfk8s, and the training pods run it: "
            "pip install tfk8s (it ships both), or give the cluster its trainer (TrainingClusterArgs.launcher)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def installed_launcher_bundle(use: PackageUse = "experiment") -> CodeBundle:
    """`launcher_bundle` of the installed tfk8s_train package (`installed_trainer_package`)."""
    return package_bundle(installed_trainer_package(), use)
