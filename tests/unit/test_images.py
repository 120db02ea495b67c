"""The image cache of lab/images.py: keyed by recipe and inputs, one archive per image, layers kept
while an archive holds them. (Building real images is the real-node tests' part.)"""

from __future__ import annotations

import base64
import hashlib
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
