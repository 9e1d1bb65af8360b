"""CONTRIBUTING.md's layer rules, as data: which package of ``src/tenure`` may import which.

The rules are the ```` ```layers ```` block under CONTRIBUTING.md's layout table, one
line per package (or per module, for a finer rule): the package, then what its modules
may import of tenure besides their own modules and ``tenure.errors`` (the one exception
tree, which every layer may raise). The block's own comment says the syntax; in short:

* an entry covers a module and every module under it; ``pkg.__init__`` only the
  package's own module (``tenure.client.__init__``: ``from tenure.client import X``,
  not ``tenure.client._lease``); ``*`` anything;
* ``-name``: never that module (nor any under it), even one of the line's own;
* ``name(lazily)``: only an import that does not run when the module is imported
  (inside a function, or under ``if TYPE_CHECKING:``); ``name(types)``: only under
  ``if TYPE_CHECKING:``;
* a module's rule is its most specific line; a line whose list starts with ``+``
  adds to the next line up the tree (whose "own modules" it shares), so a finer rule
  for one module is one short line.

Every import of every module is read with :mod:`ast` (``tests/imports.py``, the reading
``tests/test_import_graph.py`` shares, which also forbids circles: a rule the table
cannot say): at module level, inside functions, and under ``TYPE_CHECKING``. An import
for types only is still an import a layer makes: allowed only where the line allows it,
with or without ``(types)``.

The test fails on an import its module's rule does not allow (naming the file, the
line and the rule), on a module no line covers (a new package gets its line), and on
a line or an entry that names no module (a stale rule after a rename).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.imports import (
    AT_IMPORT,
    FOR_TYPES,
    IN_FUNCTION,
    SOURCE,
    Import,
    imports_of,
    modules,
)

CONTRIBUTING = SOURCE.parent.parent / "CONTRIBUTING.md"
#: What every module may import, whatever its line says.
EVERYONE = ("tenure.errors",)
QUALIFIERS = {
    "": (AT_IMPORT, IN_FUNCTION, FOR_TYPES),
    "lazily": (IN_FUNCTION, FOR_TYPES),
    "types": (FOR_TYPES,),
}
_ENTRY = re.compile(r"^(?P<never>-)?(?P<name>\*|[A-Za-z_][\w.]*)(?:\((?P<qualifier>\w+)\))?$")


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a line: a module or package it allows (or, ``never``, forbids)."""

    name: str
    never: bool = False
    qualifier: str = ""

    @property
    def exact(self) -> bool:
        """``pkg.__init__``: the package's own module only."""
        return self.name.endswith(".__init__")

    @property
    def module(self) -> str:
        """The module it is about (``pkg`` for ``pkg.__init__``)."""
        return self.name.removesuffix(".__init__")

    def covers(self, target: str) -> bool:
        if self.name == "*":
            return True
        if self.exact:
            return target == self.module
        return target == self.name or target.startswith(self.name + ".")


@dataclass(frozen=True, slots=True)
class Line:
    """One line of the block: ``key`` (a package or module) and its entries."""

    key: str
    entries: tuple[Entry, ...]
    adds: bool  # "+": adds to the next line up the tree
    number: int  # the line in CONTRIBUTING.md

    def covers(self, module: str) -> bool:
        """Whether this line is about ``module`` (its key, or a package holding it)."""
        return Entry(self.key).covers(module)

    @property
    def depth(self) -> tuple[int, bool]:
        """How specific it is: deeper first; ``pkg.__init__`` before ``pkg``."""
        exact = self.key.endswith(".__init__")
        return self.key.removesuffix(".__init__").count("."), exact


def parse(text: str, first_line: int = 1) -> list[Line]:
    """The lines of a ``layers`` block's text (comments and blank lines skipped)."""
    found: list[Line] = []
    for number, raw in enumerate(text.splitlines(), first_line):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        key, rest = words[0], words[1:]
        adds = bool(rest) and rest[0] == "+"
        entries = []
        for word in rest[1:] if adds else rest:
            match = _ENTRY.match(word)
            qualifier = (match and match["qualifier"]) or ""
            if match is None or qualifier not in QUALIFIERS:
                raise ValueError(f"CONTRIBUTING.md:{number}: cannot read the entry {word!r}")
            entries.append(Entry(match["name"], bool(match["never"]), qualifier))
        found.append(Line(key, tuple(entries), adds, number))
    return found


