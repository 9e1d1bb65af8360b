"""The sync client: connecting, nodes, the portal thread and its cleanup."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

import tenure.sync
from tenure.backends import Capability
from tenure.errors import (
    AlreadyExistsError,
    ClientClosedError,
    InvalidArgumentError,
    NotFoundError,
    PreconditionFailedError,
    SessionClosedError,
    UnsupportedError,
)

from .conftest import NODE


def test_with_block_starts_one_thread_and_joins_it_on_exit() -> None:
    before = threading.active_count()
    with tenure.sync.connect("memory://") as client:
        assert threading.active_count() == before + 1
        assert Capability.FIFO in client.capabilities
        assert client.url == "memory://"
    assert client.closed
    assert threading.active_count() == before


def test_plain_connect_and_close_is_idempotent() -> None:
    before = threading.active_count()
    client = tenure.sync.connect("memory://")
    client.create_node(NODE)
    client.close()
    client.close()
    assert threading.active_count() == before
    with pytest.raises(ClientClosedError, match="the client is closed"):
        client.describe_node(NODE)


def test_failed_connect_raises_tenure_errors_and_leaves_no_thread() -> None:
    before = threading.active_count()
    with pytest.raises(InvalidArgumentError):
        tenure.sync.connect("nowhere://")
    with pytest.raises(UnsupportedError):
        tenure.sync.connect("memory://", require=[Capability.DURABLE])
    with pytest.raises(InvalidArgumentError):
        tenure.sync.connect("memory://", colour="blue")
    assert threading.active_count() == before


def test_node_management(client: tenure.sync.Client) -> None:
    client.create_node("other", max_waiters=5)
    with pytest.raises(AlreadyExistsError):
        client.create_node("other")
    assert client.describe_node("other").config.max_waiters == 5
    assert client.alter_node("other", max_waiters=7).config.max_waiters == 7
    client.drop_node("other")
    with pytest.raises(NotFoundError):
        client.describe_node("other")


def test_the_old_name_of_the_recovery_window_warns_at_the_callers_line(
    client: tenure.sync.Client,
) -> None:
    """The sync face renames in the caller's thread: the warning points at this file,
    not at the portal's."""
    with pytest.warns(DeprecationWarning, match="now called recovery_window") as caught:
        client.create_node("renamed", session_timeout=8.0)
    assert [w.filename for w in caught] == [__file__]
    with pytest.warns(DeprecationWarning, match="now called recovery_window") as caught:
        altered = client.alter_node("renamed", session_timeout=4.0)
    assert [w.filename for w in caught] == [__file__]
    assert altered.config.recovery_window == 4.0
    assert client.describe_node("renamed").config.recovery_window == 4.0


def test_drop_node_with_sessions_needs_force_and_loses_them(client: tenure.sync.Client) -> None:
    session = client.session(NODE)
    with pytest.raises(PreconditionFailedError):
        client.drop_node(NODE)
    assert client.describe_node(NODE).sessions == 1
    client.drop_node(NODE, force=True)
    assert session.lost.is_set()
    with pytest.raises(tenure.errors.LostError):
        session.check()


def test_close_ends_sessions_and_loses_what_they_hold() -> None:
    client = tenure.sync.connect("memory://")
    client.create_node(NODE)
    session = client.session(NODE)
    lock = session.mutex("job").lock()
    client.close()
    assert session.ended
    # Closed by the client, not by its own close(): a loss for the session too.
    assert session.lost.is_set()
    assert isinstance(session.lost_reason, SessionClosedError)
    assert lock.lost.is_set()  # the lock ended under its holder
    assert isinstance(lock.lost_reason, SessionClosedError)
    session.close()  # no-op after the client is gone
    lock.release()


def test_clients_of_one_memory_name_share_state_and_one_thread(memory_url: str) -> None:
    before = threading.active_count()
    first = tenure.sync.connect(memory_url)
    second = tenure.sync.connect(memory_url)
    assert first.portal is second.portal
    assert threading.active_count() == before + 1
    first.create_node(NODE)
    first.close()
    assert second.describe_node(NODE).name == NODE  # state and thread live on
    assert threading.active_count() == before + 1
    second.close()
    assert threading.active_count() == before


def test_private_memory_clients_do_not_share() -> None:
    with tenure.sync.connect("memory://") as first, tenure.sync.connect("memory://") as second:
        assert first.portal is not second.portal
        first.create_node(NODE)
        with pytest.raises(NotFoundError):
            second.describe_node(NODE)


def test_portal_call_runs_on_the_loop_thread(client: tenure.sync.Client) -> None:
    async def where(tag: str) -> tuple[str, str]:
        await asyncio.sleep(0)
        return tag, threading.current_thread().name

    tag, thread = client.portal.call(where, "x")
    assert tag == "x"
    assert thread.startswith("tenure-portal")
    assert thread != threading.current_thread().name


def test_portal_call_from_the_portal_thread_refuses_to_deadlock(
    client: tenure.sync.Client,
) -> None:
    async def reenter() -> None:
        client.describe_node(NODE)

    with pytest.raises(RuntimeError, match="deadlock"):
        client.portal.call(reenter)
    assert client.describe_node(NODE).name == NODE  # the loop is fine


def test_portal_call_propagates_exceptions(client: tenure.sync.Client) -> None:
    async def fail() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        client.portal.call(fail)


def test_a_failing_callback_is_logged_and_does_not_stop_the_others(
    client: tenure.sync.Client, caplog: pytest.LogCaptureFixture
) -> None:
    session = client.session(NODE)
    seen: list[str] = []

    def fail(error: tenure.errors.LostError) -> None:
        raise RuntimeError("callback bug")

    session.on_lost(fail)
    session.on_lost(lambda error: seen.append(type(error).__name__))
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        client.drop_node(NODE, force=True)
    assert session.lost.is_set()
    assert seen == ["SessionClosedError"]
    assert "on_lost callback" in caplog.text


def test_listing_identity_and_kill_session_from_blocking_code(memory_url: str) -> None:
    with (
        tenure.sync.connect(memory_url, client_name="sync-worker") as client,
        tenure.sync.connect(memory_url) as operator,
    ):
        client.create_node(NODE)
        session = client.session(NODE, description="blocking")
        lock = session.mutex("job").lock()
        assert operator.list_nodes() == [NODE]
        [summary] = operator.list_semaphores(NODE, prefix="j")
        assert (summary.name, summary.owners) == ("job", 1)
        [listed] = operator.list_sessions(NODE)
        assert (listed.session_id, listed.description) == (session.id, "blocking")
        assert listed.identity == client.identity
        assert client.identity.name == "sync-worker"
        described = session.mutex("job").describe()
        assert described.held
        assert described.owner is not None
        assert (described.owner.token, described.owner.description) == (lock.token, "blocking")
        operator.kill_session(NODE, session.id)
        assert session.lost.wait(5.0)
        assert "operator" in str(session.lost.reason)
        assert not operator.session(NODE).mutex("job").describe().held
        with pytest.raises(NotFoundError):
            operator.kill_session(NODE, session.id)
