"""The pytest plugin, loaded by the ``pytest11`` entry point ``tenure``: the kit's
options, and the fixtures for testing code that uses tenure.

It registers what must be known before any test module is collected: the
``--tenure-url`` option and the ``requires`` marker. And it offers every project's
tests a few fixtures (docs/integrations.md, "Test fixtures"):

* ``tenure_clock``: a :class:`~tenure.testing.FakeClock` (time moves only when the
  test says: ``await tenure_clock.advance(31)``);
* ``tenure_url``: a ``memory://`` URL of the test's own, for more clients on the
  same state (``tenure.connect(tenure_url, clock=tenure_clock)``);
* ``tenure_client``: an async client on it (needs pytest-asyncio, which the
  ``testing`` extra installs), closed after the test;
* ``tenure_sync_client``: a :mod:`tenure.sync` client on it instead, for blocking code;
* ``tenure_recorder``: a :class:`~tenure.testing.Recorder` that hears every client of
  the process during the test (``assert_never_overlap()``, ``assert_fifo()``).

The plugin is loaded in every pytest run of an environment where tenure is
installed, so each fixture's name starts with ``tenure_``: a generic name (the kit's
``client``, ``clock``, ``node``) would answer for a fixture a project forgot to
define, silently. They cost nothing until a test asks for one. The kit's own
fixtures are in its ``conftest.py``, which pytest loads when it collects the kit.
(With ``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` set, load it by hand:
``-p tenure.testing.conformance.plugin``.)
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

import tenure
from tenure.testing import FakeClock, Recorder

if TYPE_CHECKING:
    import tenure.sync


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


# -- fixtures for testing code that uses tenure ----------------------------------------


def _async_fixture(function: Callable[..., AsyncIterator[Any]]) -> Any:
    """``function`` as pytest-asyncio's fixture (in its strict mode too), or, without
    pytest-asyncio, a fixture that fails saying what to install."""
    try:
        import pytest_asyncio
    except ImportError:

        def needs_pytest_asyncio() -> None:
            pytest.fail(
                f"{function.__name__} is an async fixture: it needs pytest-asyncio "
                "(pip install 'tenure[testing]'), or use tenure_sync_client"
            )

        needs_pytest_asyncio.__doc__ = function.__doc__
        return pytest.fixture(name=function.__name__)(needs_pytest_asyncio)
    return pytest_asyncio.fixture(function)


@pytest.fixture
def tenure_clock() -> FakeClock:
    """The :class:`~tenure.testing.FakeClock` of the test's ``memory://`` clients."""
    return FakeClock()


@pytest.fixture
def tenure_url() -> str:
    """A ``memory://NAME`` of this test's own: more clients on the same state connect
    with ``tenure.connect(tenure_url, clock=tenure_clock)``."""
    return f"memory://tenure-test-{secrets.token_hex(8)}"


@_async_fixture
async def tenure_client(tenure_url: str, tenure_clock: FakeClock) -> AsyncIterator[tenure.Client]:
    """An async client of ``tenure_url`` on ``tenure_clock``, closed after the test
    (it has no node yet: ``await tenure_client.create_node("app")``)."""
    async with tenure.connect(tenure_url, clock=tenure_clock) as client:
        yield client


@pytest.fixture
def tenure_sync_client(
    request: pytest.FixtureRequest, tenure_url: str, tenure_clock: FakeClock
) -> Iterator[tenure.sync.Client]:
    """A :mod:`tenure.sync` client of ``tenure_url`` on ``tenure_clock``, closed after
    the test; move the clock with ``tenure_sync_client.portal.call(tenure_clock.advance, 31)``.

    Not with ``tenure_client`` in one test: each runs its own event loop, and a
    ``memory://`` state is one loop's.
    """
    if "tenure_client" in request.fixturenames:
        pytest.fail(
            "tenure_sync_client and tenure_client in one test: a memory:// state lives on "
            "one event loop, and each has its own; use one of them"
        )
    import tenure.sync  # (here: a run that never asks for it does not import the sync face)

    with tenure.sync.connect(tenure_url, clock=tenure_clock) as client:
        yield client


@pytest.fixture
def tenure_recorder() -> Iterator[Recorder]:
    """A :class:`~tenure.testing.Recorder` of every client's acquires, grants and
    releases in this process during the test (:func:`tenure.add_observer`)."""
    recorder = Recorder()
    tenure.add_observer(recorder)
    try:
        yield recorder
    finally:
        tenure.remove_observer(recorder)
