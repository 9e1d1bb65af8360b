"""The integrations use tenure's public API only, read by ast.

An integration (``src/tenure/contrib/``) is what a user could have written over the
public API: no ``tenure._core``, no ``tenure.client._lease``, no ``tenure.server``.
So an integration never holds tenure's internals still, and what it needs that the
public API lacks is added to the public API. The reading is bench/peers' own
(``tests/bench/test_peers_public.py``), with ``tenure.testing`` also public: the
test fixtures an integration may build on are a public module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.bench import test_peers_public as reading

CONTRIB = Path(__file__).resolve().parents[2] / "src" / "tenure" / "contrib"
PUBLIC = reading.PUBLIC | {"tenure.testing", "tenure.contrib"}


def contrib_modules() -> list[Path]:
    """Every module of the integrations' package."""
    return sorted(CONTRIB.rglob("*.py"))


def test_there_are_modules_to_read() -> None:
    assert (CONTRIB / "__init__.py") in contrib_modules()


@pytest.mark.parametrize("path", contrib_modules(), ids=lambda p: str(p.relative_to(CONTRIB)))
def test_an_integration_uses_the_public_api_only(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reading, "PUBLIC", PUBLIC)
    # An integration's own modules are public to it (tenure.contrib.tooz._x is its own).
    own = "tenure.contrib." + path.relative_to(CONTRIB).parts[0].removesuffix(".py")
    found = [
        use for use in reading.private_uses(path.read_text()) if not use.split()[1].startswith(own)
    ]
    assert found == [], f"{path.name} reaches past tenure's public API: {found}"
    # A relative import may reach the integration's own modules, never above them.
    source = ast.parse(path.read_text())
    depth = len(path.relative_to(CONTRIB).parts)  # 1: contrib/x.py, 2: contrib/x/y.py
    upward = [
        ast.unparse(node)
        for node in ast.walk(source)
        if isinstance(node, ast.ImportFrom) and node.level >= depth
    ]
    assert upward == [], f"{path.name} reaches up: {upward}"


def test_the_reading_finds_a_private_import(monkeypatch: pytest.MonkeyPatch) -> None:
    # The check above must be able to fail.
    monkeypatch.setattr(reading, "PUBLIC", PUBLIC)
    found = reading.private_uses("from tenure.client._lease import Lease\nimport tenure.server\n")
    assert found == ["imports tenure.client._lease", "imports tenure.server"]
    assert reading.private_uses("import tenure.testing\nfrom tenure.sync import connect\n") == []
