"""The library never draws from the random module's shared generator.

That generator is the application's: a program that seeds it for a reproducible run
(a simulation, a test with a fixed seed, Hypothesis, which checks that nothing
else draws from it while it generates data) must not see a reconnect's jitter or a
backoff move its sequence. A module that needs chance keeps its own
``random.Random()`` (``backends/_link.py``'s reconnect jitter, ``client/_leader.py``'s
backoff, ``backends/postgres/_calls.py``'s pause). Read with :mod:`ast`: a use of
``random.<name>`` other than the classes, or ``from random import <function>``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tenure
from tests.parsed import syntax_tree

SRC = Path(tenure.__file__).resolve().parent
#: What may be taken from the random module: its generator classes.
CLASSES = frozenset({"Random", "SystemRandom"})


def shared_draws(tree: ast.AST) -> list[tuple[int, str]]:
    """Each use of the shared generator in ``tree``: (line, what)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "random" and node.attr not in CLASSES:
                found.append((node.lineno, f"random.{node.attr}"))
        elif isinstance(node, ast.ImportFrom) and node.module == "random":
            found += [
                (node.lineno, f"from random import {a.name}")
                for a in node.names
                if a.name not in CLASSES
            ]
    return found


def test_no_module_of_the_library_draws_from_the_shared_generator() -> None:
    found = {
        f"{path.relative_to(SRC)}:{line}": what
        for path in sorted(SRC.rglob("*.py"))
        for line, what in shared_draws(syntax_tree(path))
    }
    assert not found, f"the random module's shared generator is the application's: {found}"


def test_what_counts_as_a_draw() -> None:
    code = (
        "import random\nx = random.uniform(0, 1)\nr = random.Random(3)\nfrom random import choice\n"
    )
    assert sorted(shared_draws(ast.parse(code))) == [
        (2, "random.uniform"),
        (4, "from random import choice"),
    ]
