"""Fixtures of the repo's test run, and its side of the conformance kit.

The API suite is the conformance kit, shipped in ``src/tenure/testing/conformance``
and collected by this run too (``testpaths``). With no ``--tenure-url``, the kit
runs every test once per harness of :mod:`tests.api.harness`: ``memory://``, a
third party's ``dict://`` (``tests/dict_backend``, registered here by its entry
point's metadata), a ``tenure serve`` subprocess, and a real etcd member, Redis and
PostgreSQL. ``TENURE_TEST_BACKENDS=a,b`` runs only the named harnesses. A harness whose
server is missing skips on a developer machine but *fails* in CI (``CI=true``): CI
must never go green by not testing. The etcd fixtures (``etcd_member``,
``etcd_cluster``) come from the plugin :mod:`tests.etcd.fixtures`.

Every collected test gets its tier's markers here (``service``, ``faults``,
``browser``; the table is :mod:`tests.tiers`), and a unit-tier test runs under the
guard that refuses it any process. Under pytest-xdist, what a worker finds at its
end (servers left running) reaches the run's result through :mod:`tests.servers`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tenure._build import build
from tenure.sync._shared import EXIT_WAIT as SHARED_EXIT_WAIT
from tenure.sync._shared import drop as drop_shared
from tenure.sync._shared import keys as shared_keys
from tenure.testing.conformance.harness import use_harnesses
from tests import tiers
from tests.api.harness import ALL_HARNESSES, Harness
from tests.netproxy import NetProxy
from tests.server.wire import ServerProcess
from tests.servers import fail_on_relayed_strays, relay_strays

# Hypothesis's deadline (200 ms an example by default) is a timed assertion: on a
# machine busy with other work an example that ran long once failed the run ("Unreliable
# test timings"; tests/protocol under a CPU hog). Each test is bounded by pytest-timeout.
settings.register_profile("tenure", deadline=None)
settings.load_profile("tenure")

#: The third party's backend of tests/dict_backend, registered as a third party's is:
#: its distribution's metadata (an entry point of the ``tenure.backends`` group, as pip
#: would write it) on sys.path, where importlib.metadata finds it.
DICT_BACKEND_SITE = Path(__file__).resolve().parent / "dict_backend" / "site"
if str(DICT_BACKEND_SITE) not in sys.path:
    sys.path.append(str(DICT_BACKEND_SITE))

#: etcd_member and etcd_cluster, for every test package (tests/etcd/fixtures.py); the
#: redis_* and postgres_* fixtures (tests/redis/fixtures.py, tests/postgres/fixtures.py).
pytest_plugins = ("tests.etcd.fixtures", "tests.redis.fixtures", "tests.postgres.fixtures")


def _selected() -> list[Harness]:
    wanted = os.environ.get("TENURE_TEST_BACKENDS", "").strip()
    if not wanted:
        return ALL_HARNESSES
    names = {name.strip() for name in wanted.split(",") if name.strip()}
    unknown = names - {harness.name for harness in ALL_HARNESSES}
    if unknown:
        known = sorted(harness.name for harness in ALL_HARNESSES)
        raise pytest.UsageError(
            f"TENURE_TEST_BACKENDS names unknown backends: {sorted(unknown)} (known: {known})"
        )
    return [harness for harness in ALL_HARNESSES if harness.name in names]


@pytest.fixture(autouse=True)
def _close_the_shared_clients_a_test_opened() -> Iterator[None]:
    """Close the process's shared clients (``tenure.sync.shared_client``, the default
    client; tooz, limits and Celery open them) that this test opened: they live until
    the process exits, and a test's servers do not. Left open, each would go on
    reconnecting to a stopped server beside every later test of this worker."""
    before = set(shared_keys())
    yield
    opened = [key for key in shared_keys() if key not in before]
    clients = [client for key in opened if (client := drop_shared(key)) is not None]
    if clients:
        closing = threading.Thread(target=_close_each, args=(clients,), daemon=True)
        closing.start()
        closing.join(SHARED_EXIT_WAIT)  # (as at exit: a stopped server is not waited for)


def _close_each(clients: list[Any]) -> None:
    for client in clients:
        with contextlib.suppress(Exception):  # (its server may be gone: a test's end)
            client.close()


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


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--unit-tier``: what ``scripts/test --fast`` runs."""
    parser.addoption(
        "--unit-tier",
        action="store_true",
        help=f"run the unit tier only (-m '{tiers.UNIT_TIER}', and with any -m given), "
        "without collecting the files that hold none of it (tests/tiers.py)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Hand the repo's harnesses to the kit (a ``--tenure-url`` takes precedence);
    arm the unit tier's guard; ``--unit-tier`` selects the unit tier; SIGINT at
    Python's default."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # A run started in a shell's background (`cmd &`) inherits SIGINT ignored, and
        # so would every process it starts: the tests that send a ^C (to `tenure`, to
        # a blocked sync call) would wait for an end that never comes.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    harnesses = _selected()
    if config.getoption("unit_tier"):
        # The kit's items on the other harnesses are all service tier: under --unit-tier
        # they are not even made (a third of the items the unit tier's run collected).
        in_process = tiers.SERVER_PARAMETERS["backend"]
        harnesses = [harness for harness in harnesses if in_process(harness)] or harnesses
    use_harnesses(config, harnesses)
    tiers.install_guard()
    if sys.version_info >= (3, 12) and build() != "pure":
        # mypyc's coroutines pass an exception thrown into them on in the three-argument
        # form, deprecated since Python 3.12 (mypyc/mypyc#1214, open): with warnings as
        # errors, every cancel or failure through a compiled await would fail its test.
        # Our own code keeps to one argument (the pure build's runs still see it).
        config.addinivalue_line(
            "filterwarnings",
            r"ignore:the \(type, exc, tb\) signature of throw\(\) is deprecated:DeprecationWarning",
        )
    if config.getoption("unit_tier"):
        given = config.option.markexpr
        config.option.markexpr = f"({given}) and {tiers.UNIT_TIER}" if given else tiers.UNIT_TIER


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``--unit-tier``, leave out what holds no unit-tier test (not imported at all:
    the gRPC, YDB and Playwright imports of the service tier cost seconds)."""
    if not config.getoption("unit_tier"):
        return None
    try:
        path = collection_path.relative_to(config.rootpath).as_posix()
    except ValueError:
        return None  # outside the repository: pytest's to decide
    if path == "." or tiers.may_hold_unit_tier(path):
        return None
    return True


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its tier (:mod:`tests.tiers`); kit tests get a short timeout.

    Kit tests are quick: a hung one fails within seconds, not at the global timeout.
    Not the differential test: its length is the number of examples it is asked for.
    The short timeout bounds the test's own call, not its fixtures' setup
    (``func_only``): the first test of a module or run starts the harness it shares (a
    three-member cluster over etcd, a PostgreSQL), which on a machine busy with other
    work took more than 15 s, and the timeout then failed that setup for every test
    that shares it (354 errors in one loaded run). A setup is bounded by its own waits
    and by the global timeout.
    """
    kit = os.path.join("tenure", "testing", "conformance", "")
    for item in items:
        callspec = getattr(item, "callspec", None)  # parametrized tests only
        params = callspec.params if callspec is not None else {}
        for marker in tiers.markers_of(item.nodeid, params):
            item.add_marker(marker)
        if (
            kit in str(item.path)
            and item.path.name != "test_differential.py"
            and item.get_closest_marker("timeout") is None
        ):
            item.add_marker(pytest.mark.timeout(15, func_only=True))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    """The unit tier's guard over the test's setup."""
    if not tiers.is_unit(item):
        return (yield)
    with tiers.guarding(item.nodeid):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """The unit tier's guard over the test itself."""
    if not tiers.is_unit(item):
        return (yield)
    with tiers.guarding(item.nodeid):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    """The guard over the teardown; then what it refused fails the test, even if the
    test caught the error."""
    if not tiers.is_unit(item):
        return (yield)
    with tiers.guarding(item.nodeid):
        result = yield
    refused = tiers.take_refusals(item.nodeid)
    if refused:
        pytest.fail(f"a unit-tier test started processes: {refused} (see tests/tiers.py)")
    return result


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """pytest-xdist's controller, ``--dist loadgroup``: the groups of :mod:`tests.tiers`
    (the fault suite on one worker, one scenario at a time, and first; each file of
    :data:`tests.tiers.ONE_WORKER` on one worker); see :mod:`tests.xdist_groups`."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.xdist_groups import TierGroupScheduling  # xdist: the test extra's

    return TierGroupScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist's controller, as a worker ends: keep the strays it reported."""
    workeroutput = getattr(node, "workeroutput", None)
    if workeroutput is not None:
        relay_strays(node.config, workeroutput)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Fail the run on what the workers reported (no-op without xdist)."""
    fail_on_relayed_strays(session)
