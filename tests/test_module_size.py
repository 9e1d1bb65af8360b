"""CONTRIBUTING's style rule "core modules under ~400 lines", held: every module under
``src/tenure/_core`` has fewer than :data:`CORE_LINES` lines.

A module that grows past it is split by responsibility (as ``values`` gave a node's
settings to ``node_settings`` and ``semaphore`` gave its holders' quota charges and
descriptions to ``holders``), not given an exception here.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "src" / "tenure" / "_core"

#: The most lines a module of the engine may have (it must stay below it).
CORE_LINES = 400


def test_every_core_module_is_under_400_lines() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for path in sorted(CORE.rglob("*.py"))
    }
    assert len(sizes) > 40  # (the walk found the engine's modules, handlers/ and commands/)
    over = {path: lines for path, lines in sizes.items() if lines >= CORE_LINES}
    assert not over, f"core modules of {CORE_LINES} lines or more (split them): {over}"
