"""A compiled module says so in its docstring's first line, and only a compiled one.

The list of compiled modules is ``pyproject.toml``'s (the wheel hook's ``include``,
what ``scripts/compile`` builds); a reader of a module should not have to look
there to know that mypyc compiles it (what a compiled module may not do:
CONTRIBUTING.md, "The compiled build"). Each listed module's docstring ends its
first line with :data:`MARK`; every other module under ``src/`` does not.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.compiled import ROOT, compiled_sources

MARK = "[compiled]"
SRC = ROOT / "src"


def _first_line(path: Path) -> str:
    """The first line of the module docstring of ``path`` ("" without one)."""
    docstring = ast.get_docstring(ast.parse(path.read_text()), clean=False)
    return docstring.splitlines()[0].rstrip() if docstring else ""


def _marked() -> set[Path]:
    return {path for path in SRC.rglob("*.py") if _first_line(path).endswith(MARK)}


def test_every_compiled_module_is_marked_and_no_other() -> None:
    listed = set(compiled_sources())
    assert listed, "pyproject.toml lists no compiled module"
    marked = _marked()
    unmarked = sorted(str(path.relative_to(ROOT)) for path in listed - marked)
    assert not unmarked, f"compiled, but the docstring's first line does not say {MARK}: {unmarked}"
    stray = sorted(str(path.relative_to(ROOT)) for path in marked - listed)
    assert not stray, f"says {MARK} but pyproject.toml does not compile it: {stray}"


def test_the_mark_is_read_from_the_docstring_not_any_line(tmp_path: Path) -> None:
    # (The check must be able to fail: a mark elsewhere, or no docstring, is no mark.)
    marked = tmp_path / "marked.py"
    marked.write_text('"""Something. [compiled]\n\nMore.\n"""\n')
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text('"""Something.\n\n[compiled]\n"""\n')
    bare = tmp_path / "bare.py"
    bare.write_text("# [compiled]\nx = 1\n")
    assert _first_line(marked).endswith(MARK)
    assert not _first_line(elsewhere).endswith(MARK)
    assert _first_line(bare) == ""
