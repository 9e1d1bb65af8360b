"""Each layer rule is stated where a reader starts: in the docstring of what it governs.

CONTRIBUTING.md's ```` ```layers ```` block is the rules' one source
(``tests/test_layers.py`` holds every import to it). A newcomer opens a package's
``__init__.py`` or a module, not the block, so each line of it is also stated, in
words made from the line, at the end of the docstring of what it is about: a
package's line in its ``__init__.py`` ("Layer: its modules may import ..."), a
module's line in that module ("Layer: this module may import ...", or "may also
import ..." for a line that adds to its package's). This test fails on a statement
missing or out of date, and says the words to write; ``python -m tests.test_layers_stated``
writes them itself (after the block changed, say).
"""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

from tests.imports import SOURCE
from tests.parsed import syntax_tree
from tests.test_layers import Entry, Line, block

#: How a statement starts (what the test looks for in a docstring).
OPENING = "Layer (CONTRIBUTING.md):"
#: Where a statement is wrapped in a docstring.
WIDTH = 88


def governed(line: Line) -> tuple[Path, bool]:
    """The file whose docstring states ``line``, and whether the line is its package's
    (about every module under it) rather than that module's own."""
    parts = line.key.removesuffix(".__init__").split(".")
    folder = SOURCE.parent.joinpath(*parts)
    if folder.is_dir():
        return folder / "__init__.py", not line.key.endswith(".__init__")
    return folder.with_suffix(".py"), False


def words(entry: Entry) -> str:
    """One entry in words (without its "never")."""
    if entry.name == "*":
        return "anything"
    return f"{entry.name} ({entry.qualifier})" if entry.qualifier else entry.name


def listed(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def statement(line: Line) -> str:
    """What the docstring says of ``line``, on one line (it may be wrapped there)."""
    _, package = governed(line)
    allowed = [words(entry) for entry in line.entries if not entry.never]
    never = [words(entry) for entry in line.entries if entry.never]
    if line.adds:
        said = f"this module may also import {listed(allowed)}"
    elif allowed == ["anything"]:
        said = "this module may import anything"
    else:
        mine = ["each other"] if package else []
        errors = [] if line.key == "tenure.errors" else ["tenure.errors"]
        who = "its modules" if package else "this module"
        names = mine + allowed + errors
        said = f"{who} may import {listed(names) if names else 'nothing of tenure'}"
    if never:
        said += f"; never {listed(never).replace(' and ', ' or ')}"
    return f"{OPENING} {said}."


def docstring(path: Path) -> str:
    """``path``'s module docstring, its whitespace folded (as the test compares it)."""
    return " ".join((ast.get_docstring(syntax_tree(path)) or "").split())


def missing() -> dict[Path, list[str]]:
    """The statements each file's docstring lacks, by file."""
    found: dict[Path, list[str]] = {}
    for line in block():
        path, _ = governed(line)
        said = statement(line)
        if said not in docstring(path):
            found.setdefault(path, []).append(said)
    return found


def stale() -> list[str]:
    """Files whose docstrings state more rules than the block gives them (a rule
    removed, or moved to another file)."""
    wanted: dict[Path, int] = {}
    for line in block():
        path, _ = governed(line)
        wanted[path] = wanted.get(path, 0) + 1
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        stated = docstring(path).count(OPENING)
        if stated > wanted.get(path, 0):
            where = path.relative_to(SOURCE.parent)
            found.append(f"{where}: {stated} stated, {wanted.get(path, 0)} in the block")
    return found


def test_each_rule_is_stated_in_the_docstring_it_governs() -> None:
    lacking = missing()
    assert not lacking, (
        "docstrings that do not state their layer rule (write these words at their "
        "end, or run python -m tests.test_layers_stated):\n"
        + "\n".join(
            f"{path.relative_to(SOURCE.parent)}: {said}"
            for path, saids in sorted(lacking.items())
            for said in saids
        )
    )


def test_no_statement_outlives_its_rule() -> None:
    found = stale()
    assert not found, "layer statements no line of the block makes any more:\n" + "\n".join(found)


def write() -> None:
    """Add each missing statement at the end of its docstring, wrapped."""
    for path, saids in missing().items():
        source = path.read_text()
        node = ast.parse(source).body[0]
        assert isinstance(node, ast.Expr)
        assert node.end_lineno is not None
        lines = source.splitlines(keepends=True)
        last = node.end_lineno - 1  # the docstring's closing line (0-based)
        closing = lines[last]
        body, quote = closing.rstrip()[:-3], closing.rstrip()[-3:]
        added = "\n".join(textwrap.fill(said, WIDTH) + "\n" for said in saids)
        if body.strip():  # the text ends on the closing line: close it after the words
            lines[last] = body.rstrip() + "\n\n" + added + quote + "\n"
        else:
            lines[last] = "\n" + added + closing
        path.write_text("".join(lines))
        print(path.relative_to(SOURCE.parent), file=sys.stderr)


if __name__ == "__main__":
    write()
