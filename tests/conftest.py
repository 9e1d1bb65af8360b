"""Fixtures of the API suite (``tests/api/``): every test runs once per backend.

The backends are the harnesses of :mod:`tests.api.harness`. A test that needs a
capability asks for the fixture that provides it; on a harness without it, that
fixture (and only that fixture) skips, saying why:

* ``clock``: the FakeClock driving the backend (``can_fake_time``);
* ``network``: drop and restore a session's connection (``can_disconnect``);
* ``expire``: both, to make a session expire.

A harness whose server is missing skips on a developer machine but *fails* in CI
(``CI=true``): CI must never go green by not testing. ``TENURE_TEST_BACKENDS=a,b``
runs only the named harnesses.

Per test: ``client`` is connected and has created the fresh node ``node``;
``client2`` is a second client on the same state (for ``memory://`` both use
``memory://<unique name>``, so they share one engine); ``make_client`` makes more.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import tenure
from tenure.testing import FakeClock
from tests.api.harness import (
    ALL_HARNESSES,
    Expire,
    Harness,
    MakeClient,
    Network,
    in_ci,
    unique,
)
from tests.api.support import reap_spawned
from tests.netproxy import NetProxy
from tests.server.wire import ServerProcess


def _selected() -> list[Harness]:
    wanted = os.environ.get("TENURE_TEST_BACKENDS", "").strip()
    if not wanted:
        return ALL_HARNESSES
    names = {name.strip() for name in wanted.split(",") if name.strip()}
    unknown = names - {harness.name for harness in ALL_HARNESSES}
    if unknown:
        raise pytest.UsageError(f"TENURE_TEST_BACKENDS names unknown backends: {sorted(unknown)}")
    return [harness for harness in ALL_HARNESSES if harness.name in names]


@pytest.fixture(scope="session", params=_selected(), ids=lambda harness: harness.name)
def backend(request: pytest.FixtureRequest) -> Iterator[Harness]:
    """The harness of the backend under test (started once per run)."""
    harness: Harness = request.param
    reason = harness.unavailable()
    if reason is not None:
        message = f"{harness.name} backend unavailable: {reason}"
        if in_ci():
            pytest.fail(f"{message} (CI=true: a missing backend is a failure, never a skip)")
        pytest.skip(message)
    harness.start()
    try:
        yield harness
    finally:
        harness.stop()


@pytest.fixture
def state_clock(backend: Harness) -> FakeClock | None:
    """The clock of this test's state (None on a backend that keeps real time)."""
    return backend.new_clock()


@pytest.fixture
def clock(backend: Harness, state_clock: FakeClock | None) -> FakeClock:
    """The FakeClock driving this test's backend; skips where time cannot be faked."""
    if not backend.can_fake_time or state_clock is None:
        pytest.skip(f"{backend.name} backend cannot fake time")
    return state_clock


@pytest.fixture
def network(backend: Harness) -> Network:
    """Simulated connection loss; skips where the backend cannot drop a connection."""
    if not backend.can_disconnect:
        pytest.skip(f"{backend.name} backend cannot drop a session's connection")
    return Network(backend)


@pytest.fixture
def expire(clock: FakeClock, network: Network) -> Expire:
    """``await expire(session)``: drop its connection and let its recovery window pass."""

    async def expire_session(session: tenure.Session) -> None:
        window = session.recovery_window
        assert window is not None, "expire() needs a session opened with a recovery_window"
        await network.disconnect(session)
        await clock.advance(window + 1.0)
        assert isinstance(session.lost_reason, tenure.errors.SessionExpiredError)

    return expire_session


@pytest.fixture
def state_name() -> str:
    """The name of this test's state: every client made from it shares it."""
    return unique("api")


@pytest.fixture
async def make_client(
    backend: Harness, state_clock: FakeClock | None, state_name: str
) -> AsyncIterator[MakeClient]:
    """``await make_client()``: one more client on this test's state (closed at teardown)."""
    clients: list[tenure.Client] = []

    async def connect() -> tenure.Client:
        client = await tenure.connect(backend.url(state_name), **backend.options(state_clock))
        clients.append(client)
        return client

    try:
        yield connect
    finally:
        await reap_spawned()  # tasks the test left waiting, before their clients go
        for client in reversed(clients):
            await client.aclose()


@pytest.fixture
def node_name() -> str:
    """The name of this test's node (``node`` is the same, once created)."""
    return unique("node")


@pytest.fixture
async def client(
    request: pytest.FixtureRequest, backend: Harness, make_client: MakeClient, node_name: str
) -> AsyncIterator[tenure.Client]:
    """A connected client; the fresh node ``node`` exists on its backend.

    A test marked ``@pytest.mark.requires(Capability.X, ...)`` skips here if the
    backend says it lacks one of them (``client.capabilities``).
    """
    client = await make_client()
    lacking = sorted(
        {
            capability.value
            for marker in request.node.iter_markers("requires")
            for capability in marker.args
            if capability not in client.capabilities
        }
    )
    if lacking:
        pytest.skip(f"{backend.name} backend lacks the capability {', '.join(lacking)}")
    await client.create_node(node_name)
    try:
        yield client
    finally:
        await backend.cleanup(node_name)


@pytest.fixture
def node(client: tenure.Client, node_name: str) -> str:
    """The name of this test's node, created by ``client``."""
    return node_name


@pytest.fixture
async def client2(make_client: MakeClient, node: str) -> tenure.Client:
    """A second client on the same state as ``client`` (another process, as it were)."""
    return await make_client()


@pytest.fixture
def tenure_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A real ``tenure serve`` of this test alone (``--fsync off``: the disk is not tested)."""
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        yield server


@pytest.fixture
async def proxy(tenure_server: ServerProcess) -> AsyncIterator[NetProxy]:
    """A fault-injecting TCP proxy in front of ``tenure_server``."""
    async with NetProxy("127.0.0.1", tenure_server.port) as proxy:
        yield proxy


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "requires(*capabilities): the test needs these tenure.Capability values; it skips "
        "on a backend that lacks one",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """API tests are quick: a hung one fails within seconds, not at the global timeout."""
    api = os.path.join("tests", "api", "")
    for item in items:
        if api in str(item.path) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(15))
