"""A change sent again on a new stream of its session is answered, not applied again.

YDB's SDKs send a session's unanswered requests again on each stream that re-attaches
it. An update applied, its answer lost with its stream, then sent again after another
client's update, brought its data back over the other's (found by reasoning on the
fault suite's YDB clients, reproduced with YDB's SDK: tools/faults/findings.md): the
face now answers it as it did the first time (tenure.compat.ydb.resent). Raw streams:
each request's ``req_id`` and fields are the test's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.ydb_face.conftest import YdbServer
from tests.ydb_face.raw import (
    Session,
    Status,
    new_node,
    nothing_pending,
    open_session,
    quiet_server,  # noqa: F401  (the module's server)
)

pytestmark = pytest.mark.timeout(60)

Raw = Callable[..., Any]


async def _cut(session: Session) -> None:
    """End ``session``'s stream (its session is detached, not closed)."""
    await session.stream.call.done_writing()
    session.stream.call.cancel()


async def _data(session: Session, name: str) -> bytes:
    described = await session.ok("describe_semaphore", name=name)
    return bytes(described.semaphore_description.data)


async def test_an_update_sent_again_after_another_is_answered_not_applied(
    server: YdbServer, raw: Raw
) -> None:
    path = await new_node(server)
    mine, theirs = await open_session(raw, path), await open_session(raw, path)
    await mine.ok("create_semaphore", name="s", limit=1, data=b"0")
    first = await mine.ok("update_semaphore", name="s", data=b"mine")
    assert await _data(theirs, "s") == b"mine"
    await _cut(mine)  # (the client never read that answer, say)
    await theirs.ok("update_semaphore", name="s", data=b"theirs")
    again = await open_session(raw, path, session_id=mine.session_id)
    await again.stream.send(update_semaphore={"req_id": first.req_id, "name": "s", "data": b"mine"})
    answered = await again.next("update_semaphore_result", first.req_id)
    assert answered.status == Status.SUCCESS
    assert await _data(theirs, "s") == b"theirs"  # the other's update stands
    # Another request under that req_id (other data) is another change: applied.
    await again.stream.send(update_semaphore={"req_id": first.req_id, "name": "s", "data": b"new"})
    assert (await again.next("update_semaphore_result", first.req_id)).status == Status.SUCCESS
    assert await _data(theirs, "s") == b"new"
    # And the same request again on the stream that was answered is applied again:
    # that stream lost no answer, so the client means it.
    await theirs.ok("update_semaphore", name="s", data=b"theirs")
    await again.stream.send(update_semaphore={"req_id": first.req_id, "name": "s", "data": b"new"})
    assert (await again.next("update_semaphore_result", first.req_id)).status == Status.SUCCESS
    assert await _data(theirs, "s") == b"new"
    await nothing_pending(again)


async def test_a_delete_sent_again_does_not_delete_a_semaphore_made_since(
    server: YdbServer, raw: Raw
) -> None:
    path = await new_node(server)
    mine, theirs = await open_session(raw, path), await open_session(raw, path)
    await mine.ok("create_semaphore", name="t", limit=1)
    deleted = await mine.ok("delete_semaphore", name="t")
    await _cut(mine)
    await theirs.ok("create_semaphore", name="t", limit=2, data=b"theirs")
    again = await open_session(raw, path, session_id=mine.session_id)
    await again.stream.send(delete_semaphore={"req_id": deleted.req_id, "name": "t"})
    answered = await again.next("delete_semaphore_result", deleted.req_id)
    assert answered.status == Status.SUCCESS  # as the first time
    assert await _data(theirs, "t") == b"theirs"
