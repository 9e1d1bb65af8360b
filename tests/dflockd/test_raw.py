"""The dflockd line protocol of ``tenure serve``, byte by byte over raw sockets.

Each test sends exact requests (spec §4, §5) and checks the exact answer lines of
the compatibility spec (shared/reference/dflockd-protocol.md §5 to §12, §15).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import tenure
from tenure.compat.dflockd.codec import frame as wire_frame
from tests.server.wire import WAIT, ServerProcess, free_port

from .conftest import (
    DEFAULT_LEASE,
    NARROW_SECRET,
    READ_ONLY_SECRET,
    SECRET,
    Pki,
    Raw,
    Raws,
    Serve,
    fence,
    grant,
    unique,
)

pytestmark = pytest.mark.timeout(60)

#: A well-formed token no server handed out.
BOGUS_TOKEN = "00000000000000010123456789abcdef"


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll ``check`` until it is true (bounded by WAIT)."""
    deadline = time.monotonic() + WAIT
    while not await check():
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.05)


async def until_free(conn: Raw, key: str, what: str) -> None:
    """Wait until ``conn`` can take the lock ``key`` (then let it go again)."""

    async def free() -> bool:
        line = await conn.ask("l", key, "0")
        if line == "timeout":
            return False
        assert await conn.ask("r", key, grant(line)) == "ok"
        return True

    await until(free, what)


async def stats(raw: Raws, port: int) -> dict[str, Any]:
    """The stats document, through a connection of its own (closed after)."""
    conn = await raw.connect(port)
    try:
        line = await conn.ask("stats")
    finally:
        await conn.close()
        raw.opened.remove(conn)
    assert line.startswith("ok {"), line
    document = json.loads(line[3:])
    assert isinstance(document, dict)
    return document


def entry(document: dict[str, Any], kind: str, key: str) -> dict[str, Any] | None:
    """The ``kind`` list's entry for ``key`` in a stats document."""
    items = document[kind]
    assert isinstance(items, list)
    found = [item for item in items if item["key"] == key]
    assert len(found) <= 1, found
    return found[0] if found else None


async def waiters(raw: Raws, port: int, key: str, kind: str = "locks") -> int:
    """How many wait on ``key`` (0 if it has none or is not active)."""
    found = entry(await stats(raw, port), kind, key)
    return 0 if found is None else int(found["waiters"])


async def queued(raw: Raws, port: int, key: str, count: int, kind: str = "locks") -> None:
    """Until ``count`` requests wait on ``key``."""

    async def check() -> bool:
        return await waiters(raw, port, key, kind) == count

    await until(check, f"{count} waiters on {key}")


# -- spec §12, the example exchanges ----------------------------------------------------


async def test_basic_lock_renew_release(server: ServerProcess, raw: Raws) -> None:
    conn = await raw.connect(server.port)
    key = unique("job")
    token = grant(await conn.ask("l", key, "10 60"), lease=60)
    assert await conn.ask("n", key, f"{token} 60") == "ok 60"
    assert await conn.ask("n", key, token) == f"ok {DEFAULT_LEASE}"  # the server default
    assert await conn.ask("r", key, token) == "ok"
    assert await conn.ask("r", key, token) == "error"  # already released
    assert await conn.ask("n", key, token) == "error"


async def test_try_lock_and_fifo_handoff(server: ServerProcess, raw: Raws) -> None:
    a, b = await raw.connect(server.port), await raw.connect(server.port)
    k1, k2 = unique("k1"), unique("k2")
    token_a = grant(await a.ask("l", k1, "5"), lease=DEFAULT_LEASE)
    assert await b.ask("l", k1, "0") == "timeout"
    assert await b.ask("e", k1, "") == "queued"
    assert await b.ask("e", k1, "") == "error_already_enqueued"
    assert await b.ask("w", k2, "1") == "error_not_enqueued"
    assert await a.ask("r", k1, token_a) == "ok"
    token_b = grant(await b.ask("w", k1, "1"), lease=DEFAULT_LEASE)
    assert fence(token_b) > fence(token_a)


async def test_two_phase_fast_path_remembers_the_lease(server: ServerProcess, raw: Raws) -> None:
    conn = await raw.connect(server.port)
    key = unique("k3")
    token = grant(await conn.ask("e", key, "10"), "acquired", lease=10)
    assert await conn.ask("w", key, "5") == f"ok {token} 10"  # the same token
    assert await conn.ask("w", key, "5") == "error_not_enqueued"  # `w` consumed the state
    assert await conn.ask("r", key, token) == "ok"


