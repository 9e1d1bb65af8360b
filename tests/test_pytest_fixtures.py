"""The pytest plugin's fixtures, as a project's tests use them (pytest's ``pytester``).

Each test writes a small test file of a project that uses tenure and runs pytest on
it in this process (the plugin comes through its ``pytest11`` entry point, as in any
environment where tenure is installed): with pytest-asyncio in its strict mode and
in its auto mode, with the sync client, with a recorder whose assertion fails on the
project's bug, and with the mistakes the fixtures refuse.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tenure.testing.conformance import plugin

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent

#: Every run's options: no cache, pytest-asyncio's loop scope said, and none of the other
#: plugins installed here (Hypothesis's, imported afresh by each run, takes a second).
RUN = (
    *("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:xdist", "-p", "no:anyio"),
    *("-o", "asyncio_default_fixture_loop_scope=function"),
)

#: A project's tests: its code (a worker that must run alone) and what it checks.
PROJECT_TESTS = """
import asyncio

import pytest

import tenure
from tenure.errors import SessionExpiredError
from tenure.testing import disconnect


async def report(client, worker, done):
    async with client.session("app") as session:
        async with session.mutex("report"):
            done.append(worker)
            await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_reports_run_one_at_a_time_in_order(tenure_client, tenure_recorder):
    await tenure_client.create_node("app")
    done = []
    await asyncio.gather(*(report(tenure_client, n, done) for n in range(5)))
    assert sorted(done) == [0, 1, 2, 3, 4]
    assert len(tenure_recorder.holds("report")) == 5
    tenure_recorder.assert_never_overlap()
    tenure_recorder.assert_fifo()
    tenure_recorder.assert_linearizable()


@pytest.mark.asyncio
async def test_a_session_that_stops_answering_expires(tenure_client, tenure_clock):
    await tenure_client.create_node("app")
    session = await tenure_client.session("app", recovery_window=30)
    lock = await session.mutex("report").lock()
    disconnect(session)
    await tenure_clock.advance(31)
    assert isinstance(lock.lost_reason, SessionExpiredError)


@pytest.mark.asyncio
async def test_another_client_shares_the_state(tenure_client, tenure_url, tenure_clock):
    await tenure_client.create_node("app")
    async with tenure.connect(tenure_url, clock=tenure_clock) as other:
        assert await other.list_nodes() == ["app"]
"""


def test_async_tests_use_the_fixtures_in_strict_mode(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_project=PROJECT_TESTS)
    result = pytester.runpytest(*RUN, "-o", "asyncio_mode=strict")
    result.assert_outcomes(passed=3)


def test_and_in_auto_mode_without_marks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_project=PROJECT_TESTS.replace("@pytest.mark.asyncio\n", ""))
    result = pytester.runpytest(*RUN, "-o", "asyncio_mode=auto")
    result.assert_outcomes(passed=3)


def test_each_test_has_a_state_of_its_own(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_project="""
        import pytest

        @pytest.mark.parametrize("run", [1, 2])
        @pytest.mark.asyncio
        async def test_create_the_node(tenure_client, tenure_recorder, run):
            await tenure_client.create_node("app")  # AlreadyExistsError if shared
            async with tenure_client.session("app") as session:
                await session.mutex("job").lock()
            assert len(tenure_recorder.acquires) == 1  # this test's alone
        """
    )
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(passed=2)


def test_the_sync_client_and_its_clock(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_project="""
        import threading

        from tenure.errors import SessionExpiredError
        from tenure.sync.testing import disconnect


        def test_threads_take_turns(tenure_sync_client, tenure_recorder, tenure_clock):
            tenure_sync_client.create_node("app")

            def work():
                with tenure_sync_client.session("app") as session:
                    for _ in range(3):
                        with session.mutex("job"):
                            pass

            threads = [threading.Thread(target=work) for _ in range(3)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
            assert len(tenure_recorder.holds("job")) == 9
            tenure_recorder.assert_never_overlap()
            session = tenure_sync_client.session("app", recovery_window=10)
            disconnect(session)
            tenure_sync_client.portal.call(tenure_clock.advance, 11)
            assert isinstance(session.lost_reason, SessionExpiredError)
        """
    )
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(passed=1)


def test_the_recorder_fails_a_test_on_the_projects_bug(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_project="""
        import asyncio

        import pytest


        async def export(client):  # the bug: a semaphore of 2 tokens for a lock
            async with client.session("app") as session:
                async with session.acquire("export"):
                    await asyncio.sleep(0)


        @pytest.mark.asyncio
        async def test_exports_run_alone(tenure_client, tenure_recorder):
            await tenure_client.create_node("app")
            async with tenure_client.session("app") as session:
                await session.semaphore("export").create(2)
            await asyncio.gather(export(tenure_client), export(tenure_client))
            tenure_recorder.assert_never_overlap("export")
        """
    )
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: two holds of 'export' (node 'app') at once*"])


def test_the_async_and_the_sync_client_in_one_test_are_refused(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_project="""
        import pytest

        @pytest.mark.asyncio
        async def test_both(tenure_client, tenure_sync_client):
            pass
        """
    )
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*tenure_sync_client and tenure_client in one test*"])


def test_without_pytest_asyncio_the_async_client_says_what_is_missing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(
        test_project="""
        def test_async_client(tenure_client):
            pass

        def test_sync_client(tenure_sync_client):
            tenure_sync_client.create_node("app")
        """
    )
    # The plugin as it loads where pytest-asyncio is not installed: its module hidden,
    # the plugin's source run afresh (the installed one is loaded already), and
    # pytest-asyncio's plugin off.
    spec = importlib.util.spec_from_file_location("tenure_plugin_alone", plugin.__file__)
    assert spec is not None
    assert spec.loader is not None
    alone = importlib.util.module_from_spec(spec)
    with monkeypatch.context() as hidden:
        hidden.setitem(sys.modules, "pytest_asyncio", None)
        spec.loader.exec_module(alone)
    result = pytester.runpytest(*RUN, "-p", "no:tenure", "-p", "no:asyncio", plugins=[alone])
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*tenure_client is an async fixture: it needs pytest-asyncio*"])
