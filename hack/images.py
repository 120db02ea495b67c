"""Container images for the real node, built here: no registry is reachable from this machine, so
every image is made from Debian packages, PyPI wheels and Go modules, written as a Docker-format
archive and imported into the node's containerd (`ctr images import`). Pods use them with
`imagePullPolicy: Never`, or a team pushes the same archives to its own registry
(`skopeo copy docker-archive:<tar> docker://registry/...`).

  python hack/images.py build pause|python|tensorflow     -> prints {"tag": ..., "archive": ...}

Each image is cached under $TFK8S_CACHE/images by a hash of its inputs (the Debian suite and
packages, the Go source, the Python requirements); its tag says what it holds and ends with the
digest of its content, e.g. `tfk8s.local/python:bookworm-3.11-1a2b3c4d5e6f`. Layers are written
reproducibly: entries sorted, owners kept, times set to one fixed epoch, device nodes left out.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("TFK8S_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tfk8s")
IMAGES = CACHE / "images"
REGISTRY = "tfk8s.local"
# One fixed time for every file of every layer: the same inputs give the same bytes.
EPOCH = 1_700_000_000
SUITE, MIRROR = "bookworm", "http://deb.debian.org/debian"
# The base every Python image starts from: the Debian interpreter (3.11 in bookworm, the version the
# project's wheels are built for), CA certificates, and a user the `restricted` Pod Security level
# accepts (uid 1000, with a home it may write).
# `python` too: tfk8s's pods run `python <launcher>` (python-is-python3), as the stock images do.
PYTHON_PACKAGES = ("python3", "python-is-python3", "ca-certificates")
USER_ID = 1000


@dataclass(frozen=True)
class Image:
    tag: str
    archive: Path


def _key(*parts: str | bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part if isinstance(part, bytes) else part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def _layer(root: Path) -> bytes:
    """`root` as an uncompressed layer tar, reproducibly."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for directory, dirs, files in os.walk(root):
            dirs.sort()
            for name in sorted([*dirs, *files]):
                path = Path(directory) / name
                info = tar.gettarinfo(str(path), arcname=str(path.relative_to(root)))
                if not (info.isfile() or info.isdir() or info.issym() or info.islnk()):
                    continue  # device nodes and sockets: the runtime provides /dev
                info.mtime = EPOCH
                info.uname = info.gname = ""
                if info.isfile():
                    with path.open("rb") as handle:
                        tar.addfile(info, handle)
                else:
                    tar.addfile(info)
            # os.walk does not descend into symlinked directories; they were added as links above.
            dirs[:] = [d for d in dirs if not (Path(directory) / d).is_symlink()]
    return buffer.getvalue()


def _archive(out: Path, repository: str, what: str, layers: list[bytes], config: Mapping[str, object]) -> Image:
    """A Docker-format archive (what `docker save` writes and `ctr images import` reads)."""
    diff_ids = [f"sha256:{hashlib.sha256(layer).hexdigest()}" for layer in layers]
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": "2023-11-14T22:13:20Z",
        "config": dict(config),
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": [{"created": "2023-11-14T22:13:20Z", "created_by": f"hack/images.py {repository}"}],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    digest = hashlib.sha256(config_bytes).hexdigest()
    tag = f"{REGISTRY}/{repository}:{what}-{digest[:12]}"
    members: dict[str, bytes] = {f"{digest}.json": config_bytes}
    names = []
    for diff_id, layer in zip(diff_ids, layers, strict=True):
        name = f"{diff_id.removeprefix('sha256:')}/layer.tar"
        members[name] = layer
        names.append(name)
    members["manifest.json"] = json.dumps([{"Config": f"{digest}.json", "RepoTags": [tag], "Layers": names}]).encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = out.with_suffix(".tmp")
    with tarfile.open(scratch, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), EPOCH
            tar.addfile(info, io.BytesIO(data))
    scratch.replace(out)
    out.with_suffix(".tag").write_text(tag)
    return Image(tag, out)


def _cached(name: str, key: str) -> tuple[Path, Image | None]:
    archive = IMAGES / f"{name}-{key}.tar"
    tag_file = archive.with_suffix(".tag")
    if archive.exists() and tag_file.exists():
        return archive, Image(tag_file.read_text().strip(), archive)
    return archive, None


