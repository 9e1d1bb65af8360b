"""The connections redis:// calls its functions over (``_conn.CallPool``): bounded, and a
call cut short never leaves its answer for the next call to read."""

from __future__ import annotations

import asyncio

import pytest

from tenure.backends.redis import _conn
from tenure.backends.redis._conn import CallPool
from tenure.backends.redis._url import parse_url


async def test_calls_beyond_the_limit_wait_for_a_connection(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More calls at once than connections allowed: each waits its turn, all answered."""
    monkeypatch.setattr(_conn, "MAX_CALL_CONNECTIONS", 2)
    pool = CallPool(parse_url(redis_url, {}))
    try:
        answers = await asyncio.gather(*(pool.exchange("ECHO", str(i)) for i in range(20)))
        assert answers == [str(i).encode() for i in range(20)]
        assert len(pool._all) == 2
    finally:
        await pool.close()


async def test_a_cancelled_call_leaves_no_answer_behind(redis_url: str) -> None:
    """A call cancelled while its answer is on the way: its connection is dropped, so
    the next call on it reads its own answer, not the cancelled one's."""
    pool = CallPool(parse_url(redis_url, {}))
    try:
        await pool.exchange("PING")
        slow = asyncio.create_task(pool.exchange("BLPOP", "tenure-test-no-such-list", "0.3"))
        await asyncio.sleep(0.05)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        assert len(pool._all) == 1
        assert await pool.exchange("ECHO", "mine") == b"mine"
    finally:
        await pool.close()


async def test_an_error_answer_keeps_the_connection(redis_url: str) -> None:
    """An error reply is read whole: the connection goes back to the pool as it is."""
    pool = CallPool(parse_url(redis_url, {}))
    try:
        with pytest.raises(Exception, match="unknown command"):
            await pool.exchange("NO-SUCH-COMMAND")
        (conn,) = pool._all
        assert conn.is_connected
        assert await pool.exchange("ECHO", "after") == b"after"
    finally:
        await pool.close()
