"""The one pipelined connection redis:// calls its functions over (``_pipe.RedisPipe``):
answers matched to calls in order, a call cut short never leaves its answer for
another, a silent server times calls out, a lost connection is made again."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis
from redis import exceptions as rexc

import tenure
from tenure.backends._session import StoreSession
from tenure.backends.redis._pipe import RedisPipe
from tenure.backends.redis._store import RedisStore
from tenure.backends.redis._url import parse_url
from tenure.errors import UnavailableError
from tenure.testing.conformance.support import eventually, within
from tests.netproxy import NetProxy


def _port(url: str) -> int:
    return int(url.split("//", 1)[1].split(":", 1)[1].split("/", 1)[0])


async def test_calls_at_once_get_their_own_answers(redis_url: str) -> None:
    """Many calls in flight on the one connection: each gets the answer to its command."""
    pipe = RedisPipe(parse_url(redis_url, {}))
    try:
        answers = await asyncio.gather(*(pipe.exchange("ECHO", str(i)) for i in range(200)))
        assert answers == [str(i).encode() for i in range(200)]
    finally:
        await pipe.close()


async def test_a_cancelled_call_leaves_no_answer_behind(redis_url: str) -> None:
    """A call cancelled while its answer is on the way: the answer is dropped when it
    comes, and the next call reads its own."""
    pipe = RedisPipe(parse_url(redis_url, {}))
    try:
        slow = asyncio.create_task(pipe.exchange("BLPOP", "tenure-test-no-such-list", "0.3"))
        await asyncio.sleep(0.05)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        assert await pipe.exchange("ECHO", "mine") == b"mine"
    finally:
        await pipe.close()


async def test_an_error_answer_is_its_calls_alone(redis_url: str) -> None:
    """An error answer fails its own call; the connection carries on."""
    pipe = RedisPipe(parse_url(redis_url, {}))
    try:
        bad = pipe.exchange("NO-SUCH-COMMAND")
        good = pipe.exchange("ECHO", "after")
        results = await asyncio.gather(bad, good, return_exceptions=True)
        assert isinstance(results[0], rexc.ResponseError)
        assert "unknown command" in str(results[0])
        assert results[1] == b"after"
    finally:
        await pipe.close()


async def test_a_silent_server_times_the_calls_out_and_a_new_connection_follows(
    redis_url: str,
) -> None:
    """No answer within request_timeout: the waiting calls fail with TimeoutError, the
    connection is dropped, and the next call (the server back) connects again."""
    port = _port(redis_url)
    async with NetProxy("127.0.0.1", port) as proxy:
        through = redis_url.replace(f":{port}/", f":{proxy.port}/")
        pipe = RedisPipe(parse_url(through, {"request_timeout": 0.3}))
        try:
            assert await pipe.exchange("PING") == b"PONG"
            proxy.stall()
            with pytest.raises(rexc.TimeoutError):
                await asyncio.gather(pipe.exchange("PING"), pipe.exchange("PING"))
            proxy.resume()
            proxy.drop()
            assert await pipe.exchange("ECHO", "again") == b"again"
        finally:
            await pipe.close()


async def test_a_closed_pipe_refuses_calls(redis_url: str) -> None:
    """After close, a call fails at once instead of connecting again."""
    pipe = RedisPipe(parse_url(redis_url, {}))
    await pipe.exchange("PING")
    await pipe.close()
    with pytest.raises(rexc.ConnectionError):
        await pipe.exchange("PING")


def test_the_pipe_on_uvloop(redis_url: str) -> None:
    """uvloop (what the benchmarks run) may tell connection_made only after
    create_connection returned: the first call must not find the pipe unconnected."""
    uvloop = pytest.importorskip("uvloop")

    async def calls() -> list[bytes]:
        pipe = RedisPipe(parse_url(redis_url, {}))
        try:
            return list(await asyncio.gather(*(pipe.exchange("ECHO", str(i)) for i in range(3))))
        finally:
            await pipe.close()

    assert uvloop.run(calls()) == [b"0", b"1", b"2"]


async def test_a_watch_armed_beside_a_change_of_the_same_client_sees_it(redis_url: str) -> None:
    """The watch's arm and a queued acquire go out on the one connection together; the
    acquire's push (in its reply) may be handled before the arm's answer is: the
    watch must still read the change (it was lost when the arm cleared its news)."""
    async with tenure.connect(redis_url) as other, tenure.connect(redis_url) as client:
        await client.create_node("n")
        holder = await other.session("n")
        async with client.session("n") as rival:
            await rival.semaphore("p").create(limit=1)
            permit = await holder.semaphore("p").acquire(1)
            waiting = asyncio.create_task(rival.semaphore("p").acquire(1))
            seen = []
            async with asyncio.timeout(10):
                async for state in rival.semaphore("p").watch(waiters=True):
                    seen.append(len(state.waiters))
                    if state.waiters:
                        break
            assert seen[-1] == 1
            await permit.release()
            assert (await asyncio.wait_for(waiting, 10)).token > permit.token


async def test_a_release_is_sent_in_the_callers_turn_and_its_retry_keeps_its_key(
    redis_url: str,
) -> None:
    """redis:// releases in order (EagerRelease): the release is written before
    ``release_now`` returns. Its answer lost, it is sent again with the same request
    key, so Redis answers the retry as it answered the first try (released: True),
    rather than finding the hold gone (False)."""
    port = _port(redis_url)
    async with NetProxy("127.0.0.1", port) as proxy:
        through = redis_url.replace(f":{port}/", f":{proxy.port}/")
        async with tenure.connect(through, request_timeout=0.3) as client:
            await client.create_node("n")
            session = await client.session("n", recovery_window=30)
            inner = session._backend
            assert isinstance(inner, StoreSession)
            assert inner.releases_in_order
            store = inner.store
            assert isinstance(store, RedisStore)
            await session.mutex("m").lock()
            ((_, hold),) = inner.ledger.held  # the lock's hold (released below, by hand)
            proxy.lose_downstream()  # the release reaches Redis; its answer does not come back
            try:
                first = store.commands.release_now("m", hold)
                assert first is not None
                with pytest.raises(UnavailableError):
                    await asyncio.wait_for(first, 10)
            finally:
                proxy.lose_downstream(False)
                proxy.drop()
            assert await asyncio.wait_for(store.commands.release("m", hold), 10) is True
            assert not store.releases._keys


async def test_a_watch_arming_sent_again_after_its_answer_was_lost_counts_once(
    redis_url: str,
) -> None:
    """A watch's arming whose answer is lost is sent again (the call times out): Redis
    counts the session's watch of the name once, and the watch's end leaves no count.
    The retry, which carried no request key, counted it twice: the session stayed a
    watcher of the name, and one of its max_watches_per_session, for its life."""
    port = _port(redis_url)
    admin = aioredis.Redis(port=port)
    try:
        async with NetProxy("127.0.0.1", port) as proxy:
            through = redis_url.replace(f":{port}/", f":{proxy.port}/")
            async with tenure.connect(through, request_timeout=0.3) as client:
                await client.create_node("n")
                session = await client.session("n", recovery_window=30)
                inner = session._backend
                assert isinstance(inner, StoreSession)
                store = inner.store
                assert isinstance(store, RedisStore)
                counts, record = f"{store.base}sw:{session.id}", f"{store.base}s:{session.id}"

                async def armed() -> bool:
                    return await admin.hget(counts, "w") is not None

                proxy.lose_downstream()  # the arming reaches Redis; its answer does not return
                arming = asyncio.create_task(
                    store.watches.watch_semaphore("w", data=True, owners=False, waiters=False)
                )
                try:
                    await eventually(armed, "the first arming applied in Redis")
                finally:
                    proxy.lose_downstream(False)
                    proxy.drop()
                watch = await within(arming, "the arming, sent again")
                assert await admin.hget(counts, "w") == b"1"
                assert await admin.hget(record, "nw") == b"1"
                await within(watch.aclose(), "the disarming")
                assert await admin.hget(counts, "w") is None
                assert await admin.hget(record, "nw") == b"0"
                assert await admin.hget(f"{store.base}wt:w", str(session.id)) is None
    finally:
        await admin.aclose()