async def test_semaphore_exchange(server: ServerProcess, raw: Raws) -> None:
    conn = await raw.connect(server.port)
    pool, pool2 = unique("pool"), unique("pool2")
    t1 = grant(await conn.ask("sl", pool, "0 2"), lease=DEFAULT_LEASE)
    assert await conn.ask("sl", pool, "0 3") == "error_limit_mismatch"
    assert await conn.ask("se", pool, "3") == "error_limit_mismatch"
    t2 = grant(await conn.ask("sl", pool, "0 2 5"), lease=5)
    assert await conn.ask("sl", pool, "0 2") == "timeout"  # both slots taken
    assert await conn.ask("sn", pool, f"{t1} 9") == "ok 9"
    assert await conn.ask("sn", pool, t2) == f"ok {DEFAULT_LEASE}"
    assert await conn.ask("sr", pool, t1) == "ok"
    assert await conn.ask("sr", pool, t1) == "error"
    t3 = grant(await conn.ask("se", pool2, "2 7"), "acquired", lease=7)
    assert await conn.ask("sw", pool2, "5") == f"ok {t3} 7"
    assert await conn.ask("sr", pool2, t3) == "ok"
    assert await conn.ask("sr", pool, t2) == "ok"


async def test_stats_on_a_fresh_server(serve: Serve, raw: Raws) -> None:
    server = serve()
    conn = await raw.connect(server.port)
    empty = '{"connections":1,"locks":[],"semaphores":[],"idle_locks":[],"idle_semaphores":[]}'
    assert await conn.ask("stats", "_", "_") == f"ok {empty}"
    assert await conn.ask("stats", "_", "") == f"ok {empty}"  # the TypeScript client's shape
    assert await conn.ask("stats", "any key", "and an argument") == f"ok {empty}"
    other = await raw.connect(server.port)
    assert await other.ask("ping") == "ok"
    assert json.loads((await conn.ask("stats"))[3:])["connections"] == 2


async def test_stats_lists_each_kind(server: ServerProcess, raw: Raws) -> None:
    holder, waiter = await raw.connect(server.port), await raw.connect(server.port)
    lock, sem, sem1, idle = unique("lock"), unique("sem"), unique("sem1"), unique("idle")
    grant(await holder.ask("l", lock, "0 30"))
    assert await waiter.ask("e", lock, "") == "queued"
    grant(await holder.ask("sl", sem, "0 3"))
    grant(await waiter.ask("sl", sem, "0 3"))
    grant(await holder.ask("sl", sem1, "0 1"))  # limit 1: reported as a lock (§10)
    token = grant(await holder.ask("l", idle, "0"))
    assert await holder.ask("r", idle, token) == "ok"

    document = await stats(raw, server.port)
    assert set(document) >= {"connections", "locks", "semaphores", "idle_locks", "idle_semaphores"}
    held = entry(document, "locks", lock)
    assert held is not None
    assert isinstance(held["owner_conn_id"], int)
    assert held["owner_conn_id"] > 0
    assert isinstance(held["lease_expires_in_s"], float)
    assert 0 < held["lease_expires_in_s"] <= 30
    assert held["waiters"] == 1
    assert entry(document, "semaphores", sem) == {
        "key": sem,
        "limit": 3,
        "holders": 2,
        "waiters": 0,
    }
    assert entry(document, "locks", sem1) is not None
    assert entry(document, "semaphores", sem1) is None
    idle_entry = entry(document, "idle_locks", idle)
    assert idle_entry is not None
    assert isinstance(idle_entry["idle_s"], int | float)
    assert idle_entry["idle_s"] >= 0
    assert entry(document, "locks", idle) is None


async def test_stats_lists_hundreds_of_locks(server: ServerProcess, raw: Raws) -> None:
    conn = await raw.connect(server.port)
    keys = [unique("many") for _ in range(200)]
    await conn.send(b"".join(f"l\n{key}\n0 30\n".encode() for key in keys))  # pipelined
    for _ in keys:
        grant(await conn.line())
    document = await stats(raw, server.port)
    held = {item["key"] for item in document["locks"]}
    assert held >= set(keys)


async def test_ping_barrier_and_stable_ref(server: ServerProcess, raw: Raws) -> None:
    conn = await raw.connect(server.port)
    assert await conn.ask("ping", "_", "_") == "ok"
    assert await conn.ask("ping", "", "") == "ok"  # key and argument ignored
    assert await conn.ask("ping", "a key with spaces", "1 2 3") == "ok"
    assert await conn.ask("barrier", "_", "_") == "ok"
    assert await conn.ask("barrier", "x", "y z") == "ok"
    assert await conn.ask("stable-ref", "my-ref", "_") == "ok"
    assert await conn.ask("stable-ref", "my-ref", "_") == "error"  # once per connection
    assert await conn.ask("ping") == "ok"


# -- malformed input (§4, §8) -------------------------------------------------------------

