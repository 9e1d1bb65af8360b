"""No import circle inside ``src/tenure``: its modules form layers.

The graph's nodes are the modules of the package (a package is its ``__init__``);
its edges are every import one of them makes of another, read from the source with
:mod:`ast` (``tests/imports.py``, the reading ``tests/test_layers.py`` shares): at
module level, inside functions, and under ``if TYPE_CHECKING:`` (a circle of types is
a circle too). ``from pkg import name`` is an edge to
``pkg.name`` if that is a module, else to ``pkg``; relative imports resolve against
the importing module's package; the parents that importing ``a.b.c`` also runs do
not count. A lower layer that needs something of a higher one declares a narrow
protocol of it (``client/_recipe_session.py``, what a recipe needs of its session)
instead of importing it.

The test fails naming every circle (every strongly connected component of more
than one module) with the imports inside it, each with its file and line.
"""

from __future__ import annotations

from pathlib import Path

from tests.imports import SOURCE, Import, imports_of, modules


def import_graph(package: Path) -> dict[str, list[Import]]:
    """The imports of each module of ``package`` of another of its modules."""
    known = modules(package)
    graph: dict[str, list[Import]] = {name: [] for name in known}
    for name, path in known.items():
        seen: set[str] = set()
        for edge in imports_of(name, path, known):
            if edge.target != name and edge.target not in seen:
                seen.add(edge.target)  # (the first import of it names the edge)
                graph[name].append(edge)
    return graph


def circles(graph: dict[str, list[Import]]) -> list[list[str]]:
    """The strongly connected components of more than one module, each sorted
    (Tarjan's algorithm, iterative: no recursion limit to meet)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        # Each frame: a module and the position of its next edge to follow.
        work = [(root, 0)]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, position = work[-1]
            edges = graph[node]
            if position < len(edges):
                work[-1] = (node, position + 1)
                target = edges[position].target
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def report(graph: dict[str, list[Import]], circle: list[str], root: Path) -> str:
    """A circle's modules, then every import between them (file and line)."""
    members = set(circle)
    lines = [f"{len(circle)} modules: {', '.join(circle)}"]
    for name in circle:
        for edge in sorted(graph[name], key=lambda edge: edge.target):
            if edge.target in members:
                where = f"{edge.path.relative_to(root).as_posix()}:{edge.line}"
                lines.append(f"    {edge.source} -> {edge.target}  ({where})")
    return "\n".join(lines)


def test_no_import_circle_inside_tenure() -> None:
    graph = import_graph(SOURCE)
    assert len(graph) > 100  # (the whole package was read)
    found = circles(graph)
    assert not found, (
        f"{len(found)} import circle(s) in src/tenure; break each (a narrow protocol in "
        "a lower module, a function moved to the layer that uses it, a registry the "
        "caller consults):\n\n"
        + "\n\n".join(report(graph, circle, SOURCE.parent) for circle in found)
    )


# -- the graph code, on packages written for it ------------------------------------


def write(root: Path, files: dict[str, str]) -> Path:
    """The package ``pkg`` under ``root`` with ``files`` (path -> source); its directory."""
    for name, source in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root / "pkg"


def edges(graph: dict[str, list[Import]]) -> set[tuple[str, str]]:
    return {(edge.source, edge.target) for imports in graph.values() for edge in imports}


def test_the_graph_reads_every_kind_of_import(tmp_path: Path) -> None:
    package = write(
        tmp_path,
        {
            "__init__.py": "from . import low\nfrom .low import VALUE\n",
            "low.py": "VALUE = 1\n",
            "mid/__init__.py": "",
            "mid/a.py": (
                "from typing import TYPE_CHECKING\n"
                "import pkg.low\n"  # absolute; its parents (pkg) run but do not count
                "from .. import low as again\n"  # relative, two levels
                "from pkg.mid import b\n"  # a module of a package
                "if TYPE_CHECKING:\n"
                "    from .c import C\n"  # a type only: still an edge
                "def later():\n"
                "    from pkg.mid import NAME\n"  # a name of a package: the package
                "    import os\n"  # outside the package: no edge
            ),
            "mid/b.py": "",
            "mid/c.py": "class C: ...\n",
        },
    )
    assert sorted(modules(package)) == [
        "pkg",
        "pkg.low",
        "pkg.mid",
        "pkg.mid.a",
        "pkg.mid.b",
        "pkg.mid.c",
    ]
    assert edges(import_graph(package)) == {
        ("pkg", "pkg.low"),
        ("pkg.mid.a", "pkg.low"),
        ("pkg.mid.a", "pkg.mid.b"),
        ("pkg.mid.a", "pkg.mid.c"),
        ("pkg.mid.a", "pkg.mid"),
    }


def test_a_circle_is_found_and_named_with_its_imports(tmp_path: Path) -> None:
    package = write(
        tmp_path,
        {
            "__init__.py": "",
            "session.py": "def mutex():\n    from pkg.recipe import Mutex\n",
            # The circle is closed by a type only, as the client's once was.
            "recipe.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from pkg.session import Session\n"
            ),
            "a.py": "from . import b\n",
            "b.py": "from . import c\n",
            "c.py": "import pkg.a\n",
            "layered.py": "from pkg import session, a\n",  # imports circles, is in none
        },
    )
    graph = import_graph(package)
    found = circles(graph)
    assert found == [["pkg.a", "pkg.b", "pkg.c"], ["pkg.recipe", "pkg.session"]]
    text = report(graph, found[1], tmp_path)
    assert text.splitlines() == [
        "2 modules: pkg.recipe, pkg.session",
        "    pkg.recipe -> pkg.session  (pkg/recipe.py:3)",
        "    pkg.session -> pkg.recipe  (pkg/session.py:2)",
    ]


def test_layers_are_no_circle(tmp_path: Path) -> None:
    package = write(
        tmp_path,
        {
            "__init__.py": "from pkg.session import Session\n",
            "protocol.py": "from typing import Protocol\nclass Host(Protocol): ...\n",
            "recipe.py": "from pkg.protocol import Host\n",
            "session.py": "from pkg.recipe import *\nfrom pkg import protocol\n",
            "self.py": "import pkg.self\n",  # itself: no edge
        },
    )
    graph = import_graph(package)
    assert circles(graph) == []
    assert ("pkg.self", "pkg.self") not in edges(graph)
