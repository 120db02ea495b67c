"""The image cache of lab/images.py: keyed by recipe and inputs, one archive per image, layers kept
while an archive holds them; what the Python layers hold. (Building real images is the real-node
tests' part.)"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import marshal
import os
import subprocess
import sys
from pathlib import Path

import images
import pytest


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(images, "IMAGES", tmp_path / "images")
    monkeypatch.setattr(images, "LAYERS", tmp_path / "images" / "layers")
    return tmp_path / "images"


def _root(tmp_path: Path, name: str, content: str) -> Path:
    root = tmp_path / "roots" / name
    root.mkdir(parents=True)
    (root / "file").write_text(content)
    return root


def test_a_changed_recipe_is_a_new_key(monkeypatch: pytest.MonkeyPatch) -> None:
    before = images._key("python3", "1000")
    assert images._key("python3", "1000") == before
    assert images._key("python3", "1001") != before
    monkeypatch.setattr(images, "RECIPE", b"another builder")
    assert images._key("python3", "1000") != before


def test_a_new_archive_of_an_image_replaces_the_older_and_the_layers_only_it_held(cache: Path, tmp_path: Path) -> None:
    base = images._layer(_root(tmp_path, "base", "shared by both images"))
    old_top = images._layer(_root(tmp_path, "old", "the old recipe's layer"))
    old = images._archive(cache / "app-0000000000000000.tar", "app", "v1", [base, old_top], {"Cmd": ["old"]})
    other = images._archive(cache / "other-1111111111111111.tar", "other", "v1", [base], {"Cmd": ["other"]})
    new_top = images._layer(_root(tmp_path, "new", "the new recipe's layer"))
    new = images._archive(cache / "app-2222222222222222.tar", "app", "v1", [base, new_top], {"Cmd": ["new"]})

    assert sorted(p.name for p in cache.glob("*.tar")) == sorted([new.archive.name, other.archive.name])
    assert not old.archive.with_suffix(".tag").exists()
    assert new.archive.with_suffix(".tag").read_text() == new.tag != old.tag
    # The old recipe's layer went with its archive; the base stays, held by both live archives.
    assert sorted(p.name for p in images.LAYERS.glob("*.tar")) == sorted([base.name, new_top.name])
    assert images._layers_of(new) == [base, new_top]
    # A layer removed that an archive still holds is taken back out of it.
    base.unlink()
    assert images._layers_of(other) == [base] and base.exists()


def _pip_install(prefix: Path, interpreter: str) -> None:
    """What pip leaves under --prefix: a command whose interpreter line is the installing Python's,
    and the distribution's RECORD with that command's hash."""
    script = f"#!{interpreter}\nfrom demo import main\nmain()\n".encode()
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "demo").write_bytes(script)
    info = prefix / "lib/python3.11/site-packages/demo-1.0.dist-info"
    info.mkdir(parents=True)
    digest = base64.urlsafe_b64encode(hashlib.sha256(script).digest()).rstrip(b"=").decode()
    (info / "RECORD").write_text(f"demo/__init__.py,sha256=abc,10\n../../../bin/demo,sha256={digest},{len(script)}\n")


def test_installed_commands_and_their_records_do_not_depend_on_the_scratch_interpreter(tmp_path: Path) -> None:
    built = []
    for scratch in ("/tmp/tmpaaaa/venv/bin/python", "/tmp/tmpbbbb/venv/bin/python"):
        prefix, root = tmp_path / scratch.split("/")[2] / "prefix", tmp_path / scratch.split("/")[2] / "root"
        _pip_install(prefix, scratch)
        images._usr_local(root, prefix)
        command = (root / "usr/local/bin/demo").read_bytes()
        record = (root / "usr/local/lib/python3.11/dist-packages/demo-1.0.dist-info/RECORD").read_text()
        built.append((command, record))
    assert built[0] == built[1]
    command, record = built[0]
    assert command.startswith(b"#!/usr/bin/python3\n")
    digest = base64.urlsafe_b64encode(hashlib.sha256(command).digest()).rstrip(b"=").decode()
    assert f"../../../bin/demo,sha256={digest},{len(command)}\n" in record
    assert "demo/__init__.py,sha256=abc,10\n" in record


# A string of one Latin-1 character: CPython keeps one object of it, interned or not.
SEPARATOR = "\xa7"


def _pip_install_package(prefix: Path) -> None:
    """What pip leaves under --prefix with --no-compile: a package's sources and no bytecode."""
    package = prefix / "lib/python3.11/site-packages/demo"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text(f"VALUE = 'compiled'\nSEPARATOR = {SEPARATOR!r}\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "mod.py").write_text("def answer():\n    return 42\n")
    (prefix / "bin").mkdir(parents=True)


def test_every_installed_module_has_unchecked_bytecode_naming_its_path_in_the_image(tmp_path: Path) -> None:
    prefix, root = tmp_path / "prefix", tmp_path / "root"
    _pip_install_package(prefix)
    images._usr_local(root, prefix)
    site = root / images.SITE

    sources = sorted(site.rglob("*.py"))
    assert len(sources) == 3
    for source in sources:
        cached = Path(importlib.util.cache_from_source(str(source)))
        assert cached.parent.name == "__pycache__" and cached.name.endswith(".cpython-311.pyc")
        pyc = cached.read_bytes()
        # The magic number of the Python that reads it, then the flags: hash-based (1), unchecked (not 2).
        assert pyc[:4] == importlib.util.MAGIC_NUMBER
        assert int.from_bytes(pyc[4:8], "little") == 0b01, source
        # Its code names the file where the image holds it, not this build's scratch directory.
        assert marshal.loads(pyc[16:]).co_filename == f"/{source.relative_to(root)}"

    # As in a pod: every time the layer's one epoch, the root filesystem read-only (-B: nothing
    # written), and the module is the bytecode's, not compiled again (a changed source goes unseen).
    (site / "demo" / "__init__.py").write_text("VALUE = 'compiled at the start'\n")
    for path in site.rglob("*"):
        os.utime(path, (images.EPOCH, images.EPOCH))
    imported = subprocess.run(
        [sys.executable, "-B", "-c", "import demo; print(demo.VALUE)"],
        check=True,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(site)},
    ).stdout
    assert imported == "compiled\n"


def test_the_compiled_layer_is_the_same_bytes_from_any_scratch_directory_and_whatever_ran_before(
    cache: Path, tmp_path: Path
) -> None:
    layers = []
    for build in ("one", "two"):
        prefix, root = tmp_path / build / "prefix", tmp_path / build / "root"
        _pip_install_package(prefix)
        images._usr_local(root, prefix)
        layers.append(images._layer(root))
        # A pyc marks the strings its compiler had interned: here one that the package uses, as
        # other packages' code or the builder's own work might have done before the next build.
        sys.intern(SEPARATOR)
    assert layers[0] == layers[1]
    assert len({p.name for p in images.LAYERS.glob("*.tar")}) == 1