MALFORMED = [
    b"bogus\nk\nx\n",  # unknown command
    b"L\nk\n5\n",  # commands are case-sensitive
    b"l\na b\n5\n",  # white space in the key
    b"l\na\tb\n5\n",
    b"l\n\n5\n",  # empty key
    b"l\nk9\n-1\n",  # negative timeout
    b"l\nk9\n5 0\n",  # lease 0
    b"l\nk9\nabc\n",
    b"l\nk9\n1 2 3\n",  # too many fields
    b"l\nk9\n\n",  # no timeout
    b"l\nk9\n1.5\n",
    b"l\nk9\n0x10\n",
    b"l\nk9\n9223372037\n",  # timeout over the bound
    b"l\nk9\n0 9223372037\n",  # lease over the bound
    b"l\nk9\n99999999999999999999\n",  # not an int64
    b"r\nk9\n\n",  # empty token
    b"r\nk9\na b\n",
    b"n\nk9\n\n",
    b"n\nk9\ntok 0\n",
    b"e\nk9\n1 2\n",  # `e` takes at most one field
    b"w\nk9\n\n",  # `w` needs a timeout
    b"sl\nk9\n0\n",  # no limit
    b"sl\nk9\n0 0\n",  # limit 0
    b"sl\nk9\n0 1048577\n",  # limit over the bound
    b"se\nk9\n\n",
    b"se\nk9\n0\n",
    b"sw\nk9\n\n",
    b"l\nk\xff\n5\n",  # not UTF-8
]


async def test_malformed_requests_keep_the_connection(server: ServerProcess, raw: Raws) -> None:
    conn = await raw.connect(server.port)
    for request in MALFORMED:
        await conn.send(request)
        assert await conn.line() == "error", request
        assert await conn.ask("ping") == "ok", request
    # None of them made a key.
    document = await stats(raw, server.port)
    keys = {item["key"] for kind in ("locks", "idle_locks") for item in document[kind]}
    assert not keys & {"k", "k9", "a b", ""}


async def test_integers_read_as_go_does(server: ServerProcess, raw: Raws) -> None:
    conn = await raw.connect(server.port)
    key, sem, big = unique("plus"), unique("maxsem"), unique("big")
    token = grant(await conn.ask("l", key, "+0 +3"), lease=3)
    assert await conn.ask("r", key, token) == "ok"
    token = grant(await conn.ask("l", key, "\t 0 \t 4 "), lease=4)  # runs of white space
    assert await conn.ask("r", key, token) == "ok"
    token = grant(await conn.ask("sl", sem, "0 1048576"))  # the largest limit
    assert await conn.ask("sr", sem, token) == "ok"
    token = grant(await conn.ask("l", big, "9223372036 9223372036"), lease=9223372036)
    assert await conn.ask("n", big, f"{token} 9223372036") == "ok 9223372036"
    other = await raw.connect(server.port)
    blocked = asyncio.ensure_future(other.ask("l", big, "9223372036"))  # the longest wait
    await queued(raw, server.port, big, 1)
    assert await conn.ask("r", big, token) == "ok"
    token = grant(await blocked)
    assert await other.ask("r", big, token) == "ok"


async def test_keys_are_utf8_up_to_256_bytes(server: ServerProcess, raw: Raws) -> None:
    conn = await raw.connect(server.port)
    for key in (unique("🔒"), "x" * 256, "é" * 128):
        token = grant(await conn.ask("l", key, "0"))
        assert await conn.ask("r", key, token) == "ok"


#: Requests with a line over the 256-byte cap: ``error``, then the server closes (§4.2).
OVERLONG = [
    b"l\n" + b"x" * 300 + b"\n5\n",
    b"l\n" + b"y" * 257 + b"\n5\nping\n_\n_\n",  # one byte over; the ping is never read
    b"l\nk\n" + b"1" * 300 + b"\n",
    b"auth\n_\n" + b"s" * 65_537 + b"\n",  # over even the cap of an auth line
]


async def test_an_overlong_line_closes_the_connection(server: ServerProcess, raw: Raws) -> None:
    for request in OVERLONG:
        conn = await raw.connect(server.port)
        await conn.send(b"ping\n_\n_\n" + request)
        assert await conn.rest() == b"ok\nerror\n", request


async def test_an_overlong_line_always_answers_error(server: ServerProcess, raw: Raws) -> None:
    # Many at once: a bug once lost the last answer before a close, depending on the
    # order the server flushed its connections in (it varied little one at a time).
    conns = [await raw.connect(server.port) for _ in range(8 * len(OVERLONG))]
    requests = OVERLONG * 8
    for conn, request in zip(conns, requests, strict=True):
        await conn.send(request)
    answers = await asyncio.gather(*(conn.rest() for conn in conns))
    assert answers == [b"error\n"] * len(conns)


async def test_a_long_auth_argument_is_within_its_cap(server: ServerProcess, raw: Raws) -> None:
    conn = await raw.connect(server.port)
    # Without a secret `auth` is no command, but its line may be 64 KiB (§4.2).
    assert await conn.ask("auth", "_", "s" * 60_000) == "error"
    assert await conn.ask("ping") == "ok"


async def test_crlf_is_accepted(server: ServerProcess, raw: Raws) -> None:
    conn = await raw.connect(server.port)
    key = unique("crlf")
    await conn.send(f"l\r\n{key}\r\n0 5\r\n".encode())
    token = grant(await conn.line(), lease=5)
    await conn.send(f"r\r\n{key}\r\n{token}\r\n".encode())
    assert await conn.line() == "ok"
    await conn.send(b"ping\r\n_\r\n_\r\n")
    assert await conn.line() == "ok"


# -- tokens --------------------------------------------------------------------------------


