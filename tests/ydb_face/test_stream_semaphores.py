"""Semaphore requests on raw Session streams: the exact answers YDB's coordination
service gives (statuses, Pending then the result, ABORTED, watches, FIFO).

Each test opens its own node on the module server and one stream per session; a
``Session.next``/``ok`` asserts the very next message of that stream, so an answer
that is missing, extra or out of order fails the test. Ours differs from YDB on
purpose in one place seen here: a describe's owners come in grant order (YDB's are
in no order), with their fencing tokens as ``order_id``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.ydb_face.conftest import YdbServer
from tests.ydb_face.raw import (
    Status,
    nothing_pending,
    quiet_server,  # noqa: F401  (the module's server)
    sessions,
)

pytestmark = pytest.mark.timeout(60)

Raw = Callable[..., Any]

#: The limit of an ephemeral semaphore (YDB's ``Max<ui64>``).
EPHEMERAL_LIMIT = 2**64 - 1


async def test_create_update_delete_describe_statuses(server: YdbServer, raw: Raw) -> None:
    (a,) = await sessions(server, raw, 1)
    zero = await a.result("create_semaphore", name="s", limit=0)
    assert zero.status == Status.BAD_REQUEST
    assert zero.issues[0].message == "Semaphores must have limit > 0"
    await a.ok("create_semaphore", name="s", limit=2, data=b"one")
    assert (await a.result("create_semaphore", name="s", limit=2)).status == Status.ALREADY_EXISTS
    described = (await a.ok("describe_semaphore", name="s")).semaphore_description
    assert (described.name, described.limit, described.count, described.data) == ("s", 2, 0, b"one")
    assert not described.ephemeral
    await a.ok("update_semaphore", name="s", data=b"two")
    assert (await a.ok("describe_semaphore", name="s")).semaphore_description.data == b"two"
    for request in ("update_semaphore", "describe_semaphore", "delete_semaphore"):
        missing = await a.result(request, name="nope")
        assert missing.status == Status.NOT_FOUND, request
    await a.ok("delete_semaphore", name="s")
    assert (await a.result("describe_semaphore", name="s")).status == Status.NOT_FOUND


async def test_an_ephemeral_semaphore_cannot_be_created_over_or_deleted(
    server: YdbServer, raw: Raw
) -> None:
    (a,) = await sessions(server, raw, 1)
    assert (await a.ok("acquire_semaphore", name="e", count=1, ephemeral=True)).acquired
    over = await a.result("create_semaphore", name="e", limit=1)
    assert over.status == Status.PRECONDITION_FAILED
    assert over.issues[0].message == "Cannot create semaphore due to ephemeral locks"
    deleted = await a.result("delete_semaphore", name="e", force=True)
    assert deleted.status == Status.PRECONDITION_FAILED
    assert deleted.issues[0].message == "Cannot delete ephemeral semaphores"
    await a.ok("update_semaphore", name="e", data=b"may")  # its data may change
    assert (await a.ok("describe_semaphore", name="e")).semaphore_description.data == b"may"
    mismatch = await a.result("acquire_semaphore", name="e", count=1, ephemeral=False)
    assert mismatch.status == Status.PRECONDITION_FAILED
    await a.ok("create_semaphore", name="p", limit=1)
    assert (
        await a.result("acquire_semaphore", name="p", count=1, ephemeral=True)
    ).status == Status.PRECONDITION_FAILED
    missing = await a.result("acquire_semaphore", name="never", count=1)
    assert missing.status == Status.NOT_FOUND


async def test_delete_non_empty_needs_force_and_aborts_the_waiters(
    server: YdbServer, raw: Raw
) -> None:
    a, b = await sessions(server, raw, 2)
    await a.ok("create_semaphore", name="s", limit=1)
    assert (await a.ok("acquire_semaphore", name="s", count=1)).acquired
    waiting = await b.send("acquire_semaphore", name="s", count=1, timeout_millis=2**64 - 1)
    await b.next("acquire_semaphore_pending", waiting)
    refused = await a.result("delete_semaphore", name="s")
    assert refused.status == Status.PRECONDITION_FAILED
    await a.ok("delete_semaphore", name="s", force=True)
    aborted = await b.next("acquire_semaphore_result", waiting)
    assert aborted.status == Status.ABORTED
    assert aborted.issues[0].message == "Semaphore destroyed"
    assert not aborted.acquired
    await nothing_pending(a)  # an owner loses a deleted semaphore silently
    assert (await b.result("describe_semaphore", name="s")).status == Status.NOT_FOUND


async def test_acquire_granted_queued_busy_and_timed_out(server: YdbServer, raw: Raw) -> None:
    a, b = await sessions(server, raw, 2)
    await a.ok("create_semaphore", name="s", limit=1)
    granted = await a.ok("acquire_semaphore", name="s", count=1, data=b"a")
    assert granted.acquired  # the result only: no Pending before it
    busy = await b.ok("acquire_semaphore", name="s", count=1, timeout_millis=0)
    assert not busy.acquired  # at once, without a Pending
    expiring = await b.send("acquire_semaphore", name="s", count=1, timeout_millis=200)
    await b.next("acquire_semaphore_pending", expiring)
    expired = await b.next("acquire_semaphore_result", expiring)
    assert expired.status == Status.SUCCESS
    assert not expired.acquired
    queued = await b.send("acquire_semaphore", name="s", count=1, timeout_millis=60_000)
    await b.next("acquire_semaphore_pending", queued)
    assert (await a.ok("release_semaphore", name="s")).released
    assert (await b.next("acquire_semaphore_result", queued)).acquired
    await nothing_pending(b)


@pytest.mark.parametrize(
    ("count", "timeout", "why"),
    [
        (0, 0, "Acquire must have count > 0"),
        (3, 0, "Cannot acquire more than allowed"),
        (1, 86_400_001, "Acquire timeout is out of range"),  # a day at most, or forever
    ],
)
async def test_acquire_count_zero_over_the_limit_or_too_long_is_bad_request(
    server: YdbServer, raw: Raw, count: int, timeout: int, why: str
) -> None:
    (a,) = await sessions(server, raw, 1)
    await a.ok("create_semaphore", name="s", limit=2)
    refused = await a.result("acquire_semaphore", name="s", count=count, timeout_millis=timeout)
    assert refused.status == Status.BAD_REQUEST
    assert refused.issues[0].message.startswith(why)


async def test_acquire_may_not_increase_the_count_held_or_waited_for(
    server: YdbServer, raw: Raw
) -> None:
    a, b = await sessions(server, raw, 2)
    await a.ok("create_semaphore", name="s", limit=3)
    assert (await a.ok("acquire_semaphore", name="s", count=2)).acquired
    more = await a.result("acquire_semaphore", name="s", count=3)
    assert more.status == Status.BAD_REQUEST
    assert more.issues[0].message == "Increasing count is not allowed"
    waiting = await b.send("acquire_semaphore", name="s", count=2, timeout_millis=60_000)
    await b.next("acquire_semaphore_pending", waiting)
    larger = await b.result("acquire_semaphore", name="s", count=3)
    assert larger.status == Status.BAD_REQUEST
    assert larger.issues[0].message == "Increasing count is not allowed"
    assert (await a.ok("release_semaphore", name="s")).released
    granted = await b.next("acquire_semaphore_result", waiting)  # the waiter was untouched
    assert granted.acquired


async def test_an_ephemeral_semaphore_lives_while_it_has_holders(
    server: YdbServer, raw: Raw
) -> None:
    a, b = await sessions(server, raw, 2)
    assert (await a.ok("acquire_semaphore", name="e", count=1, ephemeral=True)).acquired
    assert (await b.ok("acquire_semaphore", name="e", count=1, ephemeral=True)).acquired
    described = (
        await a.ok("describe_semaphore", name="e", include_owners=True)
    ).semaphore_description
    assert described.ephemeral
    assert (described.limit, described.count, len(described.owners)) == (EPHEMERAL_LIMIT, 2, 2)
    assert (await a.ok("release_semaphore", name="e")).released
    assert (await b.ok("describe_semaphore", name="e")).semaphore_description.count == 1
    assert (await b.ok("release_semaphore", name="e")).released
    assert (await a.result("describe_semaphore", name="e")).status == Status.NOT_FOUND


async def test_a_re_sent_acquire_keeps_its_place_and_aborts_the_old_request(
    server: YdbServer, raw: Raw
) -> None:
    a, b, c = await sessions(server, raw, 3)
    await a.ok("create_semaphore", name="s", limit=1)
    assert (await a.ok("acquire_semaphore", name="s", count=1)).acquired
    first = await b.send("acquire_semaphore", name="s", count=1, timeout_millis=60_000)
    await b.next("acquire_semaphore_pending", first)
    behind = await c.send("acquire_semaphore", name="s", count=1, timeout_millis=60_000)
    await c.next("acquire_semaphore_pending", behind)
    again = await b.send("acquire_semaphore", name="s", count=1, timeout_millis=60_000)
    superseded = await b.next("acquire_semaphore_result", first)
    assert superseded.status == Status.ABORTED
    assert superseded.issues[0].message == "Operation superseded by another request"
    await b.next("acquire_semaphore_pending", again)
    assert (await a.ok("release_semaphore", name="s")).released
    assert (await b.next("acquire_semaphore_result", again)).acquired  # still ahead of c
    await nothing_pending(c)


async def test_release_of_a_waiter_aborts_its_acquire_and_of_nothing_is_false(
    server: YdbServer, raw: Raw
) -> None:
    a, b = await sessions(server, raw, 2)
    await a.ok("create_semaphore", name="s", limit=1)
    assert (await a.ok("acquire_semaphore", name="s", count=1)).acquired
    waiting = await b.send("acquire_semaphore", name="s", count=1, timeout_millis=60_000)
    await b.next("acquire_semaphore_pending", waiting)
    release = await b.send("release_semaphore", name="s")
    aborted = await b.next("acquire_semaphore_result", waiting)
    assert aborted.status == Status.ABORTED
    assert aborted.issues[0].message == "Operation superseded by another request"
    assert not aborted.acquired
    released = await b.next("release_semaphore_result", release)
    assert released.status == Status.SUCCESS
    assert released.released
    again = await b.ok("release_semaphore", name="s")  # neither owner nor waiter now
    assert not again.released
    missing = await b.ok("release_semaphore", name="never-made")
    assert not missing.released
    assert (
        await a.ok("describe_semaphore", name="s", include_waiters=True)
    ).semaphore_description.waiters == []


async def test_a_re_sent_acquire_with_timeout_0_gives_up_the_wait(
    server: YdbServer, raw: Raw
) -> None:
    a, b = await sessions(server, raw, 2)
    await a.ok("create_semaphore", name="s", limit=1)
    assert (await a.ok("acquire_semaphore", name="s", count=1)).acquired
    waiting = await b.send("acquire_semaphore", name="s", count=1, timeout_millis=60_000)
    await b.next("acquire_semaphore_pending", waiting)
    trying = await b.send("acquire_semaphore", name="s", count=1, timeout_millis=0)
    superseded = await b.next("acquire_semaphore_result", waiting)
    assert superseded.status == Status.ABORTED
    assert superseded.issues[0].message == "Operation superseded by another request"
    gave_up = await b.next("acquire_semaphore_result", trying)
    assert gave_up.status == Status.SUCCESS
    assert not gave_up.acquired
    described = await a.ok("describe_semaphore", name="s", include_waiters=True)
    assert list(described.semaphore_description.waiters) == []


async def test_an_owner_may_acquire_again_with_the_same_or_a_lower_count(
    server: YdbServer, raw: Raw
) -> None:
    a, b = await sessions(server, raw, 2)
    await a.ok("create_semaphore", name="s", limit=3)
    assert (await a.ok("acquire_semaphore", name="s", count=2, data=b"x")).acquired
    assert (await a.ok("acquire_semaphore", name="s", count=2, data=b"y")).acquired
    assert (await a.ok("acquire_semaphore", name="s", count=1, data=b"y")).acquired
    described = await b.ok("describe_semaphore", name="s", include_owners=True)
    owners = [(o.session_id, o.count, o.data) for o in described.semaphore_description.owners]
    assert owners == [(a.session_id, 1, b"y")]
    assert (await b.ok("acquire_semaphore", name="s", count=2, timeout_millis=0)).acquired
