"""One name, one meaning: no two modules of ``src/tenure`` define a class of the same name,
unless CONTRIBUTING.md's glossary allows it.

Two classes of one name in two modules are either one concept seen at two layers (the
engine's ``Session`` and the client's) or two concepts sharing a word (four classes
called ``Connection``, two ``LeaseKeeper``\\ s meaning opposite things): the second
kind is renamed, so that each name says what it is; the first is declared, with why,
in the ```` ```names ```` block under CONTRIBUTING.md's glossary ("Names: one meaning
each"). This test reads every class definition of every module with :mod:`ast`
(public and private, at module level and nested in a class or a function), groups
them by name, and fails on a name defined in two or more modules that no line of the
block allows, naming each definition.

The block (its own comment says the syntax) holds two kinds of line:

* ``NAME  MODULE MODULE ...  -- why``: the class ``NAME`` may be defined in exactly
  these modules (dotted, under ``tenure``); a line whose modules differ from those
  that define it fails, and so does one no longer needed (a stale line, as
  ``tests/test_layers.py`` fails on one): the block only shrinks as names get better;
* ``twins  FIRST SECOND  -- why``: a rule stated once: a class of package ``FIRST``
  named as a class of package ``SECOND`` (each package defining that name in exactly
  one module) is its twin and needs no line (the sync face's classes, each the
  blocking twin of the asyncio client's class of the same name). A rule no name uses
  is stale too.

A line may go on over the lines below it, each indented.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests.imports import SOURCE, modules
from tests.parsed import syntax_tree

CONTRIBUTING = SOURCE.parent.parent / "CONTRIBUTING.md"
#: The first word of a rule line (a class is never named in lower case here).
TWINS = "twins"
#: Where each class name is defined: name -> module -> its definitions there, each
#: ``path:line`` (the path from the package's parent directory).
Definitions = dict[str, dict[str, list[str]]]


@dataclass(frozen=True, slots=True)
class Allowance:
    """One line of the block: ``name`` (a class, or :data:`TWINS` for the rule) in
    ``modules`` (for the rule: its two packages), because ``why``."""

    name: str
    modules: tuple[str, ...]
    why: str
    number: int  # the line in CONTRIBUTING.md

    @property
    def rule(self) -> bool:
        """Whether it is the twins rule, not a line about one name."""
        return self.name == TWINS


def parse(text: str, first_line: int = 1) -> list[Allowance]:
    """The lines of a ``names`` block's text (comments and blank lines skipped; an
    indented line goes on with the line above it)."""
    logical: list[tuple[int, str]] = []  # (its first line's number, its text)
    for number, raw in enumerate(text.splitlines(), first_line):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        if not raw[0].isspace():
            logical.append((number, raw.strip()))
        elif logical:
            logical[-1] = (logical[-1][0], f"{logical[-1][1]} {raw.strip()}")
        else:
            raise ValueError(f"CONTRIBUTING.md:{number}: an indented line with no line above")
    return [_allowance(number, line) for number, line in logical]


def _allowance(number: int, line: str) -> Allowance:
    head, dashes, why = line.partition(" -- ")
    words = head.split()
    if not dashes or not why.strip():
        raise ValueError(f"CONTRIBUTING.md:{number}: no ' -- why' in {line!r}")
    if len(words) < 3 or not words[0].isidentifier():
        raise ValueError(f"CONTRIBUTING.md:{number}: a name and two modules or more, not {head!r}")
    if words[0] == TWINS and len(words) != 3:
        raise ValueError(f"CONTRIBUTING.md:{number}: the twins rule names two packages")
    if not all(all(part.isidentifier() for part in word.split(".")) for word in words[1:]):
        raise ValueError(f"CONTRIBUTING.md:{number}: not dotted module names: {words[1:]}")
    return Allowance(words[0], tuple(words[1:]), why.strip(), number)


def block(path: Path = CONTRIBUTING) -> list[Allowance]:
    """The allowances of CONTRIBUTING.md: its one ```` ```names ```` block."""
    lines = path.read_text().splitlines()
    starts = [index for index, line in enumerate(lines) if line.strip() == "```names"]
    assert len(starts) == 1, f"{path.name} must have one ```names block, has {len(starts)}"
    start = starts[0] + 1
    end = lines.index("```", start)
    return parse("\n".join(lines[start:end]), start + 1)


