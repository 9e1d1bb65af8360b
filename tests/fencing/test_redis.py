"""RedisFence against a real redis-server: late writes refused, atomic, exact to 2**64-1."""

from __future__ import annotations

import threading
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis
import redis.asyncio

from tenure.errors import (
    FencedError,
    InvalidArgumentError,
    LimitExceededError,
    PreconditionFailedError,
)
from tenure.fencing import MAX_TOKEN, RedisFence
from tests.fencing.scenario import paused_holder_writes_late
from tests.redis.server import RedisServer


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    """A client of the shared server."""
    connection = redis.Redis.from_url(redis_server.url())
    try:
        yield connection
    finally:
        connection.close()


@pytest.fixture
async def aclient(redis_server: RedisServer) -> AsyncIterator[redis.asyncio.Redis]:
    """An asyncio client of the shared server."""
    connection = redis.asyncio.Redis.from_url(redis_server.url())
    try:
        yield connection
    finally:
        await connection.aclose()


@pytest.fixture
def fence() -> RedisFence:
    """A fence whose keys no other test uses (the server is shared)."""
    return RedisFence(prefix=f"test:{uuid.uuid4().hex}:fence:")


async def test_a_paused_holders_late_write_is_refused(
    aclient: redis.asyncio.Redis, fence: RedisFence
) -> None:
    key = fence.prefix + "data"

    async def write(token: int, data: bytes) -> None:
        await fence.awrite(aclient, "orders", token, {key: data})

    outcome = await paused_holder_writes_late(write)
    assert await aclient.get(key) == b"B: writes again with the same token"
    assert await fence.ahighest(aclient, "orders") == outcome.token_b
    assert outcome.refusal.resource == "orders"


def test_equal_tokens_write_again_lower_ones_write_nothing(
    client: redis.Redis, fence: RedisFence
) -> None:
    a, b, c = (fence.prefix + name for name in "abc")
    assert fence.highest(client, "r") is None
    fence.write(client, "r", 5, {a: b"a5", b: 5})
    fence.write(client, "r", 5, {a: "a5 again"}, delete=[b])
    assert client.mget([a, b]) == [b"a5 again", None]
    with pytest.raises(FencedError, match="fencing token 4 is older than 5"):
        fence.write(client, "r", 4, {a: b"late", c: b"late"}, delete=a)
    assert client.mget([a, c]) == [b"a5 again", None]
    assert fence.highest(client, "r") == 5
    assert client.get(fence.key("r")) == b"5"


@pytest.mark.parametrize(
    ("higher", "lower"),
    [(MAX_TOKEN, MAX_TOKEN - 1), (2**53 + 1, 2**53), (10, 9), (100, 99), (2**63, 2**63 - 1)],
)
def test_tokens_compare_exactly_beyond_2_53(
    client: redis.Redis, fence: RedisFence, higher: int, lower: int
) -> None:
    # As doubles, 2**64-1 and 2**64-2 are one number: the script compares digits.
    fence.write(client, "big", higher, {fence.prefix + "x": b"higher"})
    with pytest.raises(FencedError) as refused:
        fence.write(client, "big", lower, {fence.prefix + "x": b"lower"})
    assert (refused.value.token, refused.value.highest) == (lower, higher)
    assert fence.highest(client, "big") == higher
    assert client.get(fence.prefix + "x") == b"higher"


def test_a_script_body_runs_behind_the_fence(client: redis.Redis, fence: RedisFence) -> None:
    counter = fence.prefix + "count"
    bump = fence.script(
        "local n = redis.call('INCRBY', KEYS[1], ARGV[1])\nreturn {n, #KEYS, #ARGV}"
    )
    # The body sees only its own KEYS and ARGV (not the fence's key, not the token).
    assert bump.run(client, "r", 3, keys=[counter], args=[10]) == [10, 1, 1]
    assert bump.run(client, "r", 7, keys=[counter], args=[5]) == [15, 1, 1]
    with pytest.raises(FencedError):
        bump.run(client, "r", 6, keys=[counter], args=[100])
    assert client.get(counter) == b"15"
    nothing = fence.script("redis.call('SET', KEYS[1], 'x')")
    assert nothing.run(client, "r", 7, keys=[fence.prefix + "y"]) is None


def test_a_failing_body_is_redis_error_and_the_fence_keeps_the_token(
    client: redis.Redis, fence: RedisFence
) -> None:
    failing = fence.script("redis.call('SET', KEYS[1], 'partial')\nreturn redis.call('NOPE')")
    with pytest.raises(redis.ResponseError, match=r"(?i)unknown redis command"):
        failing.run(client, "r", 4, keys=[fence.prefix + "a"])
    # Redis does not roll a script back: what ran before the error stays (docs/fencing.md).
    assert client.get(fence.prefix + "a") == b"partial"
    assert fence.highest(client, "r") == 4