async def test_release_and_renew_with_a_wrong_token(server: ServerProcess, raw: Raws) -> None:
    conn = await raw.connect(server.port)
    key, other, sem = unique("mine"), unique("other"), unique("sem")
    token = grant(await conn.ask("l", key, "0"))
    other_token = grant(await conn.ask("l", other, "0"))
    sem_token = grant(await conn.ask("sl", sem, "0 2"))
    for wrong in (BOGUS_TOKEN, other_token, "not-a-token", token.upper(), token[:-1]):
        assert await conn.ask("r", key, wrong) == "error", wrong
        assert await conn.ask("n", key, f"{wrong} 5") == "error", wrong
    assert await conn.ask("r", unique("unknown"), token) == "error"  # right token, wrong key
    assert await conn.ask("sr", key, token) == "error"  # a lock token is not a semaphore's
    assert await conn.ask("sn", key, token) == "error"
    assert await conn.ask("r", sem, sem_token) == "error"  # and the other way round
    assert await conn.ask("n", sem, sem_token) == "error"
    # The holders are untouched.
    assert await conn.ask("n", key, f"{token} 5") == "ok 5"
    for k, t, release in ((key, token, "r"), (other, other_token, "r"), (sem, sem_token, "sr")):
        assert await conn.ask(release, k, t) == "ok"


async def test_tokens_work_from_any_connection(server: ServerProcess, raw: Raws) -> None:
    a, b = await raw.connect(server.port), await raw.connect(server.port)
    key = unique("shared")
    token = grant(await a.ask("l", key, "0 30"))
    assert await b.ask("n", key, f"{token} 20") == "ok 20"
    assert await b.ask("r", key, token) == "ok"
    grant(await b.ask("l", key, "0"))


async def test_fences_increase_over_grants(server: ServerProcess, raw: Raws) -> None:
    conn = await raw.connect(server.port)
    key, sem = unique("fence"), unique("fsem")
    fences = []
    for _ in range(3):
        token = grant(await conn.ask("l", key, "0"))
        fences.append(fence(token))
        assert await conn.ask("r", key, token) == "ok"
        token = grant(await conn.ask("sl", sem, "0 2"))
        fences.append(fence(token))
        assert await conn.ask("sr", sem, token) == "ok"
    assert fences == sorted(set(fences))


async def test_locks_and_semaphores_have_separate_namespaces(
    server: ServerProcess, raw: Raws
) -> None:
    conn = await raw.connect(server.port)
    key = unique("both")
    lock = grant(await conn.ask("l", key, "0"))
    sem = grant(await conn.ask("sl", key, "0 3"))
    assert await conn.ask("l", key, "0") == "timeout"
    assert await conn.ask("r", key, lock) == "ok"
    assert await conn.ask("sr", key, sem) == "ok"


# -- queues, timeouts and leases ------------------------------------------------------


async def test_a_blocked_lock_gets_the_slot_on_release(server: ServerProcess, raw: Raws) -> None:
    a, b = await raw.connect(server.port), await raw.connect(server.port)
    key = unique("block")
    token = grant(await a.ask("l", key, "0"))
    blocked = asyncio.ensure_future(b.ask("l", key, "10 4"))
    await queued(raw, server.port, key, 1)
    assert not blocked.done()
    assert await a.ask("r", key, token) == "ok"
    grant(await blocked, lease=4)


async def test_a_blocked_lock_times_out_and_leaves_the_queue(
    server: ServerProcess, raw: Raws
) -> None:
    a, b, c = [await raw.connect(server.port) for _ in range(3)]
    key = unique("tmo")
    token = grant(await a.ask("l", key, "0"))
    assert await b.ask("l", key, "1") == "timeout"
    assert await waiters(raw, server.port, key) == 0
    assert await b.ask("ping") == "ok"  # the connection goes on
    assert await a.ask("r", key, token) == "ok"
    grant(await c.ask("l", key, "0"))  # nobody left in front


async def test_fifo_order_of_waiters(server: ServerProcess, raw: Raws) -> None:
    holder = await raw.connect(server.port)
    key = unique("fifo")
    token = grant(await holder.ask("l", key, "0"))
    conns = [await raw.connect(server.port) for _ in range(3)]
    order: list[int] = []

    async def wait_turn(index: int) -> str:
        line = await conns[index].ask("l", key, "10")
        order.append(index)
        return line

    tasks = []
    for index in range(3):
        tasks.append(asyncio.ensure_future(wait_turn(index)))
        await queued(raw, server.port, key, index + 1)
    late = await raw.connect(server.port)
    assert await late.ask("e", key, "") == "queued"  # behind the three
    assert await holder.ask("r", key, token) == "ok"
    for index in range(3):
        token = grant(await asyncio.wait_for(tasks[index], WAIT))
        assert order == list(range(index + 1))
        assert await conns[index].ask("r", key, token) == "ok"
    grant(await late.ask("w", key, "5"))


