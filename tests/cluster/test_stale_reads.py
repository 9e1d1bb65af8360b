"""Reads from standbys (protocol version 11): a standby answers a read that allows some
staleness from its own state, once it has confirmed that state fresh enough
(tenure.server._net.stale_reads); real servers over a real etcd, raw protocol."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tenure._core import (
    Acquire,
    AcquireStatus,
    Command,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DescribeNode,
    DescribeSemaphore,
    ListNodes,
    NodeConfig,
    Release,
    UpdateSemaphore,
)
from tenure._core.commands import NodePage
from tenure._core.values import NodeDescription
from tenure._protocol import Failure, Ping, Pong, Reply
from tenure.errors import ErrorCode, leader_named
from tests.cluster.harness import TenureCluster
from tests.etcd.cluster import EtcdCluster
from tests.server.tenants import token, write_auth_file
from tests.server.wire import WireClient

T = TypeVar("T")

ALICE, BOB, SLOW = "alice-secret-1", "bob-secret-2", "slow-secret-3"


@pytest.fixture(scope="module")
def cluster(steady_cluster: TenureCluster) -> TenureCluster:
    """One cluster for the module: no test here kills, stops or pauses a member."""
    return steady_cluster


async def _connect(port: int, secret: str | None = None) -> WireClient:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    client = WireClient(reader, writer)
    await client.hello(token=secret)
    return client


async def _held(leader: WireClient, node: str) -> int:
    """A node with semaphore ``m`` held by a new session of ``leader``: its id."""
    await leader.call(CreateNode(node, NodeConfig()))
    session = (await leader.call(CreateSession(node, b"k" * 16))).session_id
    await leader.call(CreateSemaphore(session, "m", 1))
    held = await leader.call(Acquire(session, "m", 1, 1))
    assert held.status is AcquireStatus.GRANTED
    return int(session)


async def _read(client: WireClient, command: Command[T], **fields: Any) -> tuple[T, int]:
    """``command`` sent with ``fields`` (``max_staleness``...): its Reply's value, as the
    command's type, and its ``index``."""
    answer = await client.answer(client.send(command, **fields))
    assert isinstance(answer, Reply), answer
    return answer.value, answer.index  # type: ignore[return-value]


async def test_a_standby_answers_a_fresh_read_of_what_the_leader_acknowledged(
    cluster: TenureCluster,
) -> None:
    leader = await _connect(cluster.leader().port)
    standby = await _connect(cluster.standbys()[0].port)
    node = f"stale-{uuid.uuid4().hex[:8]}"
    session = await _held(leader, node)
    # max_staleness 0: everything acknowledged before the read was sent is in it.
    description, index = await _read(standby, DescribeNode(node), max_staleness=0.0)
    assert isinstance(description, NodeDescription)
    assert description.name == node
    assert index >= 1
    read = DescribeSemaphore(session, "m", owners=True)
    described, held_at = await _read(standby, read, max_staleness=0.0)
    assert [owner.session_id for owner in described.description.owners] == [session]
    # Released on the leader, acknowledged: the standby's next fresh read shows it.
    assert await leader.call(Release(session, "m")) is True
    after, released_at = await _read(standby, read, max_staleness=0.0)
    assert after.description.owners == ()
    assert released_at > held_at
    # A later read asks for at least what it saw (min_index): answered as fresh.
    _, again = await _read(standby, read, max_staleness=60.0, min_index=released_at)
    assert again >= released_at
    await leader.close()
    await standby.close()


async def test_a_standby_refuses_what_is_not_a_read_or_asks_for_a_log_it_has_not(
    cluster: TenureCluster,
) -> None:
    leader_address = cluster.leader().address
    standby = await _connect(cluster.standbys()[0].port)
    for command in (
        CreateNode(f"no-{uuid.uuid4().hex[:8]}", NodeConfig()),  # a change
        UpdateSemaphore(1, "m", b"v"),  # a change
    ):
        failure = await standby.answer(standby.send(command, max_staleness=5.0))
        assert isinstance(failure, Failure), failure
        assert failure.code is ErrorCode.NOT_LEADER
        assert leader_named(failure.message) == leader_address
    # No staleness allowed at all: the leader's, as ever.
    plain = await standby.answer(standby.send(ListNodes()))
    assert isinstance(plain, Failure)
    assert plain.code is ErrorCode.NOT_LEADER
    negative = await standby.answer(standby.send(ListNodes(), max_staleness=-1.0))
    assert isinstance(negative, Failure)
    assert negative.code is ErrorCode.INVALID_ARGUMENT
    # An index past the log's end is not reached within --stale-read-wait (1 s).
    beyond = await standby.answer(standby.send(ListNodes(), max_staleness=5.0, min_index=2**40))
    assert isinstance(beyond, Failure), beyond
    assert beyond.code is ErrorCode.UNAVAILABLE
    assert "could not confirm" in beyond.message
    await standby.close()


