"""Where the YDB face answers exactly as YDB's kesus tablet does (issue 27), on raw streams:
a queued acquire asked again is restated in place, describes carry each waiter's
arrival order and timeout, a re-attach restates the session's timeout and
description, and a missing semaphore is named in YDB's words.

The YDB sources each rule comes from are cited in docs/ydb.md.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

import tenure
from tenure.compat.ydb import _protos as pb
from tenure.compat.ydb.semaphores import FOREVER
from tests.server.wire import WAIT
from tests.ydb_face.conftest import YdbServer
from tests.ydb_face.raw import (
    Session,
    Status,
    new_node,
    node_call,
    nothing_pending,
    open_session,
    quiet_server,  # noqa: F401  (the module's server)
    sessions,
)

pytestmark = pytest.mark.timeout(60)

Raw = Callable[..., Any]


async def _held(a: Session, limit: int, count: int) -> None:
    """``a`` makes semaphore ``s`` of ``limit`` tokens and holds ``count``."""
    await a.ok("create_semaphore", name="s", limit=limit)
    assert (await a.ok("acquire_semaphore", name="s", count=count)).acquired


async def _queued(session: Session, count: int, **fields: Any) -> int:
    """``session`` asks for ``count`` of ``s`` and is queued; the request's req_id."""
    fields.setdefault("timeout_millis", 60_000)
    req_id = await session.send("acquire_semaphore", name="s", count=count, **fields)
    await session.next("acquire_semaphore_pending", req_id)
    return req_id


async def _waiters(session: Session) -> list[Any]:
    described = await session.ok("describe_semaphore", name="s", include_waiters=True)
    return list(described.semaphore_description.waiters)


async def test_fewer_tokens_and_new_data_restate_a_waiter_in_place(
    server: YdbServer, raw: Raw
) -> None:
    a, b, c = await sessions(server, raw, 3)
    await _held(a, limit=3, count=3)
    first = await _queued(b, 2, data=b"old")
    behind = await _queued(c, 1)
    before = await _waiters(a)
    again = await b.send("acquire_semaphore", name="s", count=1, data=b"new", timeout_millis=9000)
    superseded = await b.next("acquire_semaphore_result", first)
    assert superseded.status == Status.ABORTED
    assert superseded.issues[0].message == "Operation superseded by another request"
    await b.next("acquire_semaphore_pending", again)
    after = await _waiters(a)
    assert [(w.session_id, w.count, w.data) for w in after] == [
        (b.session_id, 1, b"new"),  # still first: its place kept
        (c.session_id, 1, b""),
    ]
    assert [w.order_id for w in after] == [w.order_id for w in before]
    assert after[0].timeout_millis == 9000  # the new timeout
    assert (await a.ok("release_semaphore", name="s")).released
    assert (await b.next("acquire_semaphore_result", again)).acquired
    assert (await c.next("acquire_semaphore_result", behind)).acquired


async def test_a_head_restated_to_what_now_fits_is_granted_without_pending(
    server: YdbServer, raw: Raw
) -> None:
    a, b, c = await sessions(server, raw, 3)
    await _held(a, limit=3, count=2)
    first = await _queued(b, 2)
    await _queued(c, 1)  # behind b: not granted while b does not fit (no barging)
    again = await b.send("acquire_semaphore", name="s", count=1, timeout_millis=60_000)
    assert (await b.next("acquire_semaphore_result", first)).status == Status.ABORTED
    granted = await b.next("acquire_semaphore_result", again)  # no Pending before it
    assert (granted.status, granted.acquired) == (Status.SUCCESS, True)
    assert [w.session_id for w in await _waiters(a)] == [c.session_id]  # 3 held now


async def test_a_try_of_a_head_that_now_fits_is_granted(server: YdbServer, raw: Raw) -> None:
    a, b = await sessions(server, raw, 2)
    await _held(a, limit=2, count=1)
    first = await _queued(b, 2)
    trying = await b.send("acquire_semaphore", name="s", count=1, timeout_millis=0)
    assert (await b.next("acquire_semaphore_result", first)).status == Status.ABORTED
    assert (await b.next("acquire_semaphore_result", trying)).acquired