async def test_semaphore_grants_several_waiters_in_order(server: ServerProcess, raw: Raws) -> None:
    holder = await raw.connect(server.port)
    key = unique("semq")
    tokens = [grant(await holder.ask("sl", key, "0 2")) for _ in range(2)]
    a, b, c = [await raw.connect(server.port) for _ in range(3)]
    assert await a.ask("se", key, "2") == "queued"
    assert await b.ask("se", key, "2") == "queued"
    assert await c.ask("se", key, "2") == "queued"
    assert await holder.ask("sr", key, tokens[0]) == "ok"
    assert await holder.ask("sr", key, tokens[1]) == "ok"
    grant(await a.ask("sw", key, "5"))
    grant(await b.ask("sw", key, "5"))
    assert await c.ask("sw", key, "0") == "timeout"
    assert await c.ask("sw", key, "0") == "error_not_enqueued"  # the timeout dropped it


async def test_wait_timeout_discards_the_enqueue(server: ServerProcess, raw: Raws) -> None:
    a, b, c = [await raw.connect(server.port) for _ in range(3)]
    key = unique("wt")
    token = grant(await a.ask("l", key, "0"))
    assert await b.ask("e", key, "") == "queued"
    assert await b.ask("w", key, "0") == "timeout"
    assert await b.ask("w", key, "1") == "error_not_enqueued"
    assert await waiters(raw, server.port, key) == 0
    assert await a.ask("r", key, token) == "ok"
    grant(await c.ask("l", key, "0"))


async def test_enqueue_state_is_per_connection_and_key(server: ServerProcess, raw: Raws) -> None:
    a, b = await raw.connect(server.port), await raw.connect(server.port)
    key = unique("pend")
    token = grant(await a.ask("e", key, "5"), "acquired", lease=5)
    assert await b.ask("w", key, "0") == "error_not_enqueued"  # another connection's
    assert await a.ask("sw", key, "0") == "error_not_enqueued"  # the lock's, not a semaphore's
    assert await a.ask("e", key, "") == "error_already_enqueued"
    sem_token = grant(await a.ask("se", key, "2"), "acquired", lease=DEFAULT_LEASE)
    assert await a.ask("se", key, "2") == "error_already_enqueued"
    assert await a.ask("sw", key, "0") == f"ok {sem_token} {DEFAULT_LEASE}"
    assert await a.ask("w", key, "0") == f"ok {token} 5"
    assert await a.ask("r", key, token) == "ok"
    assert await a.ask("sr", key, sem_token) == "ok"


async def test_renew_after_expiry_is_an_error_and_hands_off(
    server: ServerProcess, raw: Raws
) -> None:
    a, b = await raw.connect(server.port), await raw.connect(server.port)
    key = unique("exp")
    token = grant(await a.ask("l", key, "0 1"), lease=1)
    assert await b.ask("e", key, "") == "queued"
    token_b = grant(await b.ask("w", key, "5"))  # granted once the 1 s lease runs out
    assert await a.ask("n", key, f"{token} 5") == "error"  # never resurrected
    assert await a.ask("r", key, token) == "error"
    assert await b.ask("r", key, token_b) == "ok"


async def test_lease_expired_after_promotion(server: ServerProcess, raw: Raws) -> None:
    a, b, c = [await raw.connect(server.port) for _ in range(3)]
    key = unique("promo")
    token = grant(await a.ask("l", key, "0"))
    assert await b.ask("e", key, "1") == "queued"
    assert await a.ask("r", key, token) == "ok"  # b is promoted; its 1 s lease runs

    await until_free(c, key, "the promoted lease ran out")
    assert await b.ask("w", key, "5") == "error_lease_expired"
    assert await b.ask("w", key, "0") == "error_not_enqueued"


async def test_lease_expired_after_an_acquired_enqueue(server: ServerProcess, raw: Raws) -> None:
    a, c = await raw.connect(server.port), await raw.connect(server.port)
    key = unique("promo2")
    grant(await a.ask("e", key, "1"), "acquired", lease=1)

    await until_free(c, key, "the enqueued lease ran out")
    assert await a.ask("w", key, "5") == "error_lease_expired"


# -- limits ------------------------------------------------------------------------------------


async def test_max_locks(serve: Serve, raw: Raws) -> None:
    server = serve("--dflockd-max-locks", "2")
    conn = await raw.connect(server.port)
    token = grant(await conn.ask("l", "a", "0"))
    grant(await conn.ask("sl", "b", "0 2"))
    assert await conn.ask("l", "c", "0") == "error_max_locks"
    assert await conn.ask("sl", "c", "0 2") == "error_max_locks"
    assert await conn.ask("e", "c", "") == "error_max_locks"
    assert await conn.ask("se", "c", "2") == "error_max_locks"
    assert await conn.ask("sl", "a", "0 2") == "error_max_locks"  # namespaces count apart
    # Existing keys still work, idle ones too.
    assert await conn.ask("r", "a", token) == "ok"
    token = grant(await conn.ask("l", "a", "0"))
    grant(await conn.ask("sl", "b", "0 2"))


