"""``tenure.server``'s docstring is the map of the package: it names every module and
subpackage of ``src/tenure/server`` (``:mod:`tenure.server.X```), so a new one cannot
be left out of it, as ``_cluster`` once was."""

from __future__ import annotations

import re
from pathlib import Path

import tenure.server

SERVER = Path(__file__).resolve().parents[1] / "src" / "tenure" / "server"


def _parts() -> set[str]:
    """Every module and subpackage directly in ``server/`` (not ``__init__``)."""
    modules = {path.stem for path in SERVER.glob("*.py") if path.stem != "__init__"}
    packages = {path.parent.name for path in SERVER.glob("*/__init__.py")}
    return modules | packages


def test_the_map_names_every_module_and_subpackage_of_the_server() -> None:
    doc = tenure.server.__doc__
    assert doc is not None
    named = set(re.findall(r":mod:`tenure\.server\.(\w+)`", doc))
    assert {"_cluster", "_net", "_serve"} <= _parts()  # (the walk finds both kinds)
    missing = sorted(_parts() - named)
    assert not missing, f"tenure.server's docstring does not name {missing}"
    gone = sorted(named - _parts())
    assert not gone, f"tenure.server's docstring names {gone}, which are gone"
