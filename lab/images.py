"""Container images for the real node, built here: no registry is reachable from this machine, so
every image is made from Debian packages, PyPI wheels and Go modules, written as a Docker-format
archive and imported into the node's containerd (`ctr images import`). Pods use them with
`imagePullPolicy: Never`, or a team pushes the same archives to its own registry
(`skopeo copy docker-archive:<tar> docker://registry/...`).

  python lab/images.py build pause|python|tensorflow|jupyter|prometheus   -> prints {"tag": ..., "archive": ...}

Each image is cached under $TFK8S_CACHE/images by a hash of its inputs (the Debian suite and
packages, the Go source, the Python requirements); its tag says what it holds and ends with the
digest of its content, e.g. `tfk8s.local/python:bookworm-3.11-1a2b3c4d5e6f`. Layers are written
reproducibly: entries sorted, owners kept, times set to one fixed epoch, device nodes left out.
They go through files, never memory (the TensorFlow layer is 1.8 GB): each is kept once under
$TFK8S_CACHE/images/layers by its diff id, and the images that share it name it.

Every Python module of an image comes with its bytecode, compiled at build time and checked
against nothing (`unchecked-hash` pycs): pods run on a read-only root filesystem, so a module
without bytecode is compiled again at every start (TensorFlow's 6,750 files: most of a training
pod's start), and a pyc that names its source's time is stale here, every layer's times being the
one fixed epoch. An image is never changed in place, so its sources cannot drift from their pycs.
"""

from __future__ import annotations

import base64
import fcntl
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
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("TFK8S_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tfk8s")
IMAGES = CACHE / "images"
LAYERS = IMAGES / "layers"
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
# What images that need no home run as (prometheus): nobody, as Prometheus' own image does.
NOBODY = 65534
# Where the images' own packages go: /usr/local, as Debian's Python reads it (dist-packages).
SITE = "usr/local/lib/python3.11/dist-packages"


@dataclass(frozen=True)
class Image:
    tag: str
    archive: Path


# The recipes themselves: an image is cached under what it is made of and how, so a changed
# builder (this file) builds anew rather than reusing an archive of the old recipe.
RECIPE = hashlib.sha256(Path(__file__).read_bytes()).digest()


def _key(*parts: str | bytes) -> str:
    """The cache key of an image: its recipe and its inputs."""
    digest = hashlib.sha256(RECIPE)
    for part in parts:
        digest.update(part if isinstance(part, bytes) else part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _keep_layer(scratch: Path) -> Path:
    """Move a written layer tar to LAYERS under its diff id (its sha256), where images share it."""
    kept = LAYERS / f"{_sha256_of(scratch)}.tar"
    scratch.chmod(0o644)  # as the archives: mkstemp made it private
    if kept.exists():
        scratch.unlink()
    else:
        scratch.replace(kept)
    return kept


def _layer(root: Path) -> Path:
    """`root` as an uncompressed layer tar, reproducibly, kept under its diff id."""
    LAYERS.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkstemp(dir=LAYERS, suffix=".tmp")[1])
    with tarfile.open(scratch, mode="w", format=tarfile.PAX_FORMAT) as tar:
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
    return _keep_layer(scratch)


def _archive(out: Path, repository: str, what: str, layers: list[Path], config: Mapping[str, object]) -> Image:
    """A Docker-format archive (what `docker save` writes and `ctr images import` reads) of layers
    kept by `_layer`, streamed from their files."""
    diff_ids = [f"sha256:{layer.stem}" for layer in layers]
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": "2023-11-14T22:13:20Z",
        "config": dict(config),
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": [{"created": "2023-11-14T22:13:20Z", "created_by": f"lab/images.py {repository}"}],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    digest = hashlib.sha256(config_bytes).hexdigest()
    tag = f"{REGISTRY}/{repository}:{what}-{digest[:12]}"
    names = [f"{layer.stem}/layer.tar" for layer in layers]
    manifest = json.dumps([{"Config": f"{digest}.json", "RepoTags": [tag], "Layers": names}]).encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = out.with_suffix(".tmp")

    def member(name: str, size: int) -> tarfile.TarInfo:
        info = tarfile.TarInfo(name)
        info.size, info.mtime = size, EPOCH
        return info

    with tarfile.open(scratch, "w") as tar:
        tar.addfile(member(f"{digest}.json", len(config_bytes)), io.BytesIO(config_bytes))
        for name, layer in zip(names, layers, strict=True):
            with layer.open("rb") as handle:
                tar.addfile(member(name, layer.stat().st_size), handle)
        tar.addfile(member("manifest.json", len(manifest)), io.BytesIO(manifest))
    scratch.replace(out)
    # Written aside and renamed: a reader without the lock (`_cached`) takes the tag's file for done.
    out.with_suffix(".tag.tmp").write_text(tag)
    out.with_suffix(".tag.tmp").replace(out.with_suffix(".tag"))
    _forget_older(out)
    return Image(tag, out)


