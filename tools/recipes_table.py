"""docs/recipes.md's table of which backend has which recipe, made from the kit's results.

The conformance kit runs each recipe's module on every backend (``memory``,
``tenure``, ``tenure-cluster``, ``etcd``, ``redis``, ``postgres``: the test ids'
parameter). A run's JUnit XML says, for each module and backend, how many tests
passed, failed, or were skipped because the backend does not declare a capability
the test requires (the kit's skip message names it). This tool turns that into the
table between the markers of docs/recipes.md::

    python -m tools.recipes_table --junit results.xml          # rewrite the table
    python -m tools.recipes_table --junit results.xml --check  # exit 1 if it differs

``scripts/test`` (CI's command) writes the XML of its full run and checks the table
with it, so the table is what the last run of the kit found, not what someone typed.
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from tenure.client._recipes import RECIPES as REGISTRY

#: The recipes (their conformance module, the row's name), in the table's order: the
#: recipe registry's lines that have a row (tenure.client._recipes).
RECIPES: Final = tuple((recipe.kit, recipe.row) for recipe in REGISTRY if recipe.row is not None)
#: The backends, as the kit's test ids name them, in the table's order.
BACKENDS: Final = ("memory", "tenure", "tenure-cluster", "etcd", "redis", "postgres")
BEGIN: Final = "<!-- recipes-table: made by tools/recipes_table.py from a run of the kit -->"
END: Final = "<!-- /recipes-table -->"
_CAPABILITY: Final = re.compile(r"does not declare the capabilit(?:y|ies) ([\w, ]+)")
_ID: Final = re.compile(r"\[([\w-]+)\]$")
#: The kit's package, as a test's classname starts (run from the repo or installed).
_KIT: Final = re.compile(r"(^|\.)tenure\.testing\.conformance$")


@dataclass
class Cell:
    """What one module's tests did on one backend."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0  # for want of a capability
    lacking: set[str] = field(default_factory=set)  # the capabilities those skips named

    def text(self) -> str:
        """The table's cell: failures first, then what the backend lacks, then yes."""
        if self.failed:
            return f"**fails** ({self.failed} of {self.failed + self.passed} tests)"
        if self.lacking:
            return (
                f"no: lacks {', '.join(sorted(self.lacking))} "
                f"({self.skipped} skipped, {self.passed} passed)"
            )
        return f"yes ({self.passed} passed)" if self.passed else "not run"


def cells(junit: Path) -> dict[tuple[str, str], Cell]:
    """(module, backend) -> Cell, from a JUnit XML of a run of the kit."""
    found: dict[tuple[str, str], Cell] = defaultdict(Cell)
    modules = {module for module, _ in RECIPES}
    for case in ET.parse(junit).getroot().iter("testcase"):
        package, _, module = case.get("classname", "").rpartition(".")
        backend = _ID.search(case.get("name", ""))
        if (
            not _KIT.search(package)  # (tests/sync/test_lead.py is no kit module)
            or module not in modules
            or backend is None
            or backend.group(1) not in BACKENDS
        ):
            continue
        cell = found[module, backend.group(1)]
        skipped = case.find("skipped")
        if case.find("failure") is not None or case.find("error") is not None:
            cell.failed += 1
        elif skipped is not None:
            lacking = _CAPABILITY.search(skipped.get("message", ""))
            if lacking:  # (other skips: the kit cannot fake that backend's time...)
                cell.skipped += 1
                cell.lacking.update(c.strip() for c in lacking.group(1).split(","))
        else:
            cell.passed += 1
    return found


def table(found: dict[tuple[str, str], Cell]) -> str:
    """The markdown table, between its markers."""
    lines = [
        BEGIN,
        "",
        "| recipe | conformance module | " + " | ".join(BACKENDS) + " |",
        "| --- | --- |" + " --- |" * len(BACKENDS),
    ]
    for module, recipe in RECIPES:
        row = [found.get((module, backend), Cell()).text() for backend in BACKENDS]
        lines.append(f"| {recipe} | `{module}.py` | " + " | ".join(row) + " |")
    return "\n".join([*lines, "", END])


def rewritten(doc: str, made: str) -> str:
    """``doc`` with the text between the markers replaced by ``made``."""
    start, end = doc.find(BEGIN), doc.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the doc has no {BEGIN!r} ... {END!r} markers")
    return doc[:start] + made + doc[end + len(END) :]


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or with --check, compare) the table in docs/recipes.md."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--junit", type=Path, required=True, help="JUnit XML of a kit run")
    parser.add_argument("--doc", type=Path, default=Path("docs/recipes.md"))
    parser.add_argument("--check", action="store_true", help="exit 1 if the doc differs")
    args = parser.parse_args(argv)
    doc = args.doc.read_text()
    new = rewritten(doc, table(cells(args.junit)))
    if args.check:
        if new != doc:
            print(
                f"{args.doc}: the recipes table differs from what this run of the kit "
                "found; run: python -m tools.recipes_table --junit "
                f"{args.junit}",
                file=sys.stderr,
            )
            return 1
        return 0
    args.doc.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
