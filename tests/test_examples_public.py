"""The example programs use tenure's public API only, read by ast.

CONTRIBUTING's layout table says so of ``examples/``: an example is what a user
writes, so it may import what the README shows users import (``tenure``,
``tenure.client``, ``tenure.errors``, ``tenure.backends``, ``tenure.sync``,
``tenure.fencing``), the public test helpers (``tenure.testing``) and the
integrations (``tenure.contrib`` and its extras), and nothing private. The reading is
bench/peers' own (``tests/bench/test_peers_public.py``): imports, attributes reached
through an imported module, ``importlib.import_module``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench import test_peers_public as reading

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
INTEGRATIONS = {
    "tenure.contrib",
    "tenure.contrib.celery",
    "tenure.contrib.limits",
    "tenure.contrib.otel",
    "tenure.contrib.tooz",
}
#: The public low level a recipe of one's own stands on (own_recipe.py).
LOW_LEVEL = {"tenure.lowlevel"}
PUBLIC = reading.PUBLIC | {"tenure.testing"} | LOW_LEVEL | INTEGRATIONS


def examples() -> list[Path]:
    """Every example program (and any module an example keeps beside it)."""
    return sorted(EXAMPLES.rglob("*.py"))


def test_there_are_examples_to_read() -> None:
    assert len(examples()) > 10


@pytest.mark.parametrize("path", examples(), ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_an_example_uses_the_public_api_only(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "PUBLIC", PUBLIC)
    assert reading.private_uses(path.read_text()) == [], f"{path.name} reaches past the API"


def test_the_reading_refuses_what_an_example_may_not_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The check above must be able to fail.
    monkeypatch.setattr(reading, "PUBLIC", PUBLIC)
    source = (
        "from tenure.contrib.tooz._driver import TenureDriver\n"
        "from tenure.testing.conformance import harness\n"
        "import tenure\ntenure._core.Engine\n"
    )
    assert reading.private_uses(source) == [
        "imports tenure.contrib.tooz._driver",
        "imports tenure.testing.conformance",
        "reaches tenure._core (tenure._core.Engine)",
    ]
    assert reading.private_uses("from tenure.contrib.otel import instrument\n") == []
