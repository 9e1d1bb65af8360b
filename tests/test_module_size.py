"""CONTRIBUTING's style rule "small modules", held: no module of ``src/tenure`` has more
than :data:`MODULE_LINES` lines (issue 49's goal), and every module under
``src/tenure/_core`` has fewer than :data:`CORE_LINES` (the engine's own, stricter).

A module that grows past either is split by responsibility (as ``values`` gave a
node's settings to ``node_settings``, ``semaphore`` gave its holders' quota charges
and descriptions to ``holders``, and ``_protocol/wire`` its field types to
``wire_fields``), not given an exception here.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "tenure"
CORE = SOURCE / "_core"

#: The most lines a module of the engine may have (it must stay below it).
CORE_LINES = 400
#: The most lines any module of ``src/tenure`` may have (issue 49: "no module over 500").
MODULE_LINES = 500


def sizes(under: Path) -> dict[str, int]:
    """Each Python module under ``under`` (its path from the checkout), by lines."""
    return {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for path in sorted(under.rglob("*.py"))
    }


def test_every_core_module_is_under_400_lines() -> None:
    found = sizes(CORE)
    assert len(found) > 40  # (the walk found the engine's modules, handlers/ and commands/)
    over = {path: lines for path, lines in found.items() if lines >= CORE_LINES}
    assert not over, f"core modules of {CORE_LINES} lines or more (split them): {over}"


def test_no_module_of_src_is_over_500_lines() -> None:
    found = sizes(SOURCE)
    assert len(found) > 400  # (every package's modules, not one of them)
    assert "src/tenure/_protocol/wire.py" in found
    over = {path: lines for path, lines in found.items() if lines > MODULE_LINES}
    assert not over, (
        f"modules of more than {MODULE_LINES} lines (split them by responsibility): {over}"
    )