def block(path: Path = CONTRIBUTING) -> list[Line]:
    """The layer rules of CONTRIBUTING.md: its one ```` ```layers ```` block."""
    lines = path.read_text().splitlines()
    starts = [index for index, line in enumerate(lines) if line.strip() == "```layers"]
    assert len(starts) == 1, f"{path.name} must have one ```layers block, has {len(starts)}"
    start = starts[0] + 1
    end = lines.index("```", start)
    return parse("\n".join(lines[start:end]), start + 1)


def chain(rules: list[Line], module: str) -> list[Line]:
    """The lines that make ``module``'s rule, most specific first (empty: none)."""
    about = sorted(
        (line for line in rules if line.covers(module)), key=lambda line: line.depth, reverse=True
    )
    found: list[Line] = []
    for line in about:
        found.append(line)
        if not line.adds:
            return found
    return found  # (a "+" line with nothing above: refused by test_every_line_is_sound)


def own(line: Line, target: str) -> bool:
    """Whether ``target`` is one of the line's own modules (under its key)."""
    return Entry(line.key).covers(target)


def verdict(rules: list[Line], imported: Import) -> str | None:
    """Why ``imported`` breaks its module's rule; None when the rule allows it."""
    if imported.target in EVERYONE or imported.target == imported.source:
        return None
    lines = chain(rules, imported.source)
    if not lines:
        return "no line of the rules covers this module"
    for line in lines:
        matching = [entry for entry in line.entries if entry.covers(imported.target)]
        if not matching:
            continue
        # The most specific entry decides; on a tie, "never" wins.
        entry = max(matching, key=lambda entry: (len(entry.module), entry.never))
        where = f"line {line.number}: {line.key}"
        if entry.never:
            return f"never {entry.name} ({where})"
        if imported.where not in QUALIFIERS[entry.qualifier]:
            return f"{entry.name} only {entry.qualifier}, not {imported.where} ({where})"
        return None
    if own(lines[-1], imported.target):
        return None
    return f"not in the rule of {lines[0].key} (line {lines[0].number})"


def breaches(rules: list[Line], package: Path) -> list[str]:
    """Every import under ``package`` that its module's rule does not allow, one line each."""
    known = modules(package)
    found = []
    for name, path in sorted(known.items()):
        for imported in imports_of(name, path, known):
            if (why := verdict(rules, imported)) is not None:
                where = path.relative_to(package.parent).as_posix()
                found.append(f"{where}:{imported.line}: {name} -> {imported.target}: {why}")
    return list(dict.fromkeys(found))  # (``from a import b, c``: one line for both)


# -- the rules, on src/tenure ---------------------------------------------------------


def test_every_import_keeps_its_layer() -> None:
    rules = block()
    assert len(rules) > 20  # (the block was read)
    found = breaches(rules, SOURCE)
    assert not found, (
        f"{len(found)} import(s) break CONTRIBUTING.md's layer rules (its ```layers block); "
        "move the code to the layer that may, declare a narrow protocol, or, when the "
        "rule was wrong, correct the line and the table's prose:\n" + "\n".join(found)
    )


def test_every_module_has_a_rule() -> None:
    rules = block()
    missing = sorted(name for name in modules(SOURCE) if not chain(rules, name))
    assert not missing, (
        "modules no line of CONTRIBUTING.md's ```layers block covers (a new package gets "
        f"its line: what it may import): {missing}"
    )


def test_every_line_is_sound() -> None:
    """Each key and entry names a module that exists; a "+" line has a line above it;
    no key is given twice."""
    rules = block()
    known = set(modules(SOURCE))
    wrong = []
    keys = [line.key for line in rules]
    wrong += [f"{key}: given twice" for key in sorted({k for k in keys if keys.count(k) > 1})]
    for line in rules:
        names = [line.key, *(entry.name for entry in line.entries if entry.name != "*")]
        wrong += [
            f"line {line.number}: {name} is no module"
            for name in names
            if name.removesuffix(".__init__") not in known
        ]
        if line.adds and len(chain(rules, line.key.removesuffix(".__init__"))) < 2:
            wrong.append(f"line {line.number}: '+' but no line above {line.key}")
    assert not wrong, "stale or broken lines in CONTRIBUTING.md's ```layers block:\n" + "\n".join(
        wrong
    )


def test_every_row_of_the_table_has_its_line() -> None:
    """The table's rows (tests/test_layout_table.py reads them) and the block name the
    same packages: a row added or renamed gets its rule."""
    from tests.test_layout_table import rows

    keys = {line.key.removesuffix(".__init__") for line in block()}
    missing = [
        dotted
        for row in rows()
        for package in row.packages
        if (dotted := ".".join(["tenure", *filter(None, package.split("/"))])) not in keys
    ]
    assert not missing, f"rows of the layout table with no line in the ```layers block: {missing}"


# -- the rules' reading, on packages written for it ------------------------------------

