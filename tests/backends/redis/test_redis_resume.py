"""Taking a live session back by its secret (the backend side of session tickets)."""

from __future__ import annotations

import asyncio

import pytest

import tenure
from tenure.backends import SessionTicket
from tenure.backends._session import StoreSession
from tenure.backends.redis import RedisBackend
from tenure.backends.redis._store import RedisStore
from tenure.errors import SessionExpiredError
from tests.backends.listeners import Heard


def _parts(client: tenure.Client, session: tenure.Session) -> tuple[RedisBackend, bytes]:
    """The client's Redis backend, and the session's secret."""
    backend, inner = client.backend, session._backend
    assert isinstance(backend, RedisBackend)
    assert isinstance(inner, StoreSession)
    assert isinstance(inner.store, RedisStore)
    return backend, inner.store.secret()


def _ticket(session: tenure.Session, secret: bytes) -> SessionTicket:
    """A ticket of ``session`` on node ``n`` with ``secret`` (its own, or a wrong one)."""
    return SessionTicket("redis", "n", session.id, secret)


async def test_a_resume_keeps_the_holds_withdraws_the_waits_and_fences_the_old_client(
    redis_url: str,
) -> None:
    async with tenure.connect(redis_url) as old, tenure.connect(redis_url) as new:
        await old.create_node("n")
        blocker = await new.session("n")
        await blocker.mutex("busy").lock()
        session = await old.session("n", recovery_window=5)
        lock = await session.mutex("m").lock(data=b"mine")
        queued = asyncio.ensure_future(session.mutex("busy").lock())
        for _ in range(100):
            if (await blocker.semaphore("busy").describe(waiters=True)).waiters:
                break
            await asyncio.sleep(0.02)
        _, secret = _parts(old, session)
        backend, _ = _parts(new, blocker)
        heard = Heard()
        resumed = await backend.resume_session("n", _ticket(session, secret), heard)
        taken_back = await resumed.holds()
        assert [(h.name, h.grant.token, h.data) for h in taken_back] == [("m", lock.token, b"mine")]
        waiters = (await blocker.semaphore("busy").describe(waiters=True)).waiters
        assert waiters == ()  # the old owner's queued request was withdrawn
        # The old client is fenced off: its calls are refused, and it hears so.
        with pytest.raises(SessionExpiredError):
            await session.mutex("x").lock()
        with pytest.raises(SessionExpiredError):
            await asyncio.wait_for(queued, 5)
        assert isinstance(session.lost_reason, SessionExpiredError)
        # The taken-back hold releases, and the next waiter gets it.
        waiter = asyncio.ensure_future(blocker.mutex("m").lock())
        await asyncio.sleep(0.1)
        grant = taken_back[0].grant
        assert await resumed.release("m", grant)
        taken = await asyncio.wait_for(waiter, 5)
        assert taken.token > lock.token
        assert heard.lost == []


async def test_a_wrong_secret_or_an_ended_session_cannot_be_resumed(redis_url: str) -> None:
    async with tenure.connect(redis_url) as client:
        await client.create_node("n")
        session = await client.session("n")
        backend, secret = _parts(client, session)
        with pytest.raises(SessionExpiredError, match="secret is wrong"):
            await backend.resume_session("n", _ticket(session, bytes(16)), Heard())
        await session.close()
        with pytest.raises(SessionExpiredError, match="cannot be resumed"):
            await backend.resume_session("n", _ticket(session, secret), Heard())
