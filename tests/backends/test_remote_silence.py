"""A partitioned holder's lock goes to the next waiter one recovery window after it
went silent, not after the server's idle timeout (issue 10, finding 2).

The partition is :meth:`NetProxy.stall`: nothing moves either way and nothing
closes, so the server's connection to the holder still looks open. The server
(``tenure_server``: the default 15 s idle timeout) must expire the holder's
session one window (1 s here) after it last heard from it (ZooKeeper's rule), and
the holder's client must have given up first, on its own clock. What is asserted is
state: who holds the lock, what the server logged, what each client believes.
"""

from __future__ import annotations

import asyncio
import json

import tenure
from tenure.errors import SessionExpiredError
from tests.api.support import eventually, owners, spawn, wait_for_waiters
from tests.netproxy import NetProxy
from tests.server.wire import ServerProcess

WINDOW = 1.0
#: The waiter's bound: a generous multiple of the window, and well short of the
#: server's idle timeout (15 s), so that only the silence rule can have served it.
BOUND = 5 * WINDOW
IDLE_TIMEOUT = 15.0


def logged(server: ServerProcess, msg: str) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in server.lines() if line.startswith("{")]
    return [line for line in lines if line["msg"] == msg]


async def test_a_partitioned_holder_loses_its_lock_one_window_after_it_went_silent(
    client: tenure.Client, direct: tenure.Client, proxy: NetProxy, tenure_server: ServerProcess
) -> None:
    assert BOUND < IDLE_TIMEOUT
    holder = await client.session("n", recovery_window=WINDOW)
    waiter = await direct.session("n")
    lock = await holder.mutex("job").lock()
    waiting = spawn(waiter.mutex("job").lock())
    await wait_for_waiters(waiter, "job", 1)

    proxy.stall()  # the holder's connection stays open, and silent
    async with asyncio.timeout(BOUND):
        taken = await waiting
    assert taken.held
    assert taken.token > lock.token
    assert await owners(waiter, "job") == [waiter.id]

    # The server acted on the silence, not on its idle timeout, and counted the
    # window from the holder's last frame.
    (closed,) = logged(tenure_server, "silent for a recovery window; closing")
    assert closed["window"] == WINDOW
    assert logged(tenure_server, "idle; closing") == []
    (detached,) = logged(tenure_server, "connection lost; sessions detached")
    assert detached["sessions"] == [holder.id]
    # The holder's client gave up on its own clock (it was cut off all along).
    assert isinstance(holder.lost_reason, SessionExpiredError)
    assert isinstance(lock.lost_reason, SessionExpiredError)
    assert not lock.held

    proxy.resume()  # once the network heals, the holder learns nothing new: it is over

    async def reconnected() -> bool:
        return await owners(waiter, "job") == [waiter.id]

    await eventually(reconnected, "the waiter keeping the lock")