async def test_max_waiters(serve: Serve, raw: Raws) -> None:
    server = serve("--dflockd-max-waiters", "1")
    a, b, c = [await raw.connect(server.port) for _ in range(3)]
    grant(await a.ask("l", "k", "0"))
    assert await b.ask("e", "k", "") == "queued"
    assert await c.ask("e", "k", "") == "error_max_waiters"
    assert await c.ask("l", "k", "5") == "error_max_waiters"
    assert await c.ask("l", "k", "0") == "timeout"  # a try-lock never queues
    grant(await a.ask("sl", "s", "0 1"))
    assert await b.ask("se", "s", "1") == "queued"
    assert await c.ask("sl", "s", "5 1") == "error_max_waiters"
    assert await c.ask("ping") == "ok"


# -- connections ------------------------------------------------------------------------------


async def test_disconnect_drops_waiters(server: ServerProcess, raw: Raws) -> None:
    holder, in_l, in_w, in_e, last = [await raw.connect(server.port) for _ in range(5)]
    key = unique("drop")
    token = grant(await holder.ask("l", key, "0"))
    assert await in_w.ask("e", key, "") == "queued"
    assert await in_e.ask("e", key, "") == "queued"
    blocked = [
        asyncio.ensure_future(in_l.ask("l", key, "30")),  # blocked in `l`
        asyncio.ensure_future(in_w.ask("w", key, "30")),  # blocked in `w`
    ]
    await queued(raw, server.port, key, 3)
    assert await last.ask("e", key, "") == "queued"
    await queued(raw, server.port, key, 4)
    for task in blocked:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    for gone in (in_l, in_w, in_e):  # the third only enqueued
        await gone.close()
    await queued(raw, server.port, key, 1)
    assert await holder.ask("r", key, token) == "ok"
    grant(await last.ask("w", key, "5"))  # the departed never got it


async def test_disconnect_releases_what_the_connection_holds(
    server: ServerProcess, raw: Raws
) -> None:
    a, b = await raw.connect(server.port), await raw.connect(server.port)
    key, sem = unique("auto"), unique("autosem")
    grant(await a.ask("l", key, "0 60"))
    grant(await a.ask("sl", sem, "0 1 60"))
    grant(await a.ask("e", unique("pending"), ""), "acquired", lease=DEFAULT_LEASE)
    await a.close()
    grant(await b.ask("l", key, "5"))
    grant(await b.ask("sl", sem, "5 1"))


async def test_without_auto_release_a_grant_outlives_its_connection(
    serve: Serve, raw: Raws
) -> None:
    server = serve("--dflockd-auto-release", "false")
    a, b = await raw.connect(server.port), await raw.connect(server.port)
    token = grant(await a.ask("l", "kept", "0 60"))
    grant(await a.ask("l", "short", "0 1"))
    assert await b.ask("e", "kept", "") == "queued"
    waiting = await raw.connect(server.port)
    assert await waiting.ask("e", "short", "") == "queued"
    await waiting.close()  # its waiter goes whatever the setting
    await a.close()

    async def one_connection() -> bool:
        return bool((await stats(raw, server.port))["connections"] == 2)  # b and the asker

    await until(one_connection, "the server saw the close")
    document = await stats(raw, server.port)
    kept = entry(document, "locks", "kept")
    assert kept is not None
    assert kept["waiters"] == 1
    assert await b.ask("w", "kept", "0") == "timeout"
    assert await b.ask("l", "kept", "0") == "timeout"
    assert await b.ask("r", "kept", token) == "ok"  # its token still releases it
    grant(await b.ask("l", "kept", "0"))
    grant(await b.ask("l", "short", "5"))  # once its 1 s lease ran out


async def test_idle_keys_are_collected(serve: Serve, raw: Raws) -> None:
    server = serve(
        "--dflockd-gc-interval", "0.2", "--dflockd-gc-max-idle", "0.5", "--dflockd-max-locks", "2"
    )
    conn = await raw.connect(server.port)
    sem_token = grant(await conn.ask("sl", "s", "0 2"))
    assert await conn.ask("sr", "s", sem_token) == "ok"
    token = grant(await conn.ask("l", "a", "0"))
    assert await conn.ask("r", "a", token) == "ok"
    assert await conn.ask("l", "b", "0") == "error_max_locks"
    assert await conn.ask("sl", "s", "0 3") == "error_limit_mismatch"

    async def collected() -> bool:
        # Failed releases and renews are no activity: they keep nothing alive (§15.8).
        assert await conn.ask("r", "a", token) == "error"
        assert await conn.ask("n", "a", token) == "error"
        assert await conn.ask("sr", "s", sem_token) == "error"
        assert await conn.ask("sn", "s", BOGUS_TOKEN) == "error"
        document = await stats(raw, server.port)
        return not document["idle_locks"] and not document["idle_semaphores"]

    await until(collected, "the idle keys were collected")
    grant(await conn.ask("sl", "s", "0 3"))  # a new limit
    grant(await conn.ask("l", "b", "0"))  # room again


