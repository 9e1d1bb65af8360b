"""Session streams on the wire: start, re-attach, steal, protection keys, bad requests.

Each test speaks YDB's ``CoordinationService/Session`` protocol directly and checks
the exact messages YDB's coordination service sends (``/work/notes``: kesus). Where
ours differs on purpose it is tested as ours: ``SessionStarted.timeout_millis`` is
the session's timeout (YDB leaves it 0), and a seq_no has at most 32 bits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest

from tests.ydb_face.conftest import DATABASE, YdbServer, unique
from tests.ydb_face.raw import (
    Status,
    ending,
    failure_of,
    kind,
    new_node,
    node_call,
    nothing_pending,
    open_session,
    quiet_server,  # noqa: F401  (the module's server)
)

pytestmark = pytest.mark.timeout(60)

Raw = Callable[..., Any]


async def test_start_answers_a_session_id_and_the_timeout(server: YdbServer, raw: Raw) -> None:
    path = await new_node(server)
    first = await (await raw()).start(path, timeout_millis=7000, description="worker 1")
    second = await (await raw()).start(path, timeout_millis=1_800_000)  # the longest taken
    assert first.session_id != 0
    assert second.session_id not in (0, first.session_id)
    assert (first.timeout_millis, second.timeout_millis) == (7000, 1_800_000)


async def test_reattach_takes_an_equal_seq_no_and_refuses_a_lower_one(
    server: YdbServer, raw: Raw
) -> None:
    path = await new_node(server)
    first = await open_session(raw, path, seq_no=5)
    early = await raw()  # the start's seq_no counts as the session's last
    await early.send(session_start={"path": path, "session_id": first.session_id, "seq_no": 4})
    assert (await failure_of(early)).status == Status.BAD_SESSION
    again = await (await raw()).start(path, session_id=first.session_id, seq_no=5)
    assert again.session_id == first.session_id
    steal = await failure_of(first.stream)  # it was taken from the first stream
    assert steal.status == Status.BAD_SESSION
    late = await raw()
    await late.send(session_start={"path": path, "session_id": first.session_id, "seq_no": 4})
    refused = await failure_of(late)
    assert refused.status == Status.BAD_SESSION
    assert "out of sequence" in refused.issues[0].message
    higher = await (await raw()).start(path, session_id=first.session_id, seq_no=9)
    assert higher.session_id == first.session_id
    lower = await raw()  # 5 was taken before, but 9 is the session's last now
    await lower.send(session_start={"path": path, "session_id": first.session_id, "seq_no": 5})
    assert (await failure_of(lower)).status == Status.BAD_SESSION


async def test_protection_key_is_checked_only_if_the_session_has_one(
    server: YdbServer, raw: Raw
) -> None:
    path = await new_node(server)
    keyed = await open_session(raw, path, protection_key=b"k1")
    wrong = await raw()
    await wrong.send(
        session_start={"path": path, "session_id": keyed.session_id, "protection_key": b"k2"}
    )
    mismatch = await failure_of(wrong)
    assert mismatch.status == Status.BAD_SESSION
    assert "protection key" in mismatch.issues[0].message
    unkeyed = await raw()  # no key is a wrong key too
    await unkeyed.send(session_start={"path": path, "session_id": keyed.session_id})
    assert (await failure_of(unkeyed)).status == Status.BAD_SESSION
    await nothing_pending(keyed)  # the refused attaches took nothing from its stream
    right = await (await raw()).start(path, session_id=keyed.session_id, protection_key=b"k1")
    assert right.session_id == keyed.session_id
    plain = await open_session(raw, path)
    for key in (b"any", b""):
        taken = await (await raw()).start(path, session_id=plain.session_id, protection_key=key)
        assert taken.session_id == plain.session_id


@pytest.mark.parametrize(
    ("start", "why"),
    [
        ({"protection_key": b"x" * 17}, "Protection key is too large"),
        ({"timeout_millis": 1_800_001}, "Session timeout is out of range"),
        ({"timeout_millis": 2**64 - 1}, "Session timeout is out of range"),
    ],
)
async def test_start_out_of_range_is_bad_request(
    server: YdbServer, raw: Raw, start: dict[str, Any], why: str
) -> None:
    path = await new_node(server)
    stream = await raw()
    await stream.send(session_start={"path": path, "timeout_millis": 5000, **start})
    failure = await failure_of(stream)
    assert failure.status == Status.BAD_REQUEST
    assert failure.issues[0].message == why
    longest = await (await raw()).start(path, protection_key=b"x" * 16)  # 16 bytes are taken
    assert longest.session_id != 0


async def test_a_description_over_1024_bytes_is_bad_request(server: YdbServer, raw: Raw) -> None:
    path = await new_node(server)
    stream = await raw()
    await stream.send(session_start={"path": path, "description": "d" * 1025})
    assert (await failure_of(stream)).status == Status.BAD_REQUEST
    assert (await (await raw()).start(path, description="d" * 1024)).session_id != 0


async def test_a_stolen_stream_gets_bad_session_and_ends_while_the_thief_works(
    server: YdbServer, raw: Raw
) -> None:
    path = await new_node(server)
    victim = await open_session(raw, path)
    await victim.ok("create_semaphore", name="s", limit=1)
    thief = await open_session(raw, path, session_id=victim.session_id)
    assert thief.session_id == victim.session_id
    end = await ending(victim.stream)
    assert end.code == grpc.StatusCode.OK
    assert [kind(m) for m in end.messages] == ["failure"]
    assert end.failure.status == Status.BAD_SESSION
    assert "stolen" in end.failure.issues[0].message
    acquired = await thief.ok("acquire_semaphore", name="s", count=1, timeout_millis=0)
    assert acquired.acquired


async def test_a_thief_gets_no_result_of_the_old_streams_acquire_until_it_asks_again(
    server: YdbServer, raw: Raw
) -> None:
    path = await new_node(server)
    holder, victim, behind = [await open_session(raw, path) for _ in range(3)]
    await holder.ok("create_semaphore", name="s", limit=1)
    assert (await holder.ok("acquire_semaphore", name="s", count=1)).acquired
    for waiter in (victim, behind):
        queued = await waiter.send("acquire_semaphore", name="s", count=1, timeout_millis=60_000)
        await waiter.next("acquire_semaphore_pending", queued)
    thief = await open_session(raw, path, session_id=victim.session_id)
    assert (await failure_of(victim.stream)).status == Status.BAD_SESSION
    asked = await thief.send("acquire_semaphore", name="s", count=1, timeout_millis=60_000)
    await thief.next("acquire_semaphore_pending", asked)  # the session's place is kept
    assert (await holder.ok("release_semaphore", name="s")).released
    assert (await thief.next("acquire_semaphore_result", asked)).acquired
    await nothing_pending(behind)
    assert (await thief.ok("release_semaphore", name="s")).released
    assert (await behind.next("acquire_semaphore_result", 1)).acquired


async def test_a_grant_for_an_old_streams_acquire_is_learned_by_asking_again(
    server: YdbServer, raw: Raw
) -> None:
    path = await new_node(server)
    holder, victim = await open_session(raw, path), await open_session(raw, path)
    await holder.ok("create_semaphore", name="s", limit=1)
    assert (await holder.ok("acquire_semaphore", name="s", count=1)).acquired
    queued = await victim.send("acquire_semaphore", name="s", count=1, timeout_millis=60_000)
    await victim.next("acquire_semaphore_pending", queued)
    victim.stream.call.cancel()  # the client vanished with its acquire queued
    back = await open_session(raw, path, session_id=victim.session_id)
    assert (await holder.ok("release_semaphore", name="s")).released
    await nothing_pending(back)  # the grant answers the old stream's request: not sent
    assert (await back.ok("acquire_semaphore", name="s", count=1, timeout_millis=0)).acquired


async def test_a_second_session_start_is_bad_request(server: YdbServer, raw: Raw) -> None:
    path = await new_node(server)
    session = await open_session(raw, path)
    await session.stream.send(session_start={"path": path, "timeout_millis": 5000})
    failure = await failure_of(session.stream)
    assert failure.status == Status.BAD_REQUEST
    assert failure.issues[0].message == "Session cannot be started twice"


@pytest.mark.parametrize(
    ("request_", "why"),
    [({}, "Empty request"), ({"unsupported_5": {}}, "Unimplemented request")],
)
async def test_an_empty_or_unsupported_request_is_bad_request(
    server: YdbServer, raw: Raw, request_: dict[str, Any], why: str
) -> None:
    session = await open_session(raw, await new_node(server))
    await session.stream.send(**request_)
    failure = await failure_of(session.stream)
    assert failure.status == Status.BAD_REQUEST
    assert failure.issues[0].message.startswith(why)


@pytest.mark.parametrize(
    "path",
    [f"{DATABASE}/never-made-node", "/elsewhere/node", "never-made-node-either", "/local//x"],
)
async def test_start_on_a_missing_node_or_outside_the_database_is_not_found(
    server: YdbServer, raw: Raw, path: str
) -> None:
    stream = await raw()
    await stream.send(session_start={"path": path, "timeout_millis": 5000})
    assert (await failure_of(stream)).status == Status.NOT_FOUND


async def test_start_with_an_empty_path_is_bad_request(server: YdbServer, raw: Raw) -> None:
    stream = await raw()
    await stream.send(session_start={"timeout_millis": 5000})
    failure = await failure_of(stream)
    assert failure.status == Status.BAD_REQUEST
    assert failure.issues[0].message == "KesusPath cannot be empty"


async def test_attach_to_a_session_of_another_node_is_session_expired(
    server: YdbServer, raw: Raw
) -> None:
    session = await open_session(raw, await new_node(server))
    other = await raw()
    await other.send(
        session_start={"path": await new_node(server), "session_id": session.session_id}
    )
    failure = await failure_of(other)
    assert failure.status == Status.SESSION_EXPIRED
    assert failure.issues[0].message == "Session does not exist"
    never = await raw()
    await never.send(session_start={"path": await new_node(server), "session_id": 2**63})
    assert (await failure_of(never)).status == Status.SESSION_EXPIRED


async def test_a_seq_no_over_32_bits_is_bad_request(server: YdbServer, raw: Raw) -> None:
    # Ours: the engine keeps YDB's seq_no in the high half of its own (sessions.py).
    path = await new_node(server)
    session = await open_session(raw, path)
    for start in (
        {"path": path, "session_id": session.session_id, "seq_no": 2**32},
        {"path": path, "seq_no": 2**32},
    ):
        big = await raw()
        await big.send(session_start=start)
        assert (await failure_of(big)).status == Status.BAD_REQUEST
    top = await open_session(raw, path, session_id=session.session_id, seq_no=2**32 - 1)
    assert top.session_id == session.session_id


async def test_a_path_without_the_database_names_the_same_node(server: YdbServer, raw: Raw) -> None:
    name = unique()
    assert (await node_call(server, "Create", name)).status == Status.SUCCESS
    relative = await open_session(raw, name)
    await relative.ok("create_semaphore", name="s", limit=3, data=b"d")
    absolute = await open_session(raw, f"{DATABASE}/{name}")
    described = await absolute.ok("describe_semaphore", name="s")
    assert (described.semaphore_description.limit, described.semaphore_description.data) == (
        3,
        b"d",
    )
    assert (await node_call(server, "Drop", name)).status == Status.SUCCESS
