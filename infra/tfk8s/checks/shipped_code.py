"""The context check of the training code a cluster ships (part of `tfk8s.checks.context`'s
experiment check, which reports its problems with the rest): which source's settings apply, and
for a code directory, the project's own text files alone, nothing a link or a `.git` could add,
within what a ConfigMap carries; for a code URL, a port that reaches no tenant's apps.
"""

from __future__ import annotations

from pathlib import Path

from tfk8s.settings.experiment import LAUNCHER_PACKAGE, CodeSettings
from tfk8s.settings.platform import PortSettings
from tfk8s.specs.code import code_files
from tfk8s.specs.network_policy import code_url_port

CONFIGMAP_LIMIT_BYTES = 1024 * 1024


def problems(code: CodeSettings, ports: PortSettings, key: str, project_root: Path) -> list[str]:
    """What is wrong with a cluster's `code` (at `key`) in this project, on this platform's ports."""
    return _source_problems(code, key, project_root) + _url_port_problems(code, ports, key)


def _url_port_problems(code: CodeSettings, ports: PortSettings, key: str) -> list[str]:
    """A `code.url` opens its port to every address for the cluster's pods (NetworkPolicy knows no
    host names, tfk8s.specs.network_policy); on the port where every tenant's Jupyter or TensorBoard
    answers anyone, that would hand the training code a way into other tenants' apps."""
    if code.source != "url" or not code.url:
        return []
    port = code_url_port(code.url)
    apps = {ports.jupyter: "Jupyter", ports.tensorboard: "TensorBoard"}
    if port not in apps:
        return []
    return [
        f"{key}.url: its port {port} is where every tenant's {apps[port]} answers, and a code URL opens its port to every "
        "address for the cluster's pods, other tenants' apps among them: serve the code on another port, or set "
        f"{key}.source: configmap or image"
    ]


def _source_problems(code: CodeSettings, key: str, project_root: Path) -> list[str]:
    if code.source == "url" and not code.url:
        return [f"{key}.url: source 'url' needs an http(s) URL to fetch the training script from"]
    # A setting of another source would be ignored: the code that runs would not be the one named.
    unused = [
        f"{key}.{setting}: applies to source {source!r} alone, and the source is {code.source!r}: remove it, or set "
        f"{key}.source: {source}"
        for setting, source in (("url", "url"), ("path", "configmap"))
        if code.source != source and setting in code.model_fields_set and getattr(code, setting) is not None
    ]
    if unused:
        return unused
    # The launcher is never shipped from the project but from the tfk8s_train beside tfk8s
    # (tfk8s.stack_kinds.experiment.codes): nothing of the project's to check.
    if code.source != "configmap" or code.path in (None, LAUNCHER_PACKAGE):
        return []
    # Only the project's own files are shipped: an absolute path, a '..' or a symlink out of the
    # project would put the operator's files (a kubeconfig among them) into a ConfigMap and the state.
    root = project_root.resolve()
    directory = (project_root / code.path).resolve()
    if Path(code.path).is_absolute() or not directory.is_relative_to(root):
        return [f"{key}.path: {code.path!r} is outside the project: give a directory of this repository, relative to its root"]
    if not directory.is_dir():
        return [f"{key}.path: {code.path!r} is not a directory of the project ({directory})"]
    # Inside the project a link can still reach what must never ship: a CI checkout's .git/config holds
    # its token when the checkout persists credentials. So no link (to a file or a directory, which
    # would not even ship) and nothing of a .git directory, anywhere in the code directory.
    for entry in sorted(directory.rglob("*")):
        name = entry.relative_to(directory).as_posix()
        if entry.is_symlink():
            return [f"{key}.path: {code.path}/{name} is a symbolic link: copy the file in, or remove the link"]
        if ".git" in entry.relative_to(directory).parts:
            return [
                f"{key}.path: {code.path}/{name}: a git repository's .git never ships (a checkout's credentials live "
                "there); keep the code outside it"
            ]
    size = 0
    for path in code_files(directory):
        name = path.relative_to(directory).as_posix()
        size += path.stat().st_size
        if size > CONFIGMAP_LIMIT_BYTES * 0.9:
            return [
                f"{key}.path: {code.path!r} holds more than {int(CONFIGMAP_LIMIT_BYTES * 0.9)} bytes; a ConfigMap carries "
                "at most 1 MiB: bake the code into the image (source: image) or serve it (source: url)"
            ]
        try:
            path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            return [
                f"{key}.path: {code.path}/{name} is not UTF-8 text; a code ConfigMap ships text files alone: remove it, "
                "or bake binary files into the image (source: image)"
            ]
    return []
