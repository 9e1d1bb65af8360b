"""Watches on standbys (protocol version 13): a standby arms a watch that allows some
staleness in its own engine and pushes its firings as it applies the leader's log
(tenure.server._net.standby_watches); real servers over a real etcd, raw protocol.

The steady cluster's tests arm, fire, cancel and count watches; the last test stops
its own etcd (SIGSTOP) under its own cluster: a standby that cannot confirm its state
gives its watches up, telling their connection GoingAway(UNAVAILABLE).
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from pathlib import Path

import pytest

from tenure._core import (
    CancelWatch,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DescribeSemaphore,
    NodeConfig,
    UpdateSemaphore,
    WatchFired,
    WatchPrefix,
)
from tenure._core.commands import DescribeResult, WatchArmed
from tenure._protocol import ConnectionClosed, Failure, GoingAway, Push, Reply
from tenure.errors import ErrorCode
from tests.cluster.harness import TenureCluster, until
from tests.etcd.cluster import EtcdCluster
from tests.server.tenants import token, write_auth_file
from tests.server.wire import WireClient

#: The staleness the watches here allow, in seconds.
BOUND = 1.0

GREEDY, OTHER, HASTY = "greedy-secret-1", "other-secret-2", "hasty-secret-3"


@pytest.fixture(scope="module")
def cluster(steady_cluster: TenureCluster) -> TenureCluster:
    """One cluster for the module's first tests: none kills, stops or pauses a member."""
    return steady_cluster


async def _connect(port: int, secret: str | None = None) -> WireClient:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    client = WireClient(reader, writer)
    await client.hello(token=secret)
    return client


async def _node(
    leader: WireClient, config: NodeConfig | None = None, stem: str = "watch"
) -> tuple[str, int]:
    """A new node with semaphores ``a/x`` and ``b``, and a session of ``leader``'s."""
    node = f"{stem}-{uuid.uuid4().hex[:8]}"
    await leader.call(CreateNode(node, config or NodeConfig()))
    session = (await leader.call(CreateSession(node, b"k" * 16))).session_id
    await leader.call(CreateSemaphore(session, "a/x", 1))
    await leader.call(CreateSemaphore(session, "b", 1))
    return node, int(session)


async def _armed(standby: WireClient, command: DescribeSemaphore | WatchPrefix) -> Reply:
    answer = await standby.answer(standby.send(command, max_staleness=BOUND))
    assert isinstance(answer, Reply), answer
    return answer


async def _fired(client: WireClient) -> WatchFired:
    """The next WatchFired pushed to ``client`` (within the wire's WAIT)."""
    effect = await client.next_push()
    assert isinstance(effect, WatchFired), effect
    return effect


async def test_a_standby_arms_watches_and_fires_them_as_it_applies_the_leaders_changes(
    cluster: TenureCluster,
) -> None:
    leader = await _connect(cluster.leader().port)
    standby = await _connect(cluster.standbys()[0].port)
    _, session = await _node(leader)
    watching = DescribeSemaphore(session, "b", watch_data=True, watch_repeat=True)
    described = await _armed(standby, watching)
    assert isinstance(described.value, DescribeResult)
    assert described.value.description.data == b""
    assert described.index >= 1  # (the log entry its state held)
    b_watch = described.value.watch_id
    assert b_watch is not None
    prefixed = await _armed(standby, WatchPrefix(session, "a/", watch_data=True))
    assert isinstance(prefixed.value, WatchArmed)
    a_watch = prefixed.value.watch_id
    # Changed on the leader: pushed by the standby, in the leader's order.
    await leader.call(UpdateSemaphore(session, "b", b"one"))
    await leader.call(UpdateSemaphore(session, "a/x", b"two"))
    first, second = await _fired(standby), await _fired(standby)
    assert (first.watch_id, first.name) == (b_watch, "b")
    assert first.description is not None
    assert first.description.data == b"one"
    assert (second.watch_id, second.name) == (a_watch, "a/x")
    assert second.description is not None
    assert second.description.data == b"two"
    # Cancelled: it fires no more (the prefix watch's firing after the change that
    # would have fired it is the next push).
    cancel = await standby.answer(standby.send(CancelWatch(session, b_watch), max_staleness=BOUND))
    assert isinstance(cancel, Reply)
    assert cancel.value is True
    await leader.call(UpdateSemaphore(session, "b", b"three"))
    await leader.call(UpdateSemaphore(session, "a/x", b"four"))
    after = await _fired(standby)
    assert (after.watch_id, after.name) == (a_watch, "a/x")
    # Another connection cannot cancel a watch this one armed.
    other = await _connect(cluster.standbys()[0].port)
    refused = await other.answer(other.send(CancelWatch(session, a_watch), max_staleness=BOUND))
    assert isinstance(refused, Reply)
    assert refused.value is False
    for client in (leader, standby, other):
        await client.close()


