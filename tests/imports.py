"""How the rules' tests read the imports of ``src/tenure``: one reading, with :mod:`ast`.

Used by ``tests/test_import_graph.py`` (no circle), ``tests/test_layers.py`` (what each
layer may import) and ``tests/test_private_reads.py`` (whose privates a module reads).
A module's imports are every ``import`` and ``from ... import`` in its source, and
every ``importlib.import_module("...")`` or ``__import__("...")`` of a literal name: at
module level, inside functions, and under ``if TYPE_CHECKING:`` (each with where it
runs). ``from pkg import name`` imports ``pkg.name`` if that is a module, else ``pkg``
itself; relative imports resolve against the importing module's package; the parents
that importing ``a.b.c`` also runs do not count.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tests.parsed import syntax_tree

#: The checkout's source (what the rules read: the source, whichever build is installed).
SOURCE = Path(__file__).resolve().parent.parent / "src" / "tenure"
#: Where an import runs: when the module is imported, inside a function, for types only.
AT_IMPORT, IN_FUNCTION, FOR_TYPES = "at import", "in a function", "under TYPE_CHECKING"


@dataclass(frozen=True, slots=True)
class Import:
    """One import: ``source`` imports ``target`` at ``line`` of ``path``, run ``where``."""

    source: str
    target: str
    path: Path
    line: int
    where: str = AT_IMPORT


def modules(package: Path) -> dict[str, Path]:
    """Every module of the package in directory ``package``, by dotted name (a package
    is its ``__init__``)."""
    found: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def package_of(name: str, path: Path) -> str:
    """The package module ``name`` (at ``path``) resolves relative imports against."""
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def absolute(package: str, node: ast.ImportFrom) -> str:
    """The module a ``from`` import names, relative ones resolved from ``package``."""
    base = node.module or ""
    if not node.level:
        return base
    parts = package.split(".")
    parts = parts[: len(parts) - (node.level - 1)]  # up level - 1
    return ".".join([*parts, base] if base else parts)


def _is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING`` (read as nodes: every ``if`` asks)."""
    if isinstance(test, ast.Attribute):
        return (
            test.attr == "TYPE_CHECKING"
            and isinstance(test.value, ast.Name)
            and test.value.id == "typing"
        )
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"


#: The functions that import the module their first argument names.
IMPORTERS = ("import_module", "__import__")


def _named_import(node: ast.AST) -> str | None:
    """The module ``importlib.import_module("a.b")`` or ``__import__("a.b")`` names."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    first = node.args[0]
    if name in IMPORTERS and isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def statements(
    tree: ast.AST, where: str = AT_IMPORT
) -> Iterator[tuple[ast.Import | ast.ImportFrom | ast.Call, str]]:
    """Every import under ``tree`` (a statement, or a call that imports a module named
    by a literal string), with where it runs, in the order of the source."""
    # Depth first without recursion (nested generators cost a step per level for every
    # node): a stack of the nodes still to read, each with where it runs, next on top.
    pending = [(child, where) for child in reversed(list(ast.iter_child_nodes(tree)))]
    while pending:
        node, runs = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, runs
            continue
        inside = runs
        if _named_import(node) is not None:
            assert isinstance(node, ast.Call)
            yield node, runs
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            pending += [(child, runs) for child in reversed(node.orelse)]
            pending += [(child, FOR_TYPES) for child in reversed(node.body)]
            continue
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            inside = FOR_TYPES if runs == FOR_TYPES else IN_FUNCTION
        pending += [(child, inside) for child in reversed(list(ast.iter_child_nodes(node)))]


@cache
def _statements_of(tree: ast.AST) -> tuple[tuple[ast.Import | ast.ImportFrom | ast.Call, str], ...]:
    # (The trees of tests/parsed.py are kept for the run: read once for every rule.)
    return tuple(statements(tree))


def imports_of(name: str, path: Path, known: dict[str, Path]) -> Iterator[Import]:
    """What module ``name`` (at ``path``) imports of the modules ``known``, in order."""
    package = package_of(name, path)
    for node, where in _statements_of(syntax_tree(path)):
        pairs: list[tuple[str, str | None]]
        if isinstance(node, ast.Call):
            pairs = [(str(_named_import(node)), None)]
        elif isinstance(node, ast.Import):
            pairs = [(alias.name, None) for alias in node.names]
        else:
            base = absolute(package, node)
            pairs = [(base, alias.name) for alias in node.names]
        for module, attribute in pairs:
            submodule = f"{module}.{attribute}" if attribute is not None else None
            target = submodule if submodule in known else module
            if target in known:
                yield Import(name, target, path, node.lineno, where)