async def test_a_restate_restarts_the_timeout(server: YdbServer, raw: Raw) -> None:
    a, b = await sessions(server, raw, 2)
    await _held(a, limit=1, count=1)
    first = await _queued(b, 1, timeout_millis=60_000)
    started = time.monotonic()
    again = await b.send("acquire_semaphore", name="s", count=1, timeout_millis=300)
    assert (await b.next("acquire_semaphore_result", first)).status == Status.ABORTED
    await b.next("acquire_semaphore_pending", again)
    ended = await b.next("acquire_semaphore_result", again)
    assert (ended.status, ended.acquired) == (Status.SUCCESS, False)  # timed out, as YDB says
    assert time.monotonic() - started < WAIT
    assert await _waiters(a) == []


async def test_waiters_are_described_with_arrival_order_and_timeout(
    server: YdbServer, raw: Raw
) -> None:
    a, b, c, d = await sessions(server, raw, 4)
    await _held(a, limit=1, count=1)
    await _queued(b, 1, timeout_millis=45_000)
    await _queued(c, 1, timeout_millis=FOREVER)
    await _queued(d, 1, timeout_millis=1234)
    waiters = await _waiters(a)
    assert [(w.session_id, w.timeout_millis) for w in waiters] == [
        (b.session_id, 45_000),
        (c.session_id, FOREVER),
        (d.session_id, 1234),
    ]
    orders = [w.order_id for w in waiters]
    assert 0 < orders[0] < orders[1] < orders[2]
    described = await a.ok("describe_semaphore", name="s", include_owners=True)
    [owner] = described.semaphore_description.owners
    assert owner.order_id > 0
    assert owner.timeout_millis == 0  # YDB never sets an owner's


async def test_a_re_attach_restates_the_sessions_timeout_and_description(
    server: YdbServer, raw: Raw
) -> None:
    path = await new_node(server)
    first = await open_session(raw, path, timeout_millis=30_000, description="first")
    await first.stream.call.done_writing()
    first.stream.call.cancel()
    again = await open_session(
        raw, path, session_id=first.session_id, timeout_millis=2_000, description="second"
    )
    assert again.session_id == first.session_id
    name = path.rpartition("/")[2]
    async with asyncio.timeout(WAIT), tenure.connect(server.url) as client:
        [listed] = [s for s in await client.list_sessions(name) if s.session_id == again.session_id]
    assert (listed.timeout, listed.description) == (2.0, "second")
    await nothing_pending(again)


async def test_a_missing_semaphore_is_named_in_ydbs_words(server: YdbServer, raw: Raw) -> None:
    [a] = await sessions(server, raw, 1)
    missing = "gone"
    does_not_exist = f"Semaphore does not exist: {missing!r}"
    for request, fields in (
        ("acquire_semaphore", {"count": 1, "timeout_millis": 0}),
        ("update_semaphore", {"data": b"x"}),
        ("delete_semaphore", {}),
    ):
        result = await a.result(request, name=missing, **fields)
        assert result.status == Status.NOT_FOUND, request
        assert result.issues[0].message == does_not_exist, request
    for watch in (False, True):
        described = await a.result("describe_semaphore", name=missing, watch_data=watch)
        assert described.status == Status.NOT_FOUND
        assert described.issues[0].message == f"Semaphore not found: {missing!r}"
    released = await a.ok("release_semaphore", name=missing)
    assert not released.released  # (YDB: SUCCESS, nothing released)


async def test_describe_node_names_its_owner(server: YdbServer) -> None:
    path = await new_node(server)
    operation = await node_call(server, "Describe", path)
    assert operation.status == Status.SUCCESS
    result = pb.coordination.DescribeNodeResult()
    operation.result.Unpack(result)
    assert result.self.owner == "root@builtin"  # an anonymous request's, as YDB's
    assert result.self.name == path.rpartition("/")[2]
