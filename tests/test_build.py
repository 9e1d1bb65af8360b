"""The build under test: compiled (mypyc) or pure, as the run asked; and their names.

``scripts/test`` runs the suite on both builds and sets ``TENURE_EXPECT_COMPILED``
(``1``: compiled, ``0``: pure) for each, so a build that failed to load (a stale or
missing extension, a ``.py`` imported instead) fails here rather than silently
testing the same build twice. Without the variable, either build passes.
"""

from __future__ import annotations

import ast
import importlib
import os

import pytest

from tenure._build import build
from tests.compiled import compiled_sources, is_extension, module_name

EXPECT = os.environ.get("TENURE_EXPECT_COMPILED")


@pytest.mark.skipif(EXPECT is None, reason="TENURE_EXPECT_COMPILED not set: either build")
@pytest.mark.parametrize("source", compiled_sources(), ids=lambda path: module_name(path))
def test_each_listed_module_is_of_the_build_asked_for(source):
    module = importlib.import_module(module_name(source))
    assert is_extension(module.__file__) == (EXPECT == "1"), module.__file__


@pytest.mark.skipif(EXPECT is None, reason="TENURE_EXPECT_COMPILED not set: either build")
def test_the_build_said_at_run_time_is_the_build_asked_for() -> None:
    """What ``tenure --version`` and ``tenure serve`` say runs (tenure._build)."""
    assert build() == ("compiled" if EXPECT == "1" else "pure")


def _bound_names(tree: ast.Module) -> set[str]:
    """The names a module's source binds at its top level (its own and imported)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            if isinstance(node.target, ast.Name):
                names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


@pytest.mark.parametrize("source", compiled_sources(), ids=lambda path: module_name(path))
def test_a_module_has_the_names_its_source_binds(source):
    """A compiled module must offer what its pure twin does (imports of it, tests)."""
    module = importlib.import_module(module_name(source))
    missing = {
        name
        for name in _bound_names(ast.parse(source.read_text()))
        if name != "annotations" and not hasattr(module, name)
    }
    assert not missing, f"{module.__name__} lacks {sorted(missing)}"