def definitions(package: Path) -> Definitions:
    """Every class defined under ``package``, by name: the modules and lines of each."""
    found: Definitions = defaultdict(lambda: defaultdict(list))
    for name, path in modules(package).items():
        where = path.relative_to(package.parent).as_posix()
        for node in ast.walk(syntax_tree(path)):
            if isinstance(node, ast.ClassDef):
                found[node.name][name].append(f"{where}:{node.lineno}")
    return {name: dict(where) for name, where in found.items()}


def within(module: str, package: str) -> bool:
    """Whether ``module`` is ``package`` or under it."""
    return module == package or module.startswith(package + ".")


def twin(rule: Allowance, defined: set[str]) -> str | None:
    """The module of ``defined`` (a name's) that ``rule`` makes a twin, if any: the one
    of its first package, when its second package also defines the name once."""
    first, second = rule.modules
    ones = [module for module in defined if within(module, first)]
    namesakes = [module for module in defined if within(module, second)]
    return ones[0] if len(ones) == 1 and len(namesakes) == 1 else None


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the block makes of the classes: ``unallowed``, a line per name that two or
    more modules define without a line of the block; ``stale``, a line per allowance
    that does not fit (a line not needed, or naming other modules than the name's)."""

    unallowed: list[str]
    stale: list[str]


def judge(found: Definitions, allowances: list[Allowance]) -> Verdict:
    """Each name of ``found`` (a package's classes) against ``allowances``."""
    rules = [allowance for allowance in allowances if allowance.rule]
    lines = {allowance.name: allowance for allowance in allowances if not allowance.rule}
    used: set[int] = set()
    needed: dict[str, set[str]] = {}
    for name, where in found.items():
        shared = set(where)
        for rule in rules:
            if (module := twin(rule, shared)) is not None:
                shared.discard(module)
                used.add(rule.number)
        if len(shared) > 1:
            needed[name] = shared
    unallowed = [
        f"{name}: "
        + ", ".join(place for module in sorted(found[name]) for place in found[name][module])
        for name in sorted(needed)
        if name not in lines
    ]
    stale = [
        f"line {rule.number}: the twins rule {' '.join(rule.modules)} is used by no name"
        for rule in rules
        if rule.number not in used
    ]
    for name, line in sorted(lines.items(), key=lambda item: item[1].number):
        given = set(line.modules)
        if name not in needed:
            defining = ", ".join(sorted(found.get(name, {}))) or "no module"
            stale.append(f"line {line.number}: {name} is no longer shared (defined in {defining})")
        elif given != needed[name]:
            stale.append(
                f"line {line.number}: {name} is defined in {sorted(needed[name])},"
                f" the line names {sorted(given)}"
            )
    return Verdict(unallowed, stale)


# -- the glossary's allowances, on src/tenure --------------------------------------------


@cache
def source_verdict() -> Verdict:
    """The block's verdict on ``src/tenure`` (read once: both tests read it)."""
    allowances = block()
    assert len(allowances) > 10  # (the block was read)
    return judge(definitions(SOURCE), allowances)


def test_no_two_modules_define_a_class_of_one_name() -> None:
    found = source_verdict().unallowed
    assert not found, (
        f"{len(found)} class name(s) defined in two modules or more with no line in "
        "CONTRIBUTING.md's ```names block (one name, one meaning: \"Names: one meaning "
        'each"); rename one so that its name says what it is, or, when both are one '
        "concept at two layers, add a line with why:\n" + "\n".join(found)
    )


def test_every_allowance_is_needed() -> None:
    found = source_verdict().stale
    assert not found, (
        "stale lines in CONTRIBUTING.md's ```names block (a rename made a line "
        "unneeded, or moved a class: correct or delete the line):\n" + "\n".join(found)
    )


def test_each_name_has_one_line() -> None:
    names = [allowance.name for allowance in block() if not allowance.rule]
    assert sorted(names) == sorted(set(names)), "a name with two lines in the ```names block"


def test_every_module_named_exists() -> None:
    known = set(modules(SOURCE))
    missing = [
        f"line {allowance.number}: {module}"
        for allowance in block()
        for module in allowance.modules
        if module not in known
    ]
    assert not missing, "the ```names block names modules that are gone:\n" + "\n".join(missing)


# -- the reading, on a package written for it --------------------------------------------

NAMES = """
# a comment
twins  pkg.blocking pkg.aio  -- the blocking twin
Thing  pkg.low pkg.aio.thing  -- one thing
  at two layers
Gone   pkg.low pkg.aio.thing  -- renamed since
"""


def write(root: Path, files: dict[str, str]) -> Path:
    """The package ``pkg`` under ``root`` with ``files`` (path -> source); ``root``."""
    for name, source in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root


def test_the_block_is_read() -> None:
    twins, thing, gone = parse(NAMES)
    assert (twins.rule, twins.modules) == (True, ("pkg.blocking", "pkg.aio"))
    assert (thing.name, thing.modules, thing.why) == (
        "Thing",
        ("pkg.low", "pkg.aio.thing"),
        "one thing at two layers",
    )
    assert (thing.number, gone.number) == (4, 6)


@pytest.mark.parametrize(
    "line",
    [
        "Thing  pkg.low pkg.aio.thing",  # no why
        "Thing  pkg.low  -- alone",  # one module
        "twins  pkg.a pkg.b pkg.c  -- three",
        "Thing  pkg/low pkg.aio  -- a path",
        "  -- an indented first line",
    ],
)
def test_an_unreadable_line_is_refused(line: str) -> None:
    with pytest.raises(ValueError, match=r"CONTRIBUTING\.md:1: "):
        parse(line)


def test_each_kind_of_finding(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "__init__.py": "",
            "low.py": "class Thing: ...\nclass Shared: ...\nclass Lone: ...\n",
            "aio/__init__.py": "",
            "aio/thing.py": "class Thing: ...\nclass Handle: ...\n",
            "aio/other.py": "def f():\n    class Shared: ...\nclass Thing: ...\n",  # nested too
            "blocking/__init__.py": "",
            "blocking/thing.py": "class Handle: ...\n",  # aio.thing's twin
        },
    )
    found = judge(definitions(root / "pkg"), parse(NAMES))
    assert found.unallowed == ["Shared: pkg/aio/other.py:2, pkg/low.py:2"]
    assert found.stale == [
        "line 4: Thing is defined in ['pkg.aio.other', 'pkg.aio.thing', 'pkg.low'],"
        " the line names ['pkg.aio.thing', 'pkg.low']",
        "line 6: Gone is no longer shared (defined in no module)",
    ]


def test_a_twin_needs_its_namesake_once(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "__init__.py": "",
            "aio/__init__.py": "",
            "aio/a.py": "class Handle: ...\nclass Two: ...\n",
            "aio/b.py": "class Two: ...\n",  # the aio package defines Two twice
            "blocking/__init__.py": "",
            "blocking/a.py": "class Handle: ...\nclass Two: ...\nclass Lone: ...\n",
            "blocking/b.py": "class Lone: ...\n",  # no namesake in aio: not a twin
        },
    )
    rule = "twins  pkg.blocking pkg.aio  -- the blocking twin\n"
    found = judge(definitions(root / "pkg"), parse(rule))
    assert found.unallowed == [
        "Lone: pkg/blocking/a.py:3, pkg/blocking/b.py:1",
        "Two: pkg/aio/a.py:2, pkg/aio/b.py:1, pkg/blocking/a.py:2",
    ]
    assert found.stale == []  # (Handle used the rule)
    unused = judge(definitions(root / "pkg"), parse("\n" + rule.replace("aio", "low")))
    assert unused.stale == ["line 2: the twins rule pkg.blocking pkg.low is used by no name"]
