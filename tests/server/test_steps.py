"""A mass expiry is done in slices, the server's clients heard between them (issue 37).

A real Server in this process (so the test reads its host and engine between the
loop's turns): thousands of sessions end at one instant while one client pings and
another sends a request. Shown by order and by counts, never by time:

* Pongs arrive while some of the ending sessions are gone and some are not yet:
  the server answered between slices of the expiry (one step would leave no such
  moment);
* no step did more than ``--step-budget`` items of deadline work (one deadline
  past it), the request read in the middle included: it was held back until the
  host had caught up (before, it did all that was left in its own step);
* the held-back request's answer does not show a session its time had ended, and
  ``host.caught_up()`` (what the dflockd and YDB faces await) ends with the last slice.

And a node-scoped token whose pattern starts with a wildcard has its ListNodes page
read a budget of names per turn, other connections' Pings answered between turns.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tenure._core import (
    MAX_COUNT,
    Acquire,
    CreateNode,
    CreateSession,
    DescribeNode,
    DetachSession,
    ListNodes,
    ListSessions,
    NodeConfig,
    NodePage,
    SessionPage,
)
from tenure._protocol import Pong, Reply
from tenure.server import DataDir, Journal
from tenure.server._config.serve_config import ServeConfig
from tenure.server._durability.storage import FsyncMode
from tenure.server._serve import Server
from tenure.server._server_host import wal_host

from .wire import WAIT, Clients, bound

pytestmark = pytest.mark.timeout(120)

SESSIONS = 2_000
BUDGET = 100
#: Pings a test sends at most (each waits for its Pong; the waits are bounded).
MAX_PINGS = 1_000_000
BIG = NodeConfig(max_sessions=100_000, max_semaphores=100_000, max_waiters=100_000)


@asynccontextmanager
async def running(
    path: Path, *, auth_file: Path | None = None
) -> AsyncIterator[tuple[Server, int]]:
    """A real Server in this process with a small step budget; stopped at the end."""
    journal = Journal(DataDir(path))
    engine = journal.open(asyncio.get_running_loop().time())
    config = ServeConfig(
        port=0, data_dir=path, fsync=FsyncMode.OFF, step_budget=BUDGET, auth_file=auth_file
    )
    server = Server(config, wal_host(config, journal, engine), bound(config), b"1" * 16)
    _, port = await server.start()
    try:
        yield server, port
    finally:
        server.stop()
        assert await asyncio.wait_for(server.wait(), WAIT) == 0


async def test_a_mass_expiry_is_sliced_and_pings_are_answered_between_slices(
    tmp_path: Path,
) -> None:
    clients = Clients()
    try:
        async with running(tmp_path / "data") as (server, port):
            host, engine = server.host, server.host.engine
            host.execute(CreateNode("n", BIG))
            waiter = host.execute(CreateSession("n", b"k")).session_id
            sids = []
            for i in range(SESSIONS):
                sid = host.execute(CreateSession("n", b"k", timeout=0.5)).session_id
                host.execute(Acquire(sid, f"m{i}", MAX_COUNT, 2 * i + 1, ephemeral=True))
                host.execute(
                    Acquire(waiter, f"m{i}", MAX_COUNT, 2 * i + 2, ephemeral=True, timeout=1e6)
                )
                sids.append(sid)
            # One instant for all: the detaches at one engine time (what a restart does
            # to every session), then a command of the host's to arm its timer.
            at = asyncio.get_running_loop().time()
            for sid in sids:
                engine.apply(DetachSession(sid), at)
            host.execute(DescribeNode("n"))
            assert host.most_deadline_work == 0

            pinger = await clients.connect(port)
            asker = await clients.connect(port)
            left_at_pongs: list[int] = []
            left_when_caught: list[int] = []

            def still() -> int:
                return sum(1 for sid in sids if sid in engine.sessions)

            asked: int | None = None
            for nonce in range(1, MAX_PINGS):  # (the expiry is due half a second in)
                pong = await pinger.ping(nonce)
                assert isinstance(pong, Pong)
                left = still()
                left_at_pongs.append(left)
                if 0 < left < SESSIONS and asked is None:
                    asked = asker.send(ListSessions("n", 0, 10))  # read while behind
                    # What the dflockd and YDB faces await before a request's commands.
                    caught = asyncio.ensure_future(host.caught_up())
                    caught.add_done_callback(lambda _: left_when_caught.append(still()))
                if left == 0:
                    break
            else:
                raise AssertionError(f"the sessions never ended: {left_at_pongs[-1]} left")
            answer = await asker.answer(asked) if asked is not None else None
    finally:
        await clients.close_all()
    # Pongs came between slices: with ends already done and ends still to come.
    assert any(0 < left < SESSIONS for left in left_at_pongs), left_at_pongs
    # No step did the rest at once: the request read in the middle waited.
    assert asked is not None
    assert 0 < host.most_deadline_work <= BUDGET + 1
    assert isinstance(answer, Reply)
    assert isinstance(answer.value, SessionPage)
    assert [s.session_id for s in answer.value.sessions] == [waiter]
    assert left_when_caught == [0]  # caught_up() ended with the last slice, not before


async def test_a_wildcard_led_tokens_listing_is_read_in_slices_between_others_pings(
    tmp_path: Path,
) -> None:
    # A token limited to "*-jobs" has the range of "", every node: its ListNodes
    # looks at --step-budget names a turn, and another connection's Pings are
    # answered between the turns (before, the whole scan was one step).
    auth = tmp_path / "auth.toml"
    auth.write_text(
        "[[token]]\nname = 'ops'\nsecret = 'OPS-SECRET'\naccess = 'read-write'\n"
        "[[token]]\nname = 'jobs'\nsecret = 'JOBS-SECRET'\naccess = 'read-only'\n"
        "nodes = ['*-jobs']\n"
    )
    clients = Clients()
    nodes = 5_000
    try:
        async with running(tmp_path / "data", auth_file=auth) as (server, port):
            host, index = server.host, server.host.engine.node_index
            for i in range(nodes):
                host.execute(CreateNode(f"n{i:05d}" + ("-jobs" if i % 1_000 == 999 else "")))
            expected = [f"n{i:05d}-jobs" for i in range(999, nodes, 1_000)]
            pinger = await clients.connect(port, token="OPS-SECRET")
            lister = await clients.connect(port, token="JOBS-SECRET")
            start = index.looked_at
            asked = lister.send(ListNodes("", 1000))
            answer = asyncio.ensure_future(lister.answer(asked))
            looked_at_pongs: list[int] = []
            for nonce in range(1, MAX_PINGS):
                if answer.done():
                    break
                assert isinstance(await pinger.ping(nonce), Pong)
                looked_at_pongs.append(index.looked_at - start)
            reply = await answer
    finally:
        await clients.close_all()
    assert isinstance(reply, Reply)
    assert isinstance(reply.value, NodePage)
    assert list(reply.value.names) == expected
    assert any(0 < looked < nodes for looked in looked_at_pongs), looked_at_pongs