def _forget_older(out: Path) -> None:
    """Removes the archives of the same image under other keys (an older recipe or older inputs),
    then the kept layers no archive holds: an image is up to 2 GB, and the cache keeps one of each.
    (A layer removed here that a later build wants is taken back out of its archive.)"""
    image = out.name.rsplit("-", 1)[0]
    for older in IMAGES.glob(f"{image}-*.tar"):
        if older != out and older.name.rsplit("-", 1)[0] == image:
            older.unlink()
            older.with_suffix(".tag").unlink(missing_ok=True)
    held = {name.split("/")[0] for archive in IMAGES.glob("*.tar") for name in _manifest(archive)["Layers"]}
    for layer in LAYERS.glob("*.tar"):
        if layer.stem not in held:
            layer.unlink()


def _manifest(archive: Path) -> dict[str, Any]:
    """The one image's entry of an archive's manifest.json."""
    with tarfile.open(archive) as tar:
        return json.load(tar.extractfile("manifest.json"))[0]  # type: ignore[arg-type, no-any-return]


def _cached(name: str, key: str) -> tuple[Path, Image | None]:
    """The image `name` under `key` if the cache has it; if not, the cache is this process's to
    build it in (`_build_lock`), and another process may just have built it: looked for again."""
    archive = IMAGES / f"{name}-{key}.tar"
    tag_file = archive.with_suffix(".tag")
    for attempt in range(2):
        if archive.exists() and tag_file.exists():  # the tag is written last
            return archive, Image(tag_file.read_text().strip(), archive)
        if attempt == 0:
            _build_lock()
    return archive, None


# The image cache's lock, once this process holds it (until it exits: each build is a process).
_held: list[IO[str]] = []


def _build_lock() -> None:
    """The image cache to this process alone from now on. Builds at once (`make test` builds the
    real node's images in the background while a real-node test asks for one) share the layer
    store, whose unheld layers `_forget_older` removes, another build's new layer among them. A
    cached image is read without it, so a test waits only for an image it needs that is being built."""
    if not _held:
        IMAGES.mkdir(parents=True, exist_ok=True)
        lock = (IMAGES / ".lock").open("w")
        fcntl.flock(lock, fcntl.LOCK_EX)
        _held.append(lock)


def pause() -> Image:
    source = (ROOT / "lab" / "realnode" / "pause.go").read_bytes()
    go = subprocess.run(["go", "env", "GOVERSION"], check=True, capture_output=True, text=True).stdout.strip()
    archive, found = _cached("pause", _key(source, go))
    if found:
        return found
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "root"
        root.mkdir()
        env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-trimpath", "GO111MODULE": "off"}
        subprocess.run(
            ["go", "build", "-ldflags", "-s -w -buildid=", "-o", str(root / "pause"), str(ROOT / "lab/realnode/pause.go")],
            check=True,
            env=env,
        )
        config = {"Entrypoint": ["/pause"], "User": "65535:65535"}
        return _archive(archive, "pause", go, [_layer(root)], config)


