"""tools/compile.py's two steps: a staged build is installed only when it is this checkout's.

``scripts/test`` stages the compiled build (``--stage``) while the pure build's unit
tier runs, then installs it (``--install``); an install of a stage that is missing a
module, or older than a source, would make a run test a build other than the one it
names. The paths are a temporary tree's (the module's globals, patched).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tools import compile as tool


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout of two listed modules, a pyproject.toml and an empty stage."""
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    for name in ("a", "b"):
        (src / "pkg" / f"{name}.py").write_text("x = 1\n")
    (tmp_path / "pyproject.toml").write_text("")
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    monkeypatch.setattr(tool, "SRC", src)
    monkeypatch.setattr(tool, "LIB", tmp_path / "build" / "mypyc" / "lib")
    monkeypatch.setattr(tool, "sources", lambda: sorted((src / "pkg").glob("*.py")))
    return tmp_path


def _stage(tree: Path, *names: str, age: float = 0.0) -> None:
    for name in names:
        staged = tree / "build" / "mypyc" / "lib" / "pkg" / f"{name}{tool.EXT_SUFFIX}"
        staged.parent.mkdir(parents=True, exist_ok=True)
        staged.write_bytes(b"ext " + name.encode())
        when = staged.stat().st_mtime + age
        os.utime(staged, (when, when))


def test_a_current_stage_is_installed_beside_its_sources(tree: Path) -> None:
    (tree / "src" / f"old{tool.EXT_SUFFIX}").write_bytes(b"a build of before")
    _stage(tree, "a", "b", age=10.0)
    tool.install()
    for name in ("a", "b"):
        assert (tree / "src" / "pkg" / f"{name}{tool.EXT_SUFFIX}").read_bytes() == (
            b"ext " + name.encode()
        )
    assert not (tree / "src" / f"old{tool.EXT_SUFFIX}").exists()  # the build before: gone


def test_a_stage_missing_a_module_is_refused_and_installs_nothing(tree: Path) -> None:
    _stage(tree, "a", age=10.0)
    with pytest.raises(SystemExit, match=r"no current staged build of src/pkg/b\.py"):
        tool.install()
    assert not list((tree / "src").rglob(f"*{tool.EXT_SUFFIX}"))


def test_a_stage_older_than_a_source_is_refused(tree: Path) -> None:
    _stage(tree, "a", "b", age=-10.0)
    with pytest.raises(SystemExit, match="no current staged build"):
        tool.install()