async def test_a_closed_connections_watches_are_disarmed_and_the_nodes_limit_counts_them(
    cluster: TenureCluster,
) -> None:
    leader = await _connect(cluster.leader().port)
    port = cluster.standbys()[0].port
    _, session = await _node(leader, NodeConfig(max_watches_per_session=2))
    first = await _connect(port)
    for name in ("a/x", "b"):
        await _armed(first, DescribeSemaphore(session, name, watch_data=True, watch_repeat=True))
    over = await first.answer(
        first.send(DescribeSemaphore(session, "b", watch_owners=True), max_staleness=BOUND)
    )
    assert isinstance(over, Failure), over
    assert over.code is ErrorCode.LIMIT_EXCEEDED
    await first.close()
    # Its two watches were disarmed with it: another connection arms two again (the
    # close reaches the standby in its own time: the first arm may still be refused).
    second = await _connect(port)

    async def armed_again() -> bool:
        answer = await second.answer(
            second.send(DescribeSemaphore(session, "b", watch_data=True), max_staleness=BOUND)
        )
        if isinstance(answer, Failure):
            assert answer.code is ErrorCode.LIMIT_EXCEEDED, answer
        return isinstance(answer, Reply)

    await until(armed_again, "the closed connection's watches disarmed")
    await _armed(second, DescribeSemaphore(session, "a/x", watch_data=True))
    await leader.close()
    await second.close()


async def test_a_standby_that_cannot_confirm_its_state_gives_its_watches_up(
    tmp_path: Path,
) -> None:
    with (
        EtcdCluster(1, root=tmp_path / "etcd") as etcd,
        TenureCluster(tmp_path / "cluster", etcd.endpoints) as servers,
    ):
        leader = await _connect(servers.leader().port)
        standby = await _connect(servers.standbys()[0].port)
        _, session = await _node(leader)
        await _armed(standby, WatchPrefix(session, "", watch_data=True))
        [member] = etcd.members
        assert member.pid is not None
        os.kill(member.pid, signal.SIGSTOP)  # (etcd stops answering: nothing is confirmed)
        try:
            events = await standby.until_closed()
        finally:
            os.kill(member.pid, signal.SIGCONT)
        away = [event for event in events if isinstance(event, GoingAway)]
        assert away, events
        assert away[0].code is ErrorCode.UNAVAILABLE
        assert "cannot keep its watches within their bound" in away[0].reason
        assert isinstance(events[-1], ConnectionClosed)
        assert not [event for event in events if isinstance(event, Push)]
        await standby.close()
        await leader.close()


async def test_a_hostile_token_spends_no_more_of_a_standby_than_its_quotas(
    tmp_path: Path, etcd_member: EtcdCluster
) -> None:
    """A token's ``watches`` quota counts the watches a standby keeps for it (and a
    cancel gives one back); another token's session is not its to watch; each arm
    pays the token's ``requests_per_second``, refused or not; and the standby serves
    another token meanwhile."""
    auth = write_auth_file(
        tmp_path,
        token("greedy", GREEDY, nodes=["greedy-*"], quota={"watches": 2}),
        token("other", OTHER, nodes=["other-*"]),
        token("hasty", HASTY, quota={"requests_per_second": 0.01}),
    )
    extra = ("--auth-file", str(auth))
    with TenureCluster(tmp_path / "c", etcd_member.endpoints, size=2, extra=extra) as c:
        greedys_leader = await _connect(c.leader().port, GREEDY)
        others_leader = await _connect(c.leader().port, OTHER)
        _, mine = await _node(greedys_leader, stem="greedy")
        _, theirs = await _node(others_leader, stem="other")
        port = c.standbys()[0].port
        greedy = await _connect(port, GREEDY)
        armed = [
            await _armed(greedy, DescribeSemaphore(mine, name, watch_data=True, watch_repeat=True))
            for name in ("a/x", "b")
        ]
        over = await greedy.answer(
            greedy.send(DescribeSemaphore(mine, "b", watch_owners=True), max_staleness=BOUND)
        )
        assert isinstance(over, Failure), over
        assert over.code is ErrorCode.LIMIT_EXCEEDED
        assert "watches" in over.message
        stolen = await greedy.answer(
            greedy.send(DescribeSemaphore(theirs, "b", watch_data=True), max_staleness=BOUND)
        )
        assert isinstance(stolen, Failure), stolen
        assert stolen.code is ErrorCode.PERMISSION_DENIED
        # The same standby serves another token meanwhile.
        other = await _connect(port, OTHER)
        await _armed(other, DescribeSemaphore(theirs, "b", watch_data=True))
        # A cancel gives the quota's room back.
        first = armed[0].value
        assert isinstance(first, DescribeResult)
        assert first.watch_id is not None
        cancel = await greedy.answer(
            greedy.send(CancelWatch(mine, first.watch_id), max_staleness=BOUND)
        )
        assert isinstance(cancel, Reply)
        assert cancel.value is True
        await _armed(greedy, DescribeSemaphore(mine, "a/x", watch_data=True))
        # Each arm pays the token's rate, refused or not (a burst of one).
        hasty = await _connect(port, HASTY)
        paid = await hasty.answer(
            hasty.send(DescribeSemaphore(mine, "b", watch_data=True), max_staleness=BOUND)
        )
        assert isinstance(paid, Failure), paid
        assert paid.code is ErrorCode.PERMISSION_DENIED  # (greedy's session, not hasty's)
        limited = await hasty.answer(
            hasty.send(DescribeSemaphore(mine, "b", watch_data=True), max_staleness=BOUND)
        )
        assert isinstance(limited, Failure), limited
        assert limited.code is ErrorCode.LIMIT_EXCEEDED
        assert "requests_per_second" in limited.message
        for client in (greedys_leader, others_leader, greedy, other, hasty):
            await client.close()