def prometheus() -> Image:
    """Prometheus (built by `hack/tools.sh prometheus`, static) alone, as user nobody: what the
    monitoring test runs in its namespace. Its configuration comes from a ConfigMap, its data from
    an emptyDir; the image holds the binary and the two directories it expects."""
    subprocess.run(["bash", str(ROOT / "hack/tools.sh"), "prometheus"], check=True, capture_output=True, text=True)
    binary = _tool_path("prometheus")
    archive, found = _cached("prometheus", _key(_sha256_of(binary)))
    if found:
        return found
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "root"
        for directory in ("bin", "etc/prometheus", "prometheus", "tmp"):
            (root / directory).mkdir(parents=True)
        (root / "tmp").chmod(0o1777)
        shutil.copy2(binary, root / "bin" / "prometheus")
        (root / "bin" / "prometheus").chmod(0o755)
        for owned in ("etc/prometheus", "prometheus"):
            os.chown(root / owned, NOBODY, NOBODY)
        config = {
            "Entrypoint": ["/bin/prometheus"],
            "Cmd": ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"],
            "User": f"{NOBODY}:{NOBODY}",
            "ExposedPorts": {"9090/tcp": {}},
        }
        version = os.environ.get("PROMETHEUS_VERSION") or binary.parent.name.removeprefix("prometheus-")
        return _archive(archive, "prometheus", version, [_layer(root)], config)


