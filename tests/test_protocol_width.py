"""Issue 49's goal, held: no protocol of ``src/tenure`` declares more than
:data:`MOST_MEMBERS` members.

A protocol is what one part asks of another; a wide one couples the asker to most of
the other, and every implementation (a third party's backend, a test's fake) must
build all of it. Where a part needs more, it declares a narrow protocol of its own
(its *home*, CONTRIBUTING's names), or a protocol is composed of smaller ones by
responsibility (``BackendSession``: the core and each ability).

The counting rule (read with :mod:`ast`, so the compiled build is read as written):

* a *protocol* is a class with ``Protocol`` among its bases: ``typing.Protocol`` (or
  ``typing_extensions``'), by name or as ``typing.Protocol``, plain or subscripted
  (``Protocol[T]``); ``asyncio.Protocol``, a transport's callbacks, is not one;
* its *members* are the distinct names its own body declares: each method (``def``
  and ``async def``, a ``@property`` and its setter once, ``@overload`` items once,
  dunders such as ``__call__`` included), each attribute annotated (``x: int``) or
  assigned (``x = 0``); its docstring and ``...`` are not members;
* what a protocol inherits from another is that one's, counted there: a protocol
  composed of others (``class Backend(Nodes, Listing, Protocol)``) counts what it
  adds.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "tenure"

#: The most members a protocol may declare (issue 49: "the widest protocol at most 10").
MOST_MEMBERS = 10


def is_protocol_base(base: ast.expr, protocol_names: set[str]) -> bool:
    """Whether ``base`` (a class's base) is typing's ``Protocol``: a name imported from
    typing (``protocol_names``), ``typing.Protocol``, or either subscripted."""
    if isinstance(base, ast.Subscript):
        base = base.value
    if isinstance(base, ast.Name):
        return base.id in protocol_names
    return (
        isinstance(base, ast.Attribute)
        and base.attr == "Protocol"
        and isinstance(base.value, ast.Name)
        and base.value.id in ("typing", "typing_extensions", "t")
    )


def typing_protocol_names(tree: ast.Module) -> set[str]:
    """The names a module binds to ``typing.Protocol`` (``from typing import Protocol``,
    ``... import Protocol as P``)."""
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in ("typing", "typing_extensions")
        for alias in node.names
        if alias.name == "Protocol"
    }


def declared_members(cls: ast.ClassDef) -> set[str]:
    """The names ``cls``'s own body declares (the module docstring's rule)."""
    names: set[str] = set()
    for statement in cls.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(statement.name)
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            names.add(statement.target.id)
        elif isinstance(statement, ast.Assign):
            names |= {target.id for target in statement.targets if isinstance(target, ast.Name)}
    return names


def protocols(source: Path, root: Path = ROOT) -> dict[str, set[str]]:
    """Every protocol under ``source`` (``path:Class``, the path from ``root``) and the
    members it declares."""
    found: dict[str, set[str]] = {}
    for path in sorted(source.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        names = typing_protocol_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                is_protocol_base(base, names) for base in node.bases
            ):
                where = f"{path.relative_to(root).as_posix()}:{node.name}"
                found[where] = declared_members(node)
    return found


def test_no_protocol_declares_more_than_ten_members() -> None:
    found = protocols(SOURCE)
    assert len(found) > 50  # (the walk found the protocols: the homes, the contract...)
    assert "src/tenure/backends/_core_session.py:CoreSession" in found
    assert len(found["src/tenure/backends/_core_session.py:CoreSession"]) == 10
    wide = {
        where: f"{len(members)}: {', '.join(sorted(members))}"
        for where, members in found.items()
        if len(members) > MOST_MEMBERS
    }
    assert not wide, (
        f"protocols of more than {MOST_MEMBERS} members (narrow them by responsibility: "
        "a home per part that asks, or a composition of smaller ones):\n"
        + "\n".join(f"{where} ({members})" for where, members in sorted(wide.items()))
    )


# -- the counting, on code written for it ------------------------------------------------


def _count(source: str, tmp_path: Path) -> dict[str, int]:
    package = tmp_path / "src" / "tenure"
    package.mkdir(parents=True)
    (package / "m.py").write_text(source)
    return {
        where.rsplit(":", 1)[1]: len(members)
        for where, members in protocols(package, tmp_path).items()
    }


def test_what_counts_as_a_member(tmp_path: Path) -> None:
    source = (
        "import asyncio\n"
        "import typing\n"
        "from typing import Generic, Protocol as P, TypeVar, overload\n"
        "T = TypeVar('T')\n"
        "class Home(P):\n"
        "    '''Its docstring: not a member.'''\n"
        "    where: str\n"  # 1
        "    beat = 1.0\n"  # 2
        "    @property\n"
        "    def ended(self) -> bool: ...\n"  # 3
        "    @ended.setter\n"
        "    def ended(self, value: bool) -> None: ...\n"  # (the same name)
        "    @overload\n"
        "    def get(self, x: int) -> int: ...\n"  # 4
        "    @overload\n"
        "    def get(self, x: str) -> str: ...\n"  # (the same name)
        "    async def close(self) -> None: ...\n"  # 5
        "    def __call__(self) -> None: ...\n"  # 6
        "class Wider(Home, P):\n"
        "    def more(self) -> None: ...\n"  # its own: 1
        "class Typed(typing.Protocol[T]):\n"
        "    def one(self) -> T: ...\n"
        "class Callbacks(asyncio.Protocol):\n"  # a transport's: not counted
        "    def data_received(self, data: bytes) -> None: ...\n"
        "class Plain(Generic[T]):\n"
        "    def one(self) -> T: ...\n"
    )
    assert _count(source, tmp_path) == {"Home": 6, "Wider": 1, "Typed": 1}
