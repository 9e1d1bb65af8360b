"""A big fan-out's pushes are encoded over later turns, each connection's in order (issue 51).

One change that many sessions watch fires one push per watch. Encoded all in the
step that made the change, they kept the loop for the whole fan-out, and the
change's own answer waited behind them. The routing now encodes one turn's room
(``--step-budget`` times ``PUSHES_PER_BUDGET_ITEM``) in the step and the rest at the
next turns (``tenure.server._net.later``). What must hold meanwhile: every watch is
told exactly once per change; on each connection everything comes in the order the
engine did it (a later change's firing after an earlier one's; an answer after the
pushes routed to that connection before it, docs/protocol.md section 5); the
updater's answer does not wait for the fan-out.

Real parts: the engine behind a host, the server's routing, session table and
outboxes, and native connections over socket pairs; the outboxes' bytes are read
back by the client side of the codec.
"""

from __future__ import annotations

import asyncio
import gc
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from tenure._core import (
    Command,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DescribeSemaphore,
    Engine,
    NodeConfig,
    UpdateSemaphore,
    WatchFired,
)
from tenure._protocol import (
    NEED_DATA,
    ClientConnection,
    Hello,
    Push,
    Reply,
    Request,
    ServerConnection,
    Welcome,
)
from tenure._runtime import collector
from tenure._runtime.clock import LoopClock
from tenure._runtime.host import Host
from tenure.server._config.serve_config import ServeConfig
from tenure.server._net.gate import Conn
from tenure.server._net.later import PUSHES_PER_BUDGET_ITEM
from tenure.server._net.outbox import Outboxes
from tenure.server._routing import Routing
from tenure.server._session_table import SessionTable
from tenure.server.plug import Face

#: ``--step-budget`` of these servers: a turn's room is 10 pushes.
BUDGET = 1
ROOM = BUDGET * PUSHES_PER_BUDGET_ITEM
#: Connections, each with one session, each session with this many watches.
CONNECTIONS = 4
WATCHES_EACH = 15  # 60 watches: six turns' room


@dataclass
class Peer:
    """A native connection of the server, and the client's side of its codec."""

    conn: Conn
    client: ClientConnection
    session_id: int = 0

    def read(self) -> list[object]:
        """What the server queued for this connection so far, decoded (and taken)."""
        data = b"".join(self.conn.outbox)
        self.conn.outbox.clear()
        if not data:
            return []  # (no bytes: an empty read would be the stream's end)
        self.client.receive_data(data)
        events: list[object] = []
        while (event := self.client.next_event()) is not NEED_DATA:
            events.append(event)
        return events

    def request(self, request_id: int, command: Command[Any]) -> None:
        """The client sends ``command`` and the server's codec reads it (now in flight)."""
        self.conn.codec.receive_data(self.client.send(Request(request_id, command)))
        assert isinstance(self.conn.codec.next_event(), Request)


@dataclass
class Served:
    """An engine behind a host whose effects go through the server's routing."""

    host: Host
    out: Outboxes
    peers: list[Peer]
    writer_sid: int


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    config = ServeConfig(step_budget=BUDGET)
    host = Host(Engine(), LoopClock(), step_budget=BUDGET)
    out = Outboxes(config, lambda: None)
    table: SessionTable[Conn | Face] = SessionTable()
    host.route = Routing(host, table, out).route
    roomy = NodeConfig(max_watches_per_session=WATCHES_EACH)
    host.execute(CreateNode("n", roomy))
    writer_sid = host.execute(CreateSession("n", b"k")).session_id
    host.execute(CreateSemaphore(writer_sid, "config", 1, b"v0"))
    sockets, peers = [], []
    for _ in range(CONNECTIONS):
        ours, theirs = socket.socketpair()
        sockets.append(theirs)
        reader, writer = await asyncio.open_connection(sock=ours)
        codec, client = ServerConnection(), ClientConnection()
        codec.receive_data(client.send(Hello(client_name="test")))
        codec.next_event()
        client.receive_data(codec.send(Welcome(server_name="test")))
        client.next_event()
        peer = Peer(Conn(reader, writer, codec), client)
        peer.session_id = host.execute(CreateSession("n", b"k")).session_id
        table.attach(peer.session_id, peer.conn)
        for _ in range(WATCHES_EACH):
            watch = DescribeSemaphore(peer.session_id, "config", watch_data=True, watch_repeat=True)
            host.execute(watch)
        peers.append(peer)
    try:
        yield Served(host, out, peers, writer_sid)
    finally:
        for peer in peers:
            peer.conn.writer.close()
        for each in sockets:
            each.close()


async def turns(count: int = 20) -> None:
    """Let the loop run ``count`` turns (the waiting pushes' slices)."""
    for _ in range(count):
        await asyncio.sleep(0)


def firings(events: list[object]) -> list[WatchFired]:
    """The watch firings among ``events``, in order."""
    return [e.effect for e in events if isinstance(e, Push) and type(e.effect) is WatchFired]


def told_in_order(served: Served, versions: list[bytes]) -> None:
    """Every watch of every peer was told each of ``versions``, once each, in order."""
    for peer in served.peers:
        seen: dict[int, list[bytes]] = {}
        for f in firings(peer.read()):
            assert f.description is not None
            seen.setdefault(f.watch_id, []).append(f.description.data)
        assert len(seen) == WATCHES_EACH
        assert all(data == versions for data in seen.values()), seen