async def test_a_leader_answers_a_read_with_max_staleness_as_any(cluster: TenureCluster) -> None:
    leader = await _connect(cluster.leader().port)
    answer = await leader.answer(leader.send(ListNodes(), max_staleness=0.0))
    assert isinstance(answer, Reply)
    assert isinstance(answer.value, NodePage)
    assert answer.index == 0  # (not a standby's: the leader's own, linearizable)
    await leader.close()


async def test_a_connections_answers_keep_their_order_behind_a_stale_read(
    cluster: TenureCluster,
) -> None:
    standby = await _connect(cluster.standbys()[0].port)
    first = standby.send(ListNodes(), max_staleness=0.0)
    second = standby.send(ListNodes(limit=1), max_staleness=0.0)
    standby.writer.write(standby.codec.send(Ping(9)))
    events = [await standby.next_event() for _ in range(3)]
    # The answers in order; the Pong between any two (a Ping is answered while a
    # request before it is owed its answer: docs/protocol.md section 5, rule 5).
    replies = [event for event in events if isinstance(event, Reply)]
    assert [reply.request_id for reply in replies] == [first, second]
    assert [type(event) for event in events].count(Pong) == 1
    await standby.close()


async def test_a_standby_checks_a_tokens_reads_as_the_leader_does(
    tmp_path: Path, etcd_member: EtcdCluster
) -> None:
    auth = write_auth_file(
        tmp_path,
        token("alice", ALICE, nodes=["a-*"]),
        token("bob", BOB),
        token("slow", SLOW, quota={"requests_per_second": 0.01}),
    )
    with TenureCluster(
        tmp_path / "c", etcd_member.endpoints, extra=("--auth-file", str(auth))
    ) as c:
        bob = await _connect(c.leader().port, BOB)
        alice = await _connect(c.leader().port, ALICE)
        bobs = await _held(bob, "a-shared")
        alices = await _held(alice, "a-own")
        await bob.call(CreateNode("b-hidden", NodeConfig()))
        standby = await _connect(c.standbys()[0].port, ALICE)
        listed, _ = await _read(standby, ListNodes(), max_staleness=0.0)
        assert listed.names == ("a-own", "a-shared")  # (not b-hidden)
        mine, _ = await _read(standby, DescribeSemaphore(alices, "m", owners=True), max_staleness=0)
        assert [owner.session_id for owner in mine.description.owners] == [alices]
        theirs = DescribeSemaphore(bobs, "m", owners=True)
        refused = await standby.answer(standby.send(theirs, max_staleness=0.0))
        assert isinstance(refused, Failure), refused
        assert refused.code is ErrorCode.PERMISSION_DENIED
        assert f"session {bobs} is not one of token 'alice''s" in refused.message
        hidden = await standby.answer(standby.send(DescribeNode("b-hidden"), max_staleness=0.0))
        assert isinstance(hidden, Failure)
        assert hidden.code is ErrorCode.PERMISSION_DENIED
        # A token's requests_per_second counts its reads of a standby too (a burst of 1).
        slow = await _connect(c.standbys()[0].port, SLOW)
        first = await slow.answer(slow.send(ListNodes(), max_staleness=60.0))
        assert isinstance(first, Reply), first
        second = await slow.answer(slow.send(ListNodes(), max_staleness=60.0))
        assert isinstance(second, Failure), second
        assert second.code is ErrorCode.LIMIT_EXCEEDED
        assert "requests_per_second" in second.message
        for client in (bob, alice, standby, slow):
            await client.close()


async def test_a_standby_stops_cleanly_with_a_read_waiting_to_be_answered(
    tmp_path: Path, etcd_member: EtcdCluster
) -> None:
    extra = ("--stale-read-wait", "10")
    with TenureCluster(tmp_path / "c", etcd_member.endpoints, size=2, extra=extra) as c:
        standby = c.standbys()[0]
        client = await _connect(standby.port)
        # An index the log will not reach: the read waits (up to 10 s) to answer.
        waiting = client.send(ListNodes(), max_staleness=5.0, min_index=2**40)
        client.writer.write(client.codec.send(Ping(1)))
        assert standby.stop() == 0  # (SIGTERM: a graceful stop, bounded by the harness)
        events = await client.until_closed()
        assert not [e for e in events if isinstance(e, Reply) and e.request_id == waiting]
        assert "Task was destroyed but it is pending" not in standby.output()
        assert "Traceback" not in standby.output()
        client.writer.close()
