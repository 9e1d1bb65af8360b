"""CONTRIBUTING.md's layout table names every module of ``src/tenure``, and only modules
that exist.

The table ("Layout and the rules of each layer") has a row per package: its path in
the first cell (``src/tenure/backends/redis/`` and ``postgres/``: a path that does not
start with ``src/`` is a sibling of the one before it), then what it is, naming its
modules in backticks (```_store` (...)``, ```_session.py```). A row also covers a
subpackage its second cell names as a path ending in ``/`` (```handlers/```,
```compat/dflockd/```): that subpackage's modules are named in the same cell.

The rules checked here:

* every package of ``src/tenure`` has a row (or is covered by one), and every module
  of it is named in that row's second cell, inside backticks (its name, with or
  without ``.py``);
* every ``*.py`` and every path ending in ``/`` the second cell names in backticks
  exists among that row's packages and their subpackages.

So a new module is added to the map with what it is, and a renamed or removed one
leaves no stale name behind. The conformance kit's test modules (``test_*.py`` of
``testing/conformance/``) are the one exception: each is named for what it tests,
pytest finds them by that name, and the row says what they are together.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src" / "tenure"
CONTRIBUTING = ROOT / "CONTRIBUTING.md"

#: Modules that need not be named one by one: by package, the prefix of their names.
NOT_LISTED: dict[str, str] = {
    # Test modules, each named for what it tests (the row says what they are together).
    "testing/conformance": "test_",
}

_TICKED = re.compile(r"`([^`]+)`")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Row:
    """One row of the layout table: the packages it is about, and what it says."""

    packages: tuple[str, ...]  # relative to src/tenure, "" for the top package
    text: str  # the second cell
    line: int


def rows() -> list[Row]:
    """The layout table's rows about ``src/tenure``, in order."""
    lines = CONTRIBUTING.read_text().splitlines()
    start = lines.index("## Layout and the rules of each layer")
    found = []
    for number, line in enumerate(lines[start:], start + 1):
        if line.startswith("## ") and number > start + 1:
            break
        cells = line.split(" | ")
        if not line.startswith("| `src/tenure") or len(cells) < 3:
            continue
        paths = _TICKED.findall(cells[0])
        first = paths[0].removeprefix("src/tenure").strip("/")
        packages = [first]
        for other in paths[1:]:
            parent = first.rpartition("/")[0]
            packages.append(f"{parent}/{other.strip('/')}".strip("/"))
        found.append(Row(tuple(packages), cells[1], number))
    return found


def named(text: str) -> set[str]:
    """Every word inside backticks in ``text`` (``_store.py`` gives ``_store``, ``py``)."""
    return {word for ticked in _TICKED.findall(text) for word in _WORD.findall(ticked)}


def packages() -> list[str]:
    """Every package of src/tenure (relative, "" for the top one), and every directory
    of modules."""
    return sorted(
        "" if path.parent == SOURCE else str(path.parent.relative_to(SOURCE))
        for path in SOURCE.rglob("__init__.py")
    )


def modules_of(package: str) -> list[str]:
    """The modules directly in ``package`` (not ``__init__``), by stem."""
    skip = NOT_LISTED.get(package)
    return sorted(
        path.stem
        for path in (SOURCE / package).glob("*.py")
        if path.stem != "__init__" and not (skip and path.stem.startswith(skip))
    )


def covered() -> dict[str, Row]:
    """Which row covers each package: its own, or the row that names it as a path."""
    by_package: dict[str, Row] = {}
    for row in rows():
        for package in row.packages:
            by_package[package] = row
        for ticked in _TICKED.findall(row.text):
            if not ticked.endswith("/"):
                continue
            for base in row.packages:
                for candidate in (f"{base}/{ticked}".strip("/"), ticked.strip("/")):
                    if (SOURCE / candidate / "__init__.py").exists():
                        by_package.setdefault(candidate, row)
    return by_package


def test_the_table_has_rows() -> None:
    found = rows()
    assert len(found) > 10
    assert all((SOURCE / package).is_dir() for row in found for package in row.packages), [
        row.packages for row in found
    ]


def test_every_package_has_a_row() -> None:
    by_package = covered()
    missing = [
        package or "src/tenure itself" for package in packages() if package not in by_package
    ]
    assert not missing, f"packages with no row in CONTRIBUTING.md's layout table: {missing}"


def test_every_module_is_named_in_its_packages_row() -> None:
    by_package = covered()
    unnamed = []
    for package in packages():
        row = by_package.get(package)
        if row is None:
            continue  # (test_every_package_has_a_row says so)
        words = named(row.text)
        unnamed += [
            f"{package}/{stem}".lstrip("/") for stem in modules_of(package) if stem not in words
        ]
    assert not unnamed, (
        "modules that CONTRIBUTING.md's layout table does not name (in backticks, in "
        f"their package's row, with what they are): {unnamed}"
    )


def test_every_file_the_table_names_exists() -> None:
    by_row: dict[int, list[str]] = {}
    for package, row in covered().items():
        by_row.setdefault(row.line, []).append(package)
    stale = []
    for row in rows():
        places = [SOURCE / place for place in by_row[row.line]]
        for ticked in _TICKED.findall(row.text):
            if "://" in ticked or ticked.startswith(("tests/", "docs/", "tools/")):
                continue  # (a URL scheme; a file outside src/tenure)
            if ticked.endswith(".py"):
                found = any((place / ticked).is_file() for place in places)
            elif ticked.endswith("/"):
                found = (SOURCE / ticked).is_dir() or any(
                    (place / ticked).is_dir() for place in places
                )
            else:
                continue
            if not found:
                stale.append(f"line {row.line}: `{ticked}`")
    assert not stale, f"names in CONTRIBUTING.md's layout table that do not exist: {stale}"