async def test_each_watch_across_connections_is_told_once_and_the_step_encodes_one_turns_room(
    served: Served,
) -> None:
    told: dict[int, int] = {}

    def count(peer: Peer) -> int:
        fired = firings(peer.read())
        for f in fired:
            assert f.session_id == peer.session_id
            assert f.description is not None
            assert f.description.data == b"v1"
            told[f.watch_id] = told.get(f.watch_id, 0) + 1
        return len(fired)

    served.host.execute(UpdateSemaphore(served.writer_sid, "config", b"v1"))
    # The step encoded one turn's room; the rest waits for the next turns.
    assert sum(count(peer) for peer in served.peers) == ROOM
    assert len(served.out.later) == CONNECTIONS * WATCHES_EACH - ROOM
    await turns()
    assert len(served.out.later) == 0
    assert sum(count(peer) for peer in served.peers) == CONNECTIONS * WATCHES_EACH - ROOM
    assert len(told) == CONNECTIONS * WATCHES_EACH
    assert set(told.values()) == {1}


async def test_a_second_change_during_the_fan_out_is_told_after_the_first_on_every_connection(
    served: Served,
) -> None:
    served.host.execute(UpdateSemaphore(served.writer_sid, "config", b"v1"))
    assert len(served.out.later) > 0  # (the first change's pushes still wait)
    served.host.execute(UpdateSemaphore(served.writer_sid, "config", b"v2"))
    await turns()
    told_in_order(served, [b"v1", b"v2"])


async def test_an_answer_to_a_connection_comes_after_the_pushes_waiting_for_it(
    served: Served,
) -> None:
    served.host.execute(UpdateSemaphore(served.writer_sid, "config", b"v1"))
    last = served.peers[-1]  # (routed last: its pushes all wait)
    assert last.conn in served.out.later.waiting
    describe = DescribeSemaphore(last.session_id, "config")
    last.request(7, describe)  # a later request, answered as the native face does
    served.out.emit(last.conn, Reply(7, served.host.execute(describe)))
    events = last.read()
    assert len(firings(events)) == WATCHES_EACH
    assert isinstance(events[-1], Reply)
    assert events[-1].request_id == 7
    await turns()
    assert firings(last.read()) == []  # (told once: none again from the slices)


async def test_the_updaters_answer_is_not_held_behind_the_fan_out(served: Served) -> None:
    # The updater watches too: its own pushes come before its answer (section 5),
    # the others' fan-out after it.
    updater = served.peers[0]
    update = UpdateSemaphore(updater.session_id, "config", b"v1")
    updater.request(1, update)
    served.out.emit(updater.conn, Reply(1, served.host.execute(update)))  # (as the face does)
    events = updater.read()
    assert len(firings(events)) == WATCHES_EACH
    assert isinstance(events[-1], Reply)
    assert len(served.out.later) == (CONNECTIONS - 1) * WATCHES_EACH
    await turns()
    assert len(served.out.later) == 0


async def test_the_cyclic_collector_waits_while_a_fan_outs_pushes_wait(served: Served) -> None:
    assert gc.isenabled()
    assert collector.paused() == 0
    served.host.execute(UpdateSemaphore(served.writer_sid, "config", b"v1"))
    assert len(served.out.later) > 0
    assert not gc.isenabled()  # (their effects are short-lived: not walked meanwhile)
    last = served.peers[-1]
    describe = DescribeSemaphore(last.session_id, "config")
    last.request(3, describe)
    served.out.emit(last.conn, Reply(3, served.host.execute(describe)))  # (a catch-up)
    await turns()
    assert len(served.out.later) == 0
    assert collector.paused() == 0
    assert gc.isenabled()


async def test_what_waits_stays_within_its_bound_however_fast_the_changes_come(
    served: Served,
) -> None:
    # A writer changing the semaphore faster than its fan-outs drain: past ``most``
    # waiting, the next change's step encodes what waits (each connection's first),
    # so that what waits is never more than one fan-out and ``most``.
    later = served.out.later
    later.most = 2 * ROOM
    fan_out = CONNECTIONS * WATCHES_EACH - ROOM  # what one change leaves waiting
    for version in (b"v1", b"v2", b"v3"):
        served.host.execute(UpdateSemaphore(served.writer_sid, "config", version))
        assert len(later) == fan_out  # (not 2x, 3x: the earlier ones were encoded)
    await turns()
    assert len(later) == 0
    told_in_order(served, [b"v1", b"v2", b"v3"])


async def test_the_collector_runs_again_when_pushes_wait_past_the_longest_pause(
    served: Served,
) -> None:
    later = served.out.later
    later.max_pause = 0.0  # (any wait is past it)
    served.host.execute(UpdateSemaphore(served.writer_sid, "config", b"v1"))
    assert not gc.isenabled()
    await asyncio.sleep(0)  # one slice: pushes still wait, the pause is over
    assert len(later) > 0
    assert gc.isenabled()
    assert collector.paused() == 0
    await turns()
    assert len(later) == 0
    assert collector.paused() == 0  # (not resumed twice)
    assert gc.isenabled()
