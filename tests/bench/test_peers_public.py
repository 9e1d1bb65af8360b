"""bench/peers measures tenure as its users see it: no private tenure module, read by ast.

Every module of bench/peers, and every bench module one of them imports (followed
transitively: a helper of bench/tools must not bring internals in by the back door),
may name tenure only through its public modules (:data:`PUBLIC`) and public names:
no ``tenure._core``, no ``tenure.compat.ydb._protos``, no ``from tenure import
_x``, no ``tenure._x`` attribute, no ``importlib.import_module("tenure._x")``. The
test harness's server starters (``tests.*``, which bench/tools uses to start
PostgreSQL and etcd) are not followed: they start servers, they are not measured.

bench/micro may use internals, and says so: each of its modules that imports a
private tenure module has an *Internals* paragraph in its docstring.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
SRC = BENCH.parent / "src"
#: The public API a peer benchmark may use: what the README shows users import.
PUBLIC = frozenset(
    {"tenure", "tenure.client", "tenure.errors", "tenure.backends", "tenure.sync", "tenure.fencing"}
)
_IMPORTERS = {"import_module", "__import__"}


def _private(name: str) -> bool:
    """``_x`` is private; ``__x__`` (``__version__``) is not."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _tenure_module(dotted: str) -> bool:
    """Whether ``dotted`` names a module (or package) of tenure's source."""
    path = SRC.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _outside(dotted: str) -> str | None:
    """The first part of ``dotted`` (under tenure) that is not public API, if any.

    A private part (``tenure._core``, ``tenure.client._lease``) or a module that is
    not in :data:`PUBLIC` (``tenure.server``, ``tenure.backends.redis``).
    """
    parts = dotted.split(".")
    if parts[0] != "tenure":
        return None
    for end in range(1, len(parts) + 1):
        prefix = ".".join(parts[:end])
        if _private(parts[end - 1]) or (_tenure_module(prefix) and prefix not in PUBLIC):
            return prefix
    return None


def private_uses(source: str) -> list[str]:
    """What ``source`` uses of tenure beyond its public API, one line per use."""
    tree = ast.parse(source)
    found: list[str] = []
    bound: dict[str, str] = {}  # local name -> the tenure name it stands for
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (outside := _outside(alias.name)) is not None:
                    found.append(f"imports {outside}")
                if alias.name.split(".")[0] == "tenure":
                    local = alias.asname or "tenure"
                    bound[local] = alias.name if alias.asname else "tenure"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "tenure":
                continue
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                if (outside := _outside(dotted)) is not None:
                    found.append(f"imports {outside}")
                bound[alias.asname or alias.name] = dotted
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in _IMPORTERS and (outside := _outside(str(node.args[0].value))):
                found.append(f"loads {outside}")
    # Attributes: tenure._core.Engine, t.client._lease; each chain once, whole.
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or id(node) in inner:
            continue
        chain = ast.unparse(node).split(".")
        if chain[0] in bound and all(part.isidentifier() for part in chain):
            dotted = ".".join([bound[chain[0]], *chain[1:]])
            if (outside := _outside(dotted)) is not None:
                found.append(f"reaches {outside} ({ast.unparse(node)})")
    return found


def bench_imports(source: str, module: str) -> set[str]:
    """The bench modules ``source`` (the module ``module``) imports, as dotted names."""
    package = module.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "bench"}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            if base.split(".")[0] != "bench":
                continue
            out.add(base)
            # ``from bench.tools import systems``: a module, when such a file exists.
            out |= {f"{base}.{a.name}" for a in node.names if _file(f"{base}.{a.name}")}
    return {m for m in out if _file(m)}


def _file(module: str) -> Path | None:
    """The source file of the bench module ``module``, if there is one."""
    path = BENCH.parent.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def peers_closure() -> dict[str, Path]:
    """bench/peers' modules and every bench module they import, transitively."""
    todo = [f"bench.peers.{p.stem}" for p in sorted((BENCH / "peers").glob("*.py"))]
    todo = [m.removesuffix(".__init__") for m in todo]
    seen: dict[str, Path] = {}
    while todo:
        module = todo.pop()
        path = _file(module)
        if module in seen or path is None:
            continue
        seen[module] = path
        todo += sorted(bench_imports(path.read_text(), _as_package(module, path)))
    return seen


def _as_package(module: str, path: Path) -> str:
    # A package's __init__ resolves relative imports against itself.
    return f"{module}.__init__" if path.name == "__init__.py" else module


def test_the_peer_benchmarks_use_only_tenures_public_api() -> None:
    closure = peers_closure()
    # The walk really covers the peers and what they lean on (else this proves nothing).
    assert {"bench.peers.run", "bench.peers.clients", "bench.peers.lockload"} <= set(closure)
    assert {"bench.tools.results", "bench.tools.systems", "bench.tools.report"} <= set(closure)
    assert not any(m.startswith("bench.micro") for m in closure)
    found = {m: uses for m, p in closure.items() if (uses := private_uses(p.read_text()))}
    assert found == {}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from tenure._core import Engine", "imports tenure._core"),
        ("import tenure._protocol.frames", "imports tenure._protocol"),
        ("from tenure.compat.ydb import _protos", "imports tenure.compat"),
        ("from tenure.server import DataDir", "imports tenure.server"),
        ("from tenure import server", "imports tenure.server"),
        ("from tenure.backends import redis", "imports tenure.backends.redis"),
        ("from tenure import _version", "imports tenure._version"),
        ("from tenure.client._lease import Lease", "imports tenure.client._lease"),
        ("import tenure\ntenure._core.Engine()", "reaches tenure._core (tenure._core.Engine)"),
        ("import tenure as t\nt.server.DataDir", "reaches tenure.server (t.server.DataDir)"),
        ("from tenure import client as c\nc._link", "reaches tenure.client._link (c._link)"),
        ("import importlib\nimportlib.import_module('tenure._core')", "loads tenure._core"),
    ],
)
def test_each_way_into_the_internals_is_caught(source: str, expected: str) -> None:
    assert private_uses(source) == [expected]


def test_the_public_api_passes() -> None:
    source = (
        "import tenure\nfrom tenure import __version__, connect, errors\n"
        "from tenure.errors import UnavailableError\nimport tenure.sync\n"
        "from tenure.backends import Capability\n"
        "import redis.asyncio\nfrom bench.tools import systems\n"
        "tenure.connect('memory://')\ntenure.errors.ErrorCode\nredis.asyncio._theirs\n"
        "client = tenure.Client\n(await connect('x'))._anything\n"
    )
    assert private_uses(source) == []


def test_relative_and_package_imports_are_followed() -> None:
    source = "from . import clients\nfrom ..tools import results\nfrom bench.tools import cpu\n"
    found = bench_imports(source, "bench.peers.lockload")
    assert {"bench.peers.clients", "bench.tools.results", "bench.tools.cpu"} <= found


def test_micro_benchmarks_that_use_internals_say_so() -> None:
    modules = sorted((BENCH / "micro").glob("*.py"))
    assert len(modules) > 5
    private = [p for p in modules if private_uses(p.read_text())]
    assert private  # (micro-benchmarks do reach in: else this checks nothing)
    for path in private:
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        assert re.search(r"^Internals: \S", doc, re.MULTILINE), path.name