async def test_a_held_lock_survives_silence_but_a_stalled_request_does_not(
    serve: Serve, raw: Raws
) -> None:
    server = serve("--idle-timeout", "1")
    quiet, stalled = await raw.connect(server.port), await raw.connect(server.port)
    endless = await raw.connect(server.port)
    token = grant(await quiet.ask("l", "k", "0 30"))
    await stalled.send(b"l\nk2\n")  # two lines of three
    await endless.send(b"ping\n_\n_\n" + b"x" * 10_000)  # an over-long line that never ends
    await asyncio.sleep(2.5)
    assert await quiet.ask("n", "k", f"{token} 30") == "ok 30"
    assert await stalled.rest() == b"error\n"
    assert await endless.rest() == b"ok\nerror\n"
    assert await quiet.ask("r", "k", token) == "ok"


async def test_draining(serve: Serve, raw: Raws) -> None:
    server = serve("--shutdown-grace", "5")
    conn = await raw.connect(server.port)
    grant(await conn.ask("l", "k", "0"))
    server.proc.send_signal(signal.SIGTERM)
    server.wait_log('"msg": "shutting down"')
    assert await conn.ask("l", "k2", "0") == "error_draining"
    assert await conn.ask("ping") == "error_draining"
    await conn.close()
    assert server.proc.wait(timeout=WAIT) == 0


async def test_a_renewing_connection_does_not_own_the_grant(
    server: ServerProcess, raw: Raws
) -> None:
    owner, renewer = await raw.connect(server.port), await raw.connect(server.port)
    key = unique("owned")
    token = grant(await owner.ask("l", key, "0 30"))
    assert await renewer.ask("n", key, f"{token} 30") == "ok 30"
    await renewer.close()  # auto-release frees what *it* acquired: nothing (§15.9)
    late = await raw.connect(server.port)
    assert await late.ask("ping") == "ok"

    async def closed() -> bool:  # owner, late and the asker are left
        return bool((await stats(raw, server.port))["connections"] == 3)

    await until(closed, "the renewer's close was seen")
    assert await late.ask("l", key, "0") == "timeout"
    assert await owner.ask("r", key, token) == "ok"


async def test_a_promoted_waiter_gets_its_grant_at_once(server: ServerProcess, raw: Raws) -> None:
    a, b, c = [await raw.connect(server.port) for _ in range(3)]
    key = unique("promoted")
    token = grant(await a.ask("l", key, "0"))
    assert await b.ask("e", key, "20") == "queued"
    assert await a.ask("r", key, token) == "ok"  # b holds it now, before its `w`
    assert await c.ask("l", key, "0") == "timeout"
    token_b = grant(await b.ask("w", key, "0"), lease=20)  # no wait even with timeout 0
    assert fence(token_b) > fence(token)
    assert await c.ask("r", key, token_b) == "ok"


async def test_without_auto_release_grants_outlive_a_restart(
    serve: Serve, raw: Raws, tmp_path: Path
) -> None:
    data = tmp_path / "kept"
    server = serve("--dflockd-auto-release", "false", data_dir=data)
    conn = await raw.connect(server.port)
    token = grant(await conn.ask("l", "k", "0 60"))
    sem_token = grant(await conn.ask("sl", "s", "0 2 60"))
    await conn.close()
    assert server.signal(signal.SIGTERM) == 0
    server.kill()
    server = serve("--dflockd-auto-release", "false", data_dir=data)
    conn = await raw.connect(server.port)
    assert await conn.ask("l", "k", "0") == "timeout"
    assert await conn.ask("sl", "s", "0 3") == "error_limit_mismatch"
    assert await conn.ask("n", "k", f"{token} 30") == "ok 30"  # the old token still works
    assert await conn.ask("r", "k", token) == "ok"
    assert await conn.ask("sr", "s", sem_token) == "ok"
    later = grant(await conn.ask("l", "k", "0"))
    assert fence(later) > fence(sem_token) > fence(token)


async def test_with_auto_release_a_restart_frees_everything(
    serve: Serve, raw: Raws, tmp_path: Path
) -> None:
    data = tmp_path / "kept"
    server = serve(data_dir=data)
    conn = await raw.connect(server.port)
    token = grant(await conn.ask("l", "k", "0 60"))
    server.signal(signal.SIGKILL)  # no goodbye: the restart must clean up
    server.kill()
    await conn.close()
    server = serve(data_dir=data)
    conn = await raw.connect(server.port)
    later = grant(await conn.ask("l", "k", "0"))
    assert fence(later) > fence(token)
    assert await conn.ask("r", "k", token) == "error"


async def test_over_max_connections_nothing_is_written(serve: Serve, raw: Raws) -> None:
    # Spec 9.7: the connection is closed with nothing written (the main port tells
    # from the first byte that this is no native client, which would get a Refused).
    server = serve("--max-connections", "1")
    first = await raw.connect(server.port)
    assert await first.ask("ping") == "ok"
    second = await raw.connect(server.port)
    await second.send(wire_frame("ping", "_", "_"))
    assert await second.rest() == b""
    assert await first.ask("ping") == "ok"


# -- auth and TLS -------------------------------------------------------------------------


