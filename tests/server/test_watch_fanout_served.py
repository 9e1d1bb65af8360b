"""One change that many watchers on many connections watch, on a real ``tenure serve``
(issue 51): each watcher told exactly once, in order, and the updater answered.

With ``--step-budget 100`` (its least) a turn's room is 1,000 pushes, so the
fan-out of 2,400 watches is encoded over several turns of the server's loop
(``tenure.server._net.later``): what a client sees must not show it. Each watcher
gets one firing per change, with the change's data, in the order of the changes;
a watcher's own request meanwhile is answered after the firings routed to it
before (which changes came before it, its answer's data says: the server reads each
connection in its own order); the updater and a client that watches nothing are
answered. Ordered and counted, never timed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tenure._core import (
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DescribeResult,
    DescribeSemaphore,
    NodeConfig,
    UpdateSemaphore,
    WatchFired,
)
from tenure._protocol import Push, Reply

from .wire import Clients, ServerProcess, WireClient

pytestmark = pytest.mark.timeout(120)

CONNECTIONS = 6
WATCHES_EACH = 400  # 2,400 in all: a turn's room is 1,000 at --step-budget 100


async def _arm(client: WireClient, node: str) -> tuple[int, set[int]]:
    """A session on ``client`` and WATCHES_EACH repeating watches of ``config``."""
    sid = (await client.call(CreateSession(node, b"k"))).session_id
    describe = DescribeSemaphore(sid, "config", watch_data=True, watch_repeat=True)
    sent = [client.send(describe) for _ in range(WATCHES_EACH)]
    ids = set()
    for request in sent:
        answer = await client.answer(request)
        assert isinstance(answer, Reply)
        assert isinstance(answer.value, DescribeResult)
        assert answer.value.watch_id is not None
        ids.add(answer.value.watch_id)
    return sid, ids


async def test_every_watcher_on_every_connection_is_told_each_change_once_in_order(
    tmp_path: Path,
) -> None:
    clients = Clients()
    flags = ("--fsync", "off", "--step-budget", "100", "--max-watches-per-semaphore", "10000")
    with ServerProcess(tmp_path / "data", *flags) as server:
        try:
            admin = await clients.connect(server.port)
            await admin.call(CreateNode("n", NodeConfig(max_watches_per_session=WATCHES_EACH)))
            writer = (await admin.call(CreateSession("n", b"k"))).session_id
            await admin.call(CreateSemaphore(writer, "config", 1, b"v0"))
            await admin.call(CreateSemaphore(writer, "other", 1))
            watchers = [await clients.connect(server.port) for _ in range(CONNECTIONS)]
            armed = [await _arm(each, "n") for each in watchers]
            # Two changes at once (pipelined): the second is made while the first's
            # fan-out is still being encoded.
            first = admin.send(UpdateSemaphore(writer, "config", b"v1"))
            second = admin.send(UpdateSemaphore(writer, "config", b"v2"))
            # A watcher asks meanwhile: answered after its firings of each change made
            # before its question was read (which ones, the data it is told says).
            asking = watchers[-1]
            asked = asking.send(DescribeSemaphore(armed[-1][0], "config"))
            assert isinstance(await admin.answer(first), Reply)
            assert isinstance(await admin.answer(second), Reply)
            # A client that watches nothing is answered too.
            assert (await admin.call(DescribeSemaphore(writer, "other"))).description.count == 0
            answer = await asking.answer(asked)
            assert isinstance(answer, Reply)
            assert isinstance(answer.value, DescribeResult)
            told = answer.value.description.data
            assert told in (b"v0", b"v1", b"v2")
            for client, (sid, ids) in zip(watchers, armed, strict=True):
                while len(client.pushes) < 2 * WATCHES_EACH:  # (those read so far kept)
                    await client.next_event()
                seen: dict[int, list[bytes]] = {}
                for fired in client.pushes:
                    assert isinstance(fired, WatchFired)
                    assert fired.session_id == sid
                    assert fired.description is not None
                    seen.setdefault(fired.watch_id, []).append(fired.description.data)
                assert set(seen) == ids
                assert all(data == [b"v1", b"v2"] for data in seen.values()), seen
            # The asking watcher's answer came after its firings of every change its
            # answer reflects, and before none of a later change's: its connection's
            # events show the order.
            events = asking.events
            where = next(
                i for i, e in enumerate(events) if isinstance(e, Reply) and e.request_id == asked
            )
            before = [
                e.effect
                for e in events[:where]
                if isinstance(e, Push) and isinstance(e.effect, WatchFired)
            ]
            made = [b"v0", b"v1", b"v2"]
            for data in made[1:]:
                fired = [
                    f for f in before if f.description is not None and f.description.data == data
                ]
                expected = WATCHES_EACH if made.index(data) <= made.index(told) else 0
                assert len(fired) == expected, (told, data, len(fired))
            # Nothing more: each watch was told each change once.
            await admin.call(UpdateSemaphore(writer, "other", b"x"))  # (a step after all)
            await asyncio.sleep(0)
            for client in watchers:
                pong = await client.ping(7)
                assert pong.nonce == 7
                assert len(client.pushes) == 2 * WATCHES_EACH
        finally:
            await clients.close_all()
