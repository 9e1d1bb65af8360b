"""bench/README.md's "What runs where" names every test file of ``tests/bench/`` under
the tier it runs in, so the text cannot go stale as the old "kept out of the test run"
did: a new file, a removed one or a file moved to another tier fails here."""

from __future__ import annotations

import re
from pathlib import Path

from tests.tiers import markers_of

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "bench" / "README.md"

#: The README's bullet of each tier, by its first words -> whether its files are unit tier.
BULLETS = {"- in the unit tier": True, "- in the service tier": False}


def _named_by_tier() -> dict[bool, set[str]]:
    """The ``test_*.py`` each bullet names, by whether the bullet is the unit tier's."""
    section = README.read_text().split("**What runs where.**", 1)[1]
    section = section.split("\n\n")[1]  # the paragraph's bullets, after its opening
    named: dict[bool, set[str]] = {True: set(), False: set()}
    bullets = re.split(r"^(?=- )", section, flags=re.MULTILINE)
    for bullet in filter(None, bullets):
        unit = next(u for start, u in BULLETS.items() if bullet.startswith(start))
        named[unit] |= set(re.findall(r"`(test_\w+\.py)`", bullet))
    assert all(named.values()), "no bullet of a tier found in bench/README.md"
    return named


def test_every_test_file_of_tests_bench_is_named_under_its_tier() -> None:
    named = _named_by_tier()
    files = {path.name for path in (ROOT / "tests" / "bench").glob("test_*.py")}
    assert named[True] | named[False] == files, "bench/README.md names other files"
    assert not named[True] & named[False], "a file named under both tiers"
    for unit, names in named.items():
        for name in sorted(names):
            markers = markers_of(f"tests/bench/{name}", {})
            assert (not markers) == unit, f"{name}: tests/tiers.py gives it {markers}"