async def test_auth(serve: Serve, raw: Raws, auth_file: Path) -> None:
    server = serve("--auth-file", str(auth_file))
    conn = await raw.connect(server.port)
    assert await conn.ask("auth", "_", SECRET) == "ok"
    token = grant(await conn.ask("l", "k", "5"))
    assert await conn.ask("auth", "_", SECRET) == "error"  # not a command after success
    assert await conn.ask("r", "k", token) == "ok"

    padded = await raw.connect(server.port)
    assert await padded.ask("auth", "anything", f"  {SECRET}\t") == "ok"  # trimmed
    assert await padded.ask("ping") == "ok"

    for first in (
        ("l", "k", "5"),  # no handshake
        ("auth", "_", "wrong"),
        ("auth", "_", ""),
        ("auth", "_", READ_ONLY_SECRET),  # dflockd needs read-write on its nodes
        ("auth", "_", NARROW_SECRET),  # a token limited to other nodes
        ("ping", "_", "_"),
        ("bogus", "k", "x"),  # malformed
    ):
        refused = await raw.connect(server.port)
        await refused.send("{}\n{}\n{}\n".format(*first).encode())
        assert await refused.rest() == b"error_auth\n", first
    other = await raw.connect(server.port)
    assert await other.ask("auth", "_", SECRET) == "ok"
    grant(await other.ask("l", "k", "0"))  # the refusals took nothing


async def test_a_refused_auth_always_answers_error_auth(
    serve: Serve, raw: Raws, auth_file: Path
) -> None:
    server = serve("--auth-file", str(auth_file))
    conns = [await raw.connect(server.port) for _ in range(30)]  # at once, as above
    for index, conn in enumerate(conns):
        await conn.send(b"auth\n_\nwrong\n" if index % 2 else b"l\nk\n5\n")
    answers = await asyncio.gather(*(conn.rest() for conn in conns))
    assert answers == [b"error_auth\n"] * len(conns)


async def test_auth_without_a_secret_is_no_command(server: ServerProcess, raw: Raws) -> None:
    conn = await raw.connect(server.port)
    assert await conn.ask("auth", "_", "whatever") == "error"
    assert await conn.ask("ping") == "ok"


async def test_tls(serve: Serve, raw: Raws, pki: Pki) -> None:
    server = serve("--tls-cert", str(pki.cert), "--tls-key", str(pki.key))
    conn = await raw.connect(server.port, tls=pki.client_context())
    token = grant(await conn.ask("l", "k", "0"))
    assert await conn.ask("r", "k", token) == "ok"
    plain = await raw.connect(server.port)  # the TLS port never speaks plain text
    await plain.send(b"ping\n_\n_\n")
    try:
        answer = await asyncio.wait_for(plain.reader.read(65536), WAIT)
    except ConnectionError:
        answer = b""
    assert not answer.startswith(b"ok"), answer


async def test_dflockd_port(serve: Serve, raw: Raws) -> None:
    extra = free_port()
    server = serve("--dflockd-port", str(extra))
    conn = await raw.connect(extra)
    token = grant(await conn.ask("l", "k", "0"))
    main = await raw.connect(server.port)
    assert await main.ask("l", "k", "0") == "timeout"  # one service behind both ports
    assert await main.ask("r", "k", token) == "ok"


# -- beside the native protocol -----------------------------------------------------------


async def test_native_protocol_alongside(server: ServerProcess, raw: Raws) -> None:
    conn = await raw.connect(server.port)
    key = unique("both-protocols")
    token = grant(await conn.ask("l", key, "0 30"))
    async with (
        tenure.connect(f"tenure://127.0.0.1:{server.port}") as client,
        client.session("dflockd") as session,
    ):
        description = await session.semaphore(key).describe(owners=True)
        assert len(description.owners) == 1
        assert description.owners[0].token == fence(token)
        assert await session.mutex(key).try_lock() is None  # dflockd holds it
        assert await conn.ask("r", key, token) == "ok"
        lock = await session.mutex(key).try_lock()
        assert lock is not None
        assert await conn.ask("l", key, "0") == "timeout"  # the native holder excludes it
        blocked = asyncio.ensure_future(conn.ask("l", key, "10"))
        await queued(raw, server.port, key, 1)
        await lock.release()
        token = grant(await blocked)  # handed over across the protocols
        assert fence(token) > lock.token
        assert await conn.ask("r", key, token) == "ok"
        assert await conn.ask("ping") == "ok"


async def test_native_sees_dflockd_semaphores(server: ServerProcess, raw: Raws) -> None:
    conn = await raw.connect(server.port)
    key = unique("native-sem")
    token = grant(await conn.ask("sl", key, "0 3 30"))
    async with (
        tenure.connect(f"tenure://127.0.0.1:{server.port}") as client,
        client.session("dflockd-semaphores") as session,
    ):
        description = await session.semaphore(key).describe(owners=True)
        assert description.limit == 3
        assert [owner.token for owner in description.owners] == [fence(token)]
    assert await conn.ask("sr", key, token) == "ok"
