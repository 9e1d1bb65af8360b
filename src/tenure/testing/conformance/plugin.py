"""The kit's pytest plugin, loaded by the ``pytest11`` entry point ``tenure``.

It only registers what must be known before any test module is collected: the
``--tenure-url`` option and the ``requires`` marker. It is loaded in every pytest run
of an environment where tenure is installed, so it defines no fixture; those are in
the kit's ``conftest.py``, which pytest loads when it collects the kit. (With
``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` set, load it by hand: ``-p tenure.testing.conformance.plugin``.)
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--tenure-url=URL``: the backend the conformance kit tests (repeatable)."""
    group = parser.getgroup("tenure", "tenure conformance kit")
    group.addoption(
        "--tenure-url",
        action="append",
        dest="tenure_url",
        default=[],
        metavar="URL",
        help="run tenure.testing.conformance against this backend URL (memory://, "
        "tenure://host:port, or a scheme registered under the 'tenure.backends' entry "
        "points); repeat it to test several backends in one run",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``requires`` marker (for ``--strict-markers`` runs)."""
    config.addinivalue_line(
        "markers",
        "requires(*capabilities): the test needs these tenure.Capability values; it skips "
        "on a backend that does not declare one of them",
    )
