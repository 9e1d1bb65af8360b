"""Fixtures of the conformance kit: every test runs once per backend under test.

The backend is ``--tenure-url`` (see :mod:`tenure.testing.conformance.harness`), or
the harnesses a project passed to ``use_harnesses``. Two kinds of skip, each with
its reason:

* what the *backend* declares: a test marked ``@pytest.mark.requires(Capability.X)``
  skips when ``client.capabilities`` lacks X (and must pass when it has it);
* what the *test* can do to the backend, by the URL's scheme: ``clock`` (the
  FakeClock driving it), ``network`` (drop and restore a session's connection),
  ``expire`` (both, to make a session expire) and ``processes`` (clients in child
  processes, to ``kill -9``) skip where the harness cannot.

A harness whose server is missing skips on a developer machine but *fails* in CI
(``CI=true``): CI must never go green by not testing.

Per test: ``client`` is connected and has created the fresh node ``node``;
``client2`` is a second client on the same state (for ``memory://`` both use
``memory://<unique name>``, so they share one engine); ``make_client`` makes more.
A node a test makes besides ``node`` is named through ``drop_at_end``, which drops it
at the test's end: against a shared server the kit leaves the nodes as it found them.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

import tenure
from tenure.testing._clock import FakeClock

from .harness import (
    DropAtEnd,
    Expire,
    Harness,
    MakeClient,
    Network,
    in_ci,
    selected_harnesses,
    unique,
)
from .processes import Processes
from .support import reap_spawned


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> None:
    """Mark the kit's coroutine tests ``asyncio``: the kit cannot rely on the runner's
    ``asyncio_mode`` (strict by default, and no ini file of ours in an installed run).
    """
    if inspect.iscoroutinefunction(obj) and name.startswith("test"):
        pytest.mark.asyncio(obj)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each test that reaches a backend once per selected harness."""
    if "backend" in metafunc.fixturenames:
        harnesses = selected_harnesses(metafunc.config)
        metafunc.parametrize(
            "backend",
            harnesses,
            indirect=True,
            ids=[harness.name for harness in harnesses],
            scope="session",
        )


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> Iterator[Harness]:
    """The harness of the backend under test (started and probed once per run)."""
    harness: Harness = request.param
    reason = harness.unavailable()
    if reason is not None:
        message = f"{harness.name} backend unavailable: {reason}"
        if in_ci():
            pytest.fail(f"{message} (CI=true: a missing backend is a failure, never a skip)")
        pytest.skip(message)
    harness.start()
    try:
        harness.probe()
        yield harness
    finally:
        harness.stop()


@pytest.fixture(autouse=True)
def _tenure_requires(request: pytest.FixtureRequest) -> None:
    """Skip a test marked ``requires(...)`` on a backend that lacks one of the capabilities."""
    wanted = {
        capability for marker in request.node.iter_markers("requires") for capability in marker.args
    }
    if not wanted:
        return
    if "backend" not in request.fixturenames:
        raise pytest.UsageError(f"{request.node.nodeid} is marked requires() but uses no backend")
    harness: Harness = request.getfixturevalue("backend")
    lacking = sorted(capability.value for capability in wanted - harness.capabilities)
    if lacking:
        what = "capability" if len(lacking) == 1 else "capabilities"
        pytest.skip(f"{harness.name} backend does not declare the {what} {', '.join(lacking)}")


@pytest.fixture
def state_clock(backend: Harness) -> FakeClock | None:
    """The clock of this test's state (None on a backend that keeps real time)."""
    return backend.new_clock()


@pytest.fixture
def clock(backend: Harness, state_clock: FakeClock | None) -> FakeClock:
    """The FakeClock driving this test's backend; skips where time cannot be faked."""
    if not backend.can_fake_time or state_clock is None:
        pytest.skip(f"the kit cannot fake the {backend.name} backend's time (memory:// only)")
    return state_clock


@pytest.fixture
def network(backend: Harness) -> Network:
    """Simulated connection loss; skips where the kit cannot drop a connection."""
    if not backend.can_disconnect:
        pytest.skip(f"the kit cannot drop a {backend.name} session's connection (memory:// only)")
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


@pytest_asyncio.fixture
async def processes(backend: Harness, state_name: str) -> AsyncIterator[Processes]:
    """Clients in child processes on this test's state (killed at its end); skips where
    the state cannot be reached from another process."""
    if not backend.can_share_with_processes:
        pytest.skip(
            f"the kit cannot reach the {backend.name} backend's state from another "
            "process (memory:// lives in the test's; a third party's scheme is not "
            "assumed to reach a server)"
        )
    children = Processes(backend.url(state_name))
    try:
        yield children
    finally:
        await children.aclose()


@pytest.fixture
def state_name() -> str:
    """The name of this test's state: every client made from it shares it."""
    return unique("api")


@pytest_asyncio.fixture
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


@pytest_asyncio.fixture
async def client(
    backend: Harness, make_client: MakeClient, node_name: str
) -> AsyncIterator[tenure.Client]:
    """A connected client; the fresh node ``node`` exists on its backend."""
    client = await make_client()
    await client.create_node(node_name)
    try:
        yield client
    finally:
        await backend.cleanup(node_name)


@pytest.fixture
def node(client: tenure.Client, node_name: str) -> str:
    """The name of this test's node, created by ``client``."""
    return node_name


@pytest_asyncio.fixture
async def drop_at_end(backend: Harness, client: tenure.Client) -> AsyncIterator[DropAtEnd]:
    """``drop_at_end(name)``: returns ``name``, a node the test makes besides ``node``,
    which is dropped (with force) at the test's end however the test ended, as ``node``
    is: the kit leaves a server's nodes as it found them."""
    names: list[str] = []

    def register(name: str) -> str:
        names.append(name)
        return name

    try:
        yield register
    finally:
        for name in names:
            await backend.cleanup(name)


@pytest_asyncio.fixture
async def client2(make_client: MakeClient, node: str) -> tenure.Client:
    """A second client on the same state as ``client`` (another process, as it were)."""
    return await make_client()
