"""Describe and watches on raw Session streams, and the multi-count FIFO queue.

A watch is one-shot and answered ``DescribeSemaphoreChanged`` with the describe's
``req_id``, saying whether the data and the owners changed (YDB's rules, with the
one ours keeps on purpose: owners come in grant order, ``order_id`` their fencing
token). Watchers sit on their own streams, so their next message is the change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import tenure
from tests.ydb_face.conftest import DATABASE, YdbServer
from tests.ydb_face.raw import (
    Session,
    Status,
    new_node,
    nothing_pending,
    open_session,
    quiet_server,  # noqa: F401  (the module's server)
    sessions,
)

pytestmark = pytest.mark.timeout(60)

Raw = Callable[..., Any]


async def watch(session: Session, name: str, **flags: bool) -> int:
    """Describe ``name`` with a watch (``watch_data``/``watch_owners``); the req_id."""
    req_id = await session.send("describe_semaphore", name=name, **flags)
    result = await session.next("describe_semaphore_result", req_id)
    assert result.status == Status.SUCCESS, result
    assert result.watch_added
    return req_id


async def changed(session: Session, req_id: int) -> tuple[bool, bool]:
    """The next message: the change of the watch ``req_id`` armed; (data, owners)."""
    body = await session.next("describe_semaphore_changed", req_id)
    return body.data_changed, body.owners_changed


async def test_describe_lists_owners_in_grant_order_and_the_waiters(
    server: YdbServer, raw: Raw
) -> None:
    a, b, c, d = await sessions(server, raw, 4)
    await a.ok("create_semaphore", name="s", limit=3, data=b"cfg")
    assert (await a.ok("acquire_semaphore", name="s", count=1, data=b"a")).acquired
    assert (await b.ok("acquire_semaphore", name="s", count=2, data=b"b")).acquired
    waiting = await c.send("acquire_semaphore", name="s", count=3, data=b"c", timeout_millis=60_000)
    await c.next("acquire_semaphore_pending", waiting)
    result = await d.ok("describe_semaphore", name="s", include_owners=True, include_waiters=True)
    described = result.semaphore_description
    assert (described.data, described.count, described.limit) == (b"cfg", 3, 3)
    owners = [(o.session_id, o.count, o.data) for o in described.owners]
    assert owners == [(a.session_id, 1, b"a"), (b.session_id, 2, b"b")]
    first, second = (o.order_id for o in described.owners)
    assert 0 < first < second
    assert [(w.session_id, w.count, w.data) for w in described.waiters] == [(c.session_id, 3, b"c")]
    bare = (await d.ok("describe_semaphore", name="s")).semaphore_description
    assert (list(bare.owners), list(bare.waiters)) == ([], [])  # only when asked
    assert (await a.ok("release_semaphore", name="s")).released
    assert (await b.ok("release_semaphore", name="s")).released
    assert (await c.next("acquire_semaphore_result", waiting)).acquired
    later = await d.ok("describe_semaphore", name="s", include_owners=True)
    (third,) = (o.order_id for o in later.semaphore_description.owners)
    assert third > second  # every grant gets a larger one


async def test_a_data_change_fires_a_data_watch(server: YdbServer, raw: Raw) -> None:
    a, watcher = await sessions(server, raw, 2)
    await a.ok("create_semaphore", name="s", limit=1, data=b"v1")
    req_id = await watch(watcher, "s", watch_data=True)
    assert (await a.ok("acquire_semaphore", name="s", count=1)).acquired
    await a.ok("update_semaphore", name="s", data=b"v1")  # the same data: no change
    await nothing_pending(watcher)  # (and a new owner is none of a data watch's business)
    await a.ok("update_semaphore", name="s", data=b"v2")
    assert await changed(watcher, req_id) == (True, False)
    await a.ok("update_semaphore", name="s", data=b"v3")
    await nothing_pending(watcher)  # one-shot


async def test_an_owners_change_fires_an_owners_watch(server: YdbServer, raw: Raw) -> None:
    a, watcher = await sessions(server, raw, 2)
    await a.ok("create_semaphore", name="s", limit=1)
    req_id = await watch(watcher, "s", watch_owners=True)
    assert (await a.ok("acquire_semaphore", name="s", count=1)).acquired
    assert await changed(watcher, req_id) == (False, True)
    again = await watch(watcher, "s", watch_owners=True)
    assert (await a.ok("release_semaphore", name="s")).released
    assert await changed(watcher, again) == (False, True)


async def test_a_second_watch_tells_the_first_nothing_changed_before_its_result(
    server: YdbServer, raw: Raw
) -> None:
    a, watcher = await sessions(server, raw, 2)
    await a.ok("create_semaphore", name="s", limit=1)
    first = await watch(watcher, "s", watch_data=True)
    second = await watcher.send("describe_semaphore", name="s", watch_owners=True)
    assert await changed(watcher, first) == (False, False)
    result = await watcher.next("describe_semaphore_result", second)
    assert result.watch_added
    assert (await a.ok("acquire_semaphore", name="s", count=1)).acquired
    assert await changed(watcher, second) == (False, True)


async def test_a_deleted_semaphore_fires_everything(server: YdbServer, raw: Raw) -> None:
    a, watcher = await sessions(server, raw, 2)
    await a.ok("create_semaphore", name="s", limit=1)
    req_id = await watch(watcher, "s", watch_data=True)
    await a.ok("delete_semaphore", name="s")
    assert await changed(watcher, req_id) == (True, True)
    assert (await a.ok("acquire_semaphore", name="e", count=1, ephemeral=True)).acquired
    ephemeral = await watch(watcher, "e", watch_owners=True)
    assert (await a.ok("release_semaphore", name="e")).released  # its last holder
    assert await changed(watcher, ephemeral) == (True, True)


async def test_a_describe_without_watch_flags_keeps_the_watch(server: YdbServer, raw: Raw) -> None:
    a, watcher = await sessions(server, raw, 2)
    await a.ok("create_semaphore", name="s", limit=1, data=b"v1")
    req_id = await watch(watcher, "s", watch_data=True)
    plain = await watcher.ok("describe_semaphore", name="s", include_owners=True)
    assert not plain.watch_added
    await a.ok("update_semaphore", name="s", data=b"v2")
    assert await changed(watcher, req_id) == (True, False)


async def test_a_watch_on_a_missing_semaphore_is_not_found_and_not_added(
    server: YdbServer, raw: Raw
) -> None:
    (watcher,) = await sessions(server, raw, 1)
    missing = await watcher.result("describe_semaphore", name="never", watch_data=True)
    assert missing.status == Status.NOT_FOUND
    assert not missing.watch_added
    await watcher.ok("create_semaphore", name="never", limit=1)
    await watcher.ok("update_semaphore", name="never", data=b"x")
    await nothing_pending(watcher)


async def test_a_big_waiter_at_the_head_is_not_overtaken_by_a_small_one(
    server: YdbServer, raw: Raw
) -> None:
    path = await new_node(server)
    a, big, small = [await open_session(raw, path) for _ in range(3)]
    await a.ok("create_semaphore", name="s", limit=3)
    assert (await a.ok("acquire_semaphore", name="s", count=2)).acquired
    wants_all = await big.send("acquire_semaphore", name="s", count=3, timeout_millis=60_000)
    await big.next("acquire_semaphore_pending", wants_all)
    wants_one = await small.send("acquire_semaphore", name="s", count=1, timeout_millis=60_000)
    await small.next("acquire_semaphore_pending", wants_one)  # one is free, yet it waits
    busy = await small.ok("describe_semaphore", name="s", include_waiters=True)
    assert [w.session_id for w in busy.semaphore_description.waiters] == [
        big.session_id,
        small.session_id,
    ]
    assert (await a.ok("release_semaphore", name="s")).released
    assert (await big.next("acquire_semaphore_result", wants_all)).acquired
    await nothing_pending(small)
    assert (await big.ok("release_semaphore", name="s")).released
    assert (await small.next("acquire_semaphore_result", wants_one)).acquired


async def test_an_owners_watch_ignores_waiters_and_fires_on_a_data_change(
    server: YdbServer, raw: Raw
) -> None:
    a, b, watcher = await sessions(server, raw, 3)
    await a.ok("create_semaphore", name="s", limit=1)
    assert (await a.ok("acquire_semaphore", name="s", count=1)).acquired
    req_id = await watch(watcher, "s", watch_owners=True)
    waiting = await b.send("acquire_semaphore", name="s", count=1, timeout_millis=60_000)
    await b.next("acquire_semaphore_pending", waiting)
    await nothing_pending(watcher)  # a new waiter is no change of the owners
    await a.ok("update_semaphore", name="s", data=b"new")
    assert await changed(watcher, req_id) == (True, False)


async def test_an_owners_order_id_is_its_fencing_token(server: YdbServer, raw: Raw) -> None:
    path = await new_node(server)
    a, b = await open_session(raw, path), await open_session(raw, path)
    await a.ok("create_semaphore", name="s", limit=2)
    assert (await a.ok("acquire_semaphore", name="s", count=1)).acquired
    assert (await b.ok("acquire_semaphore", name="s", count=1)).acquired
    result = await a.ok("describe_semaphore", name="s", include_owners=True)
    order_ids = {o.session_id: o.order_id for o in result.semaphore_description.owners}
    node = path.removeprefix(f"{DATABASE}/")  # the same node through tenure://
    async with tenure.connect(server.url) as client, client.session(node) as session:
        described = await session.semaphore("s").describe(owners=True)
    assert {o.session_id: o.token for o in described.owners} == order_ids
