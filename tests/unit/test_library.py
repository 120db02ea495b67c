"""tfk8s as a library (docs/guide/library.md): the wheel `pip install .` would install holds the
program's package, the trainer package its components ship and the GitOps command, and the public
API and the command run from it alone, in an interpreter that sees no checkout."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import tfk8s
from mocked_program import ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built as `pip wheel . --no-deps` builds it, from a copy of what it is
    built from (setuptools writes its build tree beside the sources)."""
    source = tmp_path_factory.mktemp("source")
    shutil.copy(ROOT / "pyproject.toml", source)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("infra/tfk8s", "infra/tfk8s_gitops", "training/tfk8s_train"):
        shutil.copytree(ROOT / package, source / package, ignore=ignore)
    out = tmp_path_factory.mktemp("wheel")
    # No build isolation: the virtualenv's setuptools, no index asked.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-q", "-w", str(out)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("tfk8s-*.whl")
    return built


def test_the_wheel_holds_the_program_the_trainer_the_gitops_command_and_nothing_else(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.startswith("tfk8s-")}
    assert top == {"tfk8s", "tfk8s_train", "tfk8s_gitops"}  # not the tests, hack/ or lab/
    infra = [*(ROOT / "infra").glob("tfk8s/**/*.py"), *(ROOT / "infra").glob("tfk8s_gitops/*.py")]
    for source in [*infra, *(ROOT / "training").glob("tfk8s_train/*.py")]:
        if "__pycache__" not in source.parts:
            root = ROOT / ("infra" if source.is_relative_to(ROOT / "infra") else "training")
            assert source.relative_to(root).as_posix() in names
    assert "tfk8s/py.typed" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_the_public_api_imports_from_the_wheel_alone(wheel: Path, tmp_path: Path) -> None:
    """Unpacked (a pure-Python wheel installs by unpacking), on a path with the virtualenv's
    dependencies and no site hooks: no editable install, no checkout on sys.path."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    script = f"""
import json, sys
sys.path[:0] = [{str(site)!r}, {sysconfig.get_paths()["purelib"]!r}]
import tfk8s
found = {{name: getattr(tfk8s, name).__module__ for name in tfk8s.__all__}}
bundle = tfk8s.trainer_bundle()
print(json.dumps({{"file": tfk8s.__file__, "found": found, "trainer": sorted(bundle.files)}}))
"""
    done = subprocess.run([sys.executable, "-S", "-c", script], check=True, capture_output=True, text=True, cwd=tmp_path)
    result = json.loads(done.stdout)
    assert result["file"] == str(site / "tfk8s" / "__init__.py")
    assert set(result["found"]) == set(tfk8s.__all__)
    assert "launch.py" in result["trainer"] and "runner.py" not in result["trainer"]  # as pods get it


def run_unpacked(wheel: Path, tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    """`script` in an interpreter that sees the unpacked wheel and the virtualenv's dependencies
    alone (no site hooks: no editable install, no checkout on sys.path)."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    paths = f"import sys; sys.path[:0] = [{str(site)!r}, {sysconfig.get_paths()['purelib']!r}]\n"
    return subprocess.run([sys.executable, "-S", "-c", paths + script], capture_output=True, text=True, cwd=tmp_path)


def test_the_gitops_command_is_a_console_script_of_the_wheel(wheel: Path, tmp_path: Path) -> None:
    """`pip install` makes `tfk8s-gitops` (what hack/gitops.sh runs in a checkout): its entry point
    runs from the wheel alone, and a user's mistake is one line and exit code 1, no traceback."""
    archive = zipfile.ZipFile(wheel)
    (entry_points,) = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
    scripts = archive.read(entry_points).decode()
    assert "tfk8s-gitops = tfk8s_gitops.__main__:run" in scripts
    assert "tfk8s = tfk8s.cli.main:main" in scripts
    script = "import sys; from tfk8s_gitops.__main__ import run; sys.argv = ['tfk8s-gitops', *sys.argv[1:]]; run()"
    usage = run_unpacked(wheel, tmp_path, script.replace("*sys.argv[1:]", "'--help'"))
    assert usage.returncode == 0 and usage.stdout.startswith("usage: tfk8s-gitops"), usage.stderr
    not_a_repo = tmp_path / "not-a-repo"
    not_a_repo.mkdir()
    argv = f"'--checkout', {str(not_a_repo)!r}, 'plan', '--base', {'0' * 40!r}"
    refused = run_unpacked(wheel, tmp_path, script.replace("*sys.argv[1:]", argv))
    assert refused.returncode == 1
    assert refused.stderr.startswith("gitops: git rev-parse") and "Traceback" not in refused.stderr


def test_the_public_names_are_exactly_the_lazy_table_and_the_type_checking_imports() -> None:
    """`__all__` (a literal, for linters), the table `__getattr__` reads and the imports type
    checkers read name the same things."""
    tree = ast.parse((ROOT / "infra" / "tfk8s" / "__init__.py").read_text())
    (checking,) = [n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", None) == "TYPE_CHECKING"]
    typed = {a.asname or a.name for n in checking.body if isinstance(n, ast.ImportFrom) for a in n.names} - {"Any"}
    assert set(tfk8s.__all__) == set(tfk8s._PUBLIC) == typed
    assert tfk8s.__all__ == sorted(tfk8s.__all__)


def test_importing_tfk8s_imports_none_of_its_modules() -> None:
    """Every `pulumi up` of the program imports the package first, before its garbage collector is
    set up (tfk8s.entry): the public names load on first use."""
    script = "import sys; import tfk8s; print(sorted(m for m in sys.modules if m.startswith(('tfk8s.', 'pulumi', 'typing'))))"
    done = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT / "infra")}
    )
    assert done.stdout.strip() == "[]"