RULES = """
pkg.__init__   *
pkg.low
pkg.mid        pkg.low -pkg.mid.secret
pkg.mid.a      + pkg.mid.secret(lazily) pkg.top.__init__(types)
pkg.top        pkg.mid
"""


def write(root: Path, files: dict[str, str]) -> Path:
    """The package ``pkg`` under ``root`` with ``files`` (path -> source); its directory."""
    for name, source in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root / "pkg"


def test_each_kind_of_breach_is_found(tmp_path: Path) -> None:
    package = write(
        tmp_path,
        {
            "__init__.py": "from pkg import top, low\n",  # *: anything
            "low.py": "def f():\n    from pkg import mid\n",  # lazily is still an import
            "mid/__init__.py": "",
            "mid/secret.py": "",
            "mid/a.py": (
                "from typing import TYPE_CHECKING\n"
                "from . import secret\n"  # allowed only lazily
                "from ..top import b\n"  # only the package's own module (types)
                "if TYPE_CHECKING:\n"
                "    from pkg.top import T\n"  # allowed: types, pkg.top itself
                "def g():\n"
                "    from pkg.mid import secret\n"  # allowed: lazily
                "    import pkg.low\n"  # from the line above: allowed
            ),
            "mid/b.py": "import pkg.mid.secret\n",  # never, though its own
            "top/__init__.py": "from pkg.mid import a\nimport pkg.other\n",
            "top/b.py": "from pkg.mid.a import g\nfrom pkg import low\n",  # low: not its
            "other.py": "",  # no line
        },
    )
    found = [line.split(": ", 1)[1] for line in breaches(parse(RULES), package)]
    assert found == [
        "pkg.low -> pkg.mid: not in the rule of pkg.low (line 3)",
        "pkg.mid.a -> pkg.mid.secret: pkg.mid.secret only lazily, not at import"
        " (line 5: pkg.mid.a)",
        "pkg.mid.a -> pkg.top.b: not in the rule of pkg.mid.a (line 5)",
        "pkg.mid.b -> pkg.mid.secret: never pkg.mid.secret (line 4: pkg.mid)",
        "pkg.top -> pkg.other: not in the rule of pkg.top (line 6)",
        "pkg.top.b -> pkg.low: not in the rule of pkg.top (line 6)",
    ]


def test_an_import_for_types_is_read_as_one(tmp_path: Path) -> None:
    package = write(
        tmp_path,
        {
            "__init__.py": "",
            "low.py": "",
            "mid/__init__.py": "",
            "mid/secret.py": "",
            "mid/a.py": (
                "import typing\n"
                "if typing.TYPE_CHECKING:\n"
                "    def f():\n"
                "        from pkg.top import T\n"
                "else:\n"
                "    from pkg.top import T\n"  # runs on import
            ),
            "top/__init__.py": "",
        },
    )
    found = [line.split(": ", 1)[1] for line in breaches(parse(RULES), package)]
    assert found == [
        "pkg.mid.a -> pkg.top: pkg.top.__init__ only types, not at import (line 5: pkg.mid.a)"
    ]


def test_a_module_outside_every_line_is_named(tmp_path: Path) -> None:
    package = write(tmp_path, {"__init__.py": "", "low.py": "", "other.py": "import pkg.low\n"})
    assert [line.split(": ", 1)[1] for line in breaches(parse(RULES), package)] == [
        "pkg.other -> pkg.low: no line of the rules covers this module"
    ]


@pytest.mark.parametrize("word", ["pkg.low(eventually)", "pkg/low", "-*x", "pkg.low("])
def test_an_unreadable_entry_is_refused(word: str) -> None:
    with pytest.raises(ValueError, match="cannot read"):
        parse(f"pkg.mid   pkg.low {word}\n")


def test_an_import_by_name_is_read_as_one(tmp_path: Path) -> None:
    package = write(
        tmp_path,
        {
            "__init__.py": "",
            "low.py": "",
            "mid/__init__.py": "",
            "mid/secret.py": "",
            "mid/a.py": (
                "import importlib\n"
                "def f():\n"
                "    return importlib.import_module('pkg.mid.secret')\n"  # allowed: lazily
                "LOW = __import__('pkg.top', fromlist=['x'])\n"  # runs on import: no
                "NAME = importlib.import_module(name)\n"  # not a literal: not read
            ),
            "top/__init__.py": "",
        },
    )
    assert [line.split(": ", 1)[1] for line in breaches(parse(RULES), package)] == [
        "pkg.mid.a -> pkg.top: pkg.top.__init__ only types, not at import (line 5: pkg.mid.a)"
    ]