def pause() -> Image:
    source = (ROOT / "hack" / "realnode" / "pause.go").read_bytes()
    go = subprocess.run(["go", "env", "GOVERSION"], check=True, capture_output=True, text=True).stdout.strip()
    archive, found = _cached("pause", _key(source, go))
    if found:
        return found
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "root"
        root.mkdir()
        env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-trimpath", "GO111MODULE": "off"}
        subprocess.run(
            ["go", "build", "-ldflags", "-s -w -buildid=", "-o", str(root / "pause"), str(ROOT / "hack/realnode/pause.go")],
            check=True,
            env=env,
        )
        config = {"Entrypoint": ["/pause"], "User": "65535:65535"}
        return _archive(archive, "pause", go, [_layer(root)], config)


def _debootstrap(root: Path, packages: tuple[str, ...]) -> None:
    subprocess.run(
        ["debootstrap", "--variant=minbase", f"--include={','.join(packages)}", SUITE, str(root), MIRROR],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    # What only the build needed: apt's lists and caches, logs.
    for leftover in ("var/lib/apt/lists", "var/cache/apt", "var/log"):
        shutil.rmtree(root / leftover, ignore_errors=True)
        (root / leftover).mkdir(parents=True, exist_ok=True)
    with (root / "etc" / "passwd").open("a") as passwd:
        passwd.write(f"tfk8s:x:{USER_ID}:{USER_ID}:tfk8s:/home/tfk8s:/bin/sh\n")
    with (root / "etc" / "group").open("a") as group:
        group.write(f"tfk8s:x:{USER_ID}:\n")
    home = root / "home" / "tfk8s"
    home.mkdir(parents=True)
    os.chown(home, USER_ID, USER_ID)


def python() -> Image:
    archive, found = _cached("python", _key(SUITE, MIRROR, *PYTHON_PACKAGES, str(USER_ID)))
    if found:
        return found
    if shutil.which("debootstrap") is None:
        raise SystemExit("images: debootstrap is missing: apt-get install debootstrap (hack/realnode.sh install does)")
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "root"
        _debootstrap(root, PYTHON_PACKAGES)
        version = subprocess.run(
            ["chroot", str(root), "python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        config = {"Cmd": ["python3"], "User": f"{USER_ID}:{USER_ID}", "Env": ["HOME=/home/tfk8s", "PATH=/usr/bin:/bin"]}
        return _archive(archive, "python", f"{SUITE}-{version}", [_layer(root)], config)


def _training_requirements() -> list[str]:
    """The project's own pins for what pods run (pyproject.toml's `training` extra): one source."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return sorted(project["optional-dependencies"]["training"])


def tensorflow() -> Image:
    """The training image: the Python image and one layer of wheels, the `training` extra installed
    under /usr/local (on Debian's path), its commands (`tensorboard`) in /usr/local/bin. The same
    image serves TensorBoard. The wheels are the ones this machine's Python 3.11 picks on Debian
    bookworm: the image's own Python and C library."""
    base = python()
    requirements = _training_requirements()
    archive, found = _cached("tensorflow", _key(base.tag, *requirements))
    if found:
        return found
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "root"
        site = root / "usr/local/lib/python3.11/dist-packages"
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile", "--no-warn-conflicts"]
            + ["--only-binary=:all:"]
            + ["--target", str(site), *requirements],
            check=True,
        )
        scripts = root / "usr/local/bin"
        scripts.mkdir(parents=True)
        for script in sorted((site / "bin").iterdir()):
            text = script.read_bytes()
            if text.startswith(b"#!"):  # pip wrote this interpreter's path: the image's is /usr/bin/python3
                text = b"#!/usr/bin/python3" + text[text.index(b"\n") :]
            (scripts / script.name).write_bytes(text)
            (scripts / script.name).chmod(0o755)
        shutil.rmtree(site / "bin")
        base_layer = _layers_of(base)
        version = next(r.split("==")[1] for r in requirements if r.startswith("tensorflow"))
        config = {
            "Cmd": ["python"],
            "User": f"{USER_ID}:{USER_ID}",
            "Env": ["HOME=/home/tfk8s", "PATH=/usr/local/bin:/usr/bin:/bin"],
        }
        return _archive(archive, "tensorflow", f"{version}-py3.11", [*base_layer, _layer(root)], config)


def _layers_of(image: Image) -> list[bytes]:
    """The layers of an archive this module wrote, in order."""
    with tarfile.open(image.archive) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
        return [tar.extractfile(name).read() for name in manifest[0]["Layers"]]  # type: ignore[union-attr]


BUILDERS = {"pause": pause, "python": python, "tensorflow": tensorflow}


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "build" or argv[1] not in BUILDERS:
        print(f"usage: images.py build {'|'.join(BUILDERS)}", file=sys.stderr)
        return 2
    image = BUILDERS[argv[1]]()
    print(json.dumps({"tag": image.tag, "archive": str(image.archive)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