def _tool_path(name: str) -> Path:
    """Where hack/tools.sh links a built tool (its cache's bin/)."""
    return (CACHE / "bin" / name).resolve()


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
    # ldconfig's record of the libraries' inodes and times at this build: the one file in which two
    # builds from the same mirror differ (ldconfig rebuilds it when it wants one).
    (root / "var" / "cache" / "ldconfig" / "aux-cache").unlink(missing_ok=True)
    with (root / "etc" / "passwd").open("a") as passwd:
        passwd.write(f"tfk8s:x:{USER_ID}:{USER_ID}:tfk8s:/home/tfk8s:/bin/sh\n")
    with (root / "etc" / "group").open("a") as group:
        group.write(f"tfk8s:x:{USER_ID}:\n")
    home = root / "home" / "tfk8s"
    home.mkdir(parents=True)
    os.chown(home, USER_ID, USER_ID)
    # Debian compiled the standard library when it installed it, into pycs that name their sources'
    # times: stale once the layer sets every time to EPOCH. Compiled again by the image's Python.
    subprocess.run(
        ["chroot", str(root), "python3", "-m", "compileall", "-q", "-f", "--invalidation-mode", "unchecked-hash"]
        + ["/usr/lib/python3.11", "/usr/lib/python3/dist-packages"],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def python() -> Image:
    archive, found = _cached("python", _key(SUITE, MIRROR, *PYTHON_PACKAGES, str(USER_ID)))
    if found:
        return found
    if shutil.which("debootstrap") is None:
        raise SystemExit("images: debootstrap is missing: apt-get install debootstrap (lab/realnode.sh install does)")
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


def _record_scripts(site: Path, scripts: Mapping[str, bytes]) -> None:
    """Each distribution's RECORD with the hashes and sizes of its commands as rewritten: what is
    installed, and the same in every build (pip hashed them with the scratch interpreter's path)."""
    for record in sorted(site.glob("*.dist-info/RECORD")):
        lines = []
        for line in record.read_text().splitlines():
            path = line.split(",", 1)[0]
            if path in scripts:
                digest = base64.urlsafe_b64encode(hashlib.sha256(scripts[path]).digest()).rstrip(b"=").decode()
                line = f"{path},sha256={digest},{len(scripts[path])}"
            lines.append(line)
        record.write_text("\n".join(lines) + "\n")


def _extra(name: str) -> list[str]:
    """The project's own pins for what pods run (an extra of pyproject.toml): one source."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return sorted(project["optional-dependencies"][name])


def _compile(site: Path) -> None:
    """Bytecode beside every module under `site` (a tree that will be the image's SITE): unchecked-
    hash pycs, whose code names its file where the image holds it. This machine's Python compiles
    them: 3.11, as the image's (the wheels are picked for it too), so the same magic number. One
    fresh interpreter, one file after another in compileall's sorted order: a pyc marks each string
    the compiling process had interned before, so compiling in this process or in parallel workers
    would give bytes that depend on what else ran first. A file that does not compile (some
    packages ship templates or test data named .py) is reported on stderr and left without
    bytecode, as pip leaves it."""
    if sys.version_info[:2] != (3, 11):
        raise SystemExit(f"images: the images' Python is 3.11, this one is {sys.version.split()[0]}: run with a 3.11")
    subprocess.run(
        [sys.executable, "-I", "-m", "compileall", "-q", "--invalidation-mode", "unchecked-hash", "-d", f"/{SITE}", str(site)],
        check=False,  # 1 when a file did not compile: said on stderr, the rest compiled
        stdout=sys.stderr,  # this module's stdout is its answer (main)
    )


def _usr_local(root: Path, prefix: Path) -> None:
    """What pip installed under `prefix`, moved to `root`'s /usr/local as Debian's Python reads it
    (site-packages is dist-packages there), its commands' interpreter line the image's Python, its
    modules compiled (_compile)."""
    site = root / SITE
    site.parent.mkdir(parents=True)
    (prefix / "lib/python3.11/site-packages").rename(site)
    scripts = root / "usr/local/bin"
    scripts.mkdir(parents=True)
    rewritten = {}
    for script in sorted((prefix / "bin").iterdir()):
        text = script.read_bytes()
        if text.startswith(b"#!"):  # pip wrote the installing interpreter's path (a scratch directory's)
            text = b"#!/usr/bin/python3" + text[text.index(b"\n") :]
            rewritten[f"../../../bin/{script.name}"] = text
        (scripts / script.name).write_bytes(text)
        (scripts / script.name).chmod(0o755)
    _record_scripts(site, rewritten)
    _compile(site)
    for data in ("share", "etc"):  # Jupyter's data files and server config, where Jupyter looks
        if (prefix / data).exists():
            (prefix / data).rename(root / "usr/local" / data)


def _pip_prefix(prefix: Path, requirements: list[str], *, installed: Path | None = None, constraints: Path | None = None) -> None:
    """`pip install --prefix` of wheels only, for Python 3.11 (the image's), seen from a bare
    interpreter: what `installed` (a directory of dist-info) holds counts as there already."""
    with tempfile.TemporaryDirectory() as scratch:
        bare = Path(scratch) / "bare"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
        env = {**os.environ, "PYTHONPATH": str(installed)} if installed else {**os.environ, "PYTHONPATH": ""}
        subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(bare / "bin" / "python"), "install", "-q"]
            # Not compiled by pip: its pycs would name the scratch prefix and their sources' times.
            + ["--disable-pip-version-check", "--no-compile", "--only-binary=:all:", "--prefix", str(prefix)]
            + (["--constraint", str(constraints)] if constraints else [])
            + requirements,
            check=True,
            env=env,
        )


def tensorflow() -> Image:
    """The training image: the Python image and one layer of wheels, the `training` extra installed
    under /usr/local (on Debian's path), its commands (`tensorboard`) in /usr/local/bin. The same
    image serves TensorBoard. The wheels are the ones this machine's Python 3.11 picks on Debian
    bookworm: the image's own Python and C library."""
    base = python()
    requirements = _extra("training")
    archive, found = _cached("tensorflow", _key(base.tag, *requirements))
    if found:
        return found
    with tempfile.TemporaryDirectory() as scratch:
        root, prefix = Path(scratch) / "root", Path(scratch) / "prefix"
        _pip_prefix(prefix, requirements)
        _usr_local(root, prefix)
        version = next(r.split("==")[1] for r in requirements if r.startswith("tensorflow"))
        config = {
            "Cmd": ["python"],
            "User": f"{USER_ID}:{USER_ID}",
            "Env": ["HOME=/home/tfk8s", "PATH=/usr/local/bin:/usr/bin:/bin"],
        }
        return _archive(archive, "tensorflow", f"{version}-py3.11", [*_layers_of(base), _layer(root)], config)


# Jupyter's user, as in the Jupyter project's docker-stacks images (the platform's default Jupyter
# image): `jovyan`, uid 1000, group `users` (100), home /home/jovyan, where the tenant's notebooks
# are mounted (tfk8s.components.user_env) and the platform's `podSecurity.jupyter` runs it.
JUPYTER_USER, JUPYTER_GROUP, JUPYTER_HOME = "jovyan", 100, "/home/jovyan"


def _dist_info(layer: Path, into: Path) -> list[str]:
    """The dist-info directories of the packages a layer installed, copied to `into`; returns them
    as `name==version` pins."""
    pins = []
    with tarfile.open(layer) as tar:
        for member in tar:
            parts = member.name.split("/")
            if "/".join(parts[:5]) == SITE and len(parts) > 5 and parts[5].endswith(".dist-info"):
                tar.extract(member, into, filter="data")
                if len(parts) == 6:
                    name, version = parts[5].removesuffix(".dist-info").split("-", 1)
                    pins.append(f"{name}=={version}")
    return sorted(pins)


def jupyter() -> Image:
    """The Jupyter image: the training image (a notebook drives in-graph clusters with TensorFlow and
    the launcher) and one layer: JupyterLab (the `notebook` extra) under /usr/local, without
    changing any package the training layer holds (pinned to their versions: the resolver fails
    rather than upgrade one), and the user the platform runs it as. `jupyter lab` listens on all
    addresses, on the port JUPYTER_PORT says, and asks for the token in the file JUPYTER_TOKEN_FILE
    names (tfk8s.specs.app_sessions; JUPYTER_TOKEN would do too, but every kernel would inherit it)."""
    base = tensorflow()
    requirements = _extra("notebook")
    archive, found = _cached("jupyter", _key(base.tag, *requirements, JUPYTER_USER, str(JUPYTER_GROUP)))
    if found:
        return found
    layers = _layers_of(base)
    with tempfile.TemporaryDirectory() as scratch:
        root, prefix, installed = Path(scratch) / "root", Path(scratch) / "prefix", Path(scratch) / "installed"
        pins = _dist_info(layers[-1], installed)
        constraints = Path(scratch) / "constraints.txt"
        constraints.write_text("".join(f"{pin}\n" for pin in pins))
        _pip_prefix(prefix, requirements, installed=installed / SITE, constraints=constraints)
        _usr_local(root, prefix)
        # Uid 1000 is jovyan here (the base's user `tfk8s` renamed), in group users, with its home.
        with tarfile.open(layers[0]) as tar:
            passwd = tar.extractfile("etc/passwd").read().decode()  # type: ignore[union-attr]
        (root / "etc").mkdir()
        (root / "etc/passwd").write_text(
            "".join(
                f"{JUPYTER_USER}:x:{USER_ID}:{JUPYTER_GROUP}:Jupyter:{JUPYTER_HOME}:/bin/bash\n"
                if line.split(":")[2:3] == [str(USER_ID)]
                else f"{line}\n"
                for line in passwd.splitlines()
            )
        )
        home = root / JUPYTER_HOME.lstrip("/")
        home.mkdir(parents=True)
        os.chown(home, USER_ID, JUPYTER_GROUP)
        version = requirements[0].split("==")[1]
        config = {
            "Cmd": ["jupyter", "lab", "--ip=0.0.0.0", "--no-browser", f"--ServerApp.root_dir={JUPYTER_HOME}"],
            "User": f"{USER_ID}:{JUPYTER_GROUP}",
            "WorkingDir": JUPYTER_HOME,
            "Env": [f"HOME={JUPYTER_HOME}", "PATH=/usr/local/bin:/usr/bin:/bin", "SHELL=/bin/bash"],
        }
        return _archive(archive, "jupyter", f"lab{version}-py3.11", [*layers, _layer(root)], config)


def _layers_of(image: Image) -> list[Path]:
    """The layers of an archive this module wrote, in order, as kept files (taken back out of the
    archive, streamed, where the layer store lost one)."""
    names = _manifest(image.archive)["Layers"]
    with tarfile.open(image.archive) as tar:
        kept = []
        for name in names:
            layer = LAYERS / f"{name.split('/')[0]}.tar"
            if not layer.exists():
                LAYERS.mkdir(parents=True, exist_ok=True)
                scratch = Path(tempfile.mkstemp(dir=LAYERS, suffix=".tmp")[1])
                with tar.extractfile(name) as source, scratch.open("wb") as target:  # type: ignore[union-attr]
                    shutil.copyfileobj(source, target, 1 << 20)
                layer = _keep_layer(scratch)
            kept.append(layer)
        return kept


BUILDERS = {"pause": pause, "python": python, "tensorflow": tensorflow, "jupyter": jupyter, "prometheus": prometheus}


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "build" or argv[1] not in BUILDERS:
        print(f"usage: images.py build {'|'.join(BUILDERS)}", file=sys.stderr)
        return 2
    image = BUILDERS[argv[1]]()
    print(json.dumps({"tag": image.tag, "archive": str(image.archive)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