async def test_a_script_runs_on_an_asyncio_client(
    aclient: redis.asyncio.Redis, fence: RedisFence
) -> None:
    echo = fence.script("return ARGV[1]")
    assert await echo.arun(aclient, "r", 1, args=["hello"]) == b"hello"
    assert await fence.ahighest(aclient, "r") == 1
    await echo.arun(aclient, "r", 2, args=["x"])
    with pytest.raises(FencedError):
        await echo.arun(aclient, "r", 1, args=["late"])


def test_a_flushed_script_cache_is_filled_again(client: redis.Redis, fence: RedisFence) -> None:
    fence.write(client, "r", 1, {fence.prefix + "a": b"1"})
    client.script_flush()  # a restarted server forgets its scripts
    fence.write(client, "r", 2, {fence.prefix + "a": b"2"})
    assert client.get(fence.prefix + "a") == b"2"


def test_a_client_that_decodes_replies_works_too(
    redis_server: RedisServer, fence: RedisFence
) -> None:
    with redis.Redis.from_url(redis_server.url(), decode_responses=True) as text_client:
        fence.write(text_client, "r", 12, {fence.prefix + "a": "twelve"})
        with pytest.raises(FencedError, match="older than 12"):
            fence.write(text_client, "r", 11, {fence.prefix + "a": "eleven"})
        assert fence.highest(text_client, "r") == 12
        assert fence.script("return ARGV[1]").run(text_client, "r", 12, args=["é"]) == "é"


def test_a_fence_key_not_written_by_a_fence_is_not_trusted(
    client: redis.Redis, fence: RedisFence
) -> None:
    for value in (b"not a number", b"007", b"1" * 21, str(MAX_TOKEN + 1).encode(), b"-3"):
        client.set(fence.key("r"), value)
        with pytest.raises(PreconditionFailedError, match="not a fencing token"):
            fence.write(client, "r", 5, {fence.prefix + "a": b"x"})
        with pytest.raises(PreconditionFailedError, match="not a fencing token"):
            fence.highest(client, "r")
    assert client.get(fence.prefix + "a") is None


def test_concurrent_writers_never_leave_an_older_tokens_data(
    redis_server: RedisServer, fence: RedisFence
) -> None:
    key = fence.prefix + "data"
    start = threading.Barrier(6)
    errors: list[BaseException] = []

    def writer(token: int) -> None:
        with redis.Redis.from_url(redis_server.url()) as own:
            start.wait(timeout=30)
            for i in range(30):
                try:
                    fence.write(own, "r", token, {key: f"{token}:{i}"})
                except FencedError as error:
                    if error.highest <= token:
                        errors.append(error)

    threads = [threading.Thread(target=writer, args=(token,)) for token in range(1, 7)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    with redis.Redis.from_url(redis_server.url()) as check:
        assert check.get(key) == b"6:29"
        assert fence.highest(check, "r") == 6


def test_the_fence_survives_kill_9_of_the_server(redis_fresh: RedisServer) -> None:
    fence = RedisFence()
    with redis.Redis.from_url(redis_fresh.url()) as before:
        fence.write(before, "r", 7, {"data": b"seven"})
    redis_fresh.kill()
    redis_fresh.start()
    with redis.Redis.from_url(redis_fresh.url()) as after:
        with pytest.raises(FencedError, match="older than 7"):
            fence.write(after, "r", 6, {"data": b"six"})
        assert after.get("data") == b"seven"


@pytest.mark.parametrize("token", [0, -1, 2**64, True, "3", 3.0])
def test_a_bad_token_is_refused_before_redis_is_asked(fence: RedisFence, token: object) -> None:
    with pytest.raises(InvalidArgumentError, match="token must be an integer"):
        fence.write(None, "r", token, {"a": 1})  # type: ignore[arg-type]


def test_bad_resources_values_and_settings_are_refused(client: redis.Redis) -> None:
    fence = RedisFence(max_resource_bytes=8)
    with pytest.raises(LimitExceededError, match="max_resource_bytes is 8"):
        fence.write(client, "123456789", 1, {"a": 1})
    with pytest.raises(InvalidArgumentError, match="resource must be a non-empty str"):
        fence.write(client, "", 1, {"a": 1})
    with pytest.raises(InvalidArgumentError, match="values must be a mapping"):
        fence.write(client, "r", 1, [("a", 1)])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="max_resource_bytes must be an integer"):
        RedisFence(max_resource_bytes=0)
    with pytest.raises(InvalidArgumentError, match="prefix must be a str"):
        RedisFence(prefix=b"x")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="body must be a non-empty str of Lua"):
        fence.script("  ")
