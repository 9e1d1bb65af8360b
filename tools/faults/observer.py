"""The observer: a client in the harness that looks at the server's state and records it.

It connects straight to the target (no proxy, no faketime) and, all through the
run, records

* ``snapshot`` operations: ``describe(owners=True, waiters=True)`` of each mutex,
  with the owners (session, token) and the waiters (sessions, in the server's
  queue order). The FIFO checker compares the queue order with the order of the
  grants that followed; the pause nemesis reads the latest one to find a holder;
* ``read`` operations: the data of each worker's register semaphore (the number
  it holds, or None if the semaphore does not exist), which the durability
  checker compares with the acknowledged updates.

Each describe is bounded (:data:`CALL_WAIT`): while the server is down it fails
fast instead of waiting for a connection. A lost observer session is replaced.
The observer is one process of the history, so its operations are made one at a
time even when the harness asks for a last read while :meth:`Observer.run` is still
going (lincheck refuses a process with two operations in flight).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Final

import tenure
from tenure.errors import NotFoundError, TenureError
from tools.faults.history import Recorder

OBSERVER: Final = "observer"
#: Bound of one describe, in seconds.
CALL_WAIT: Final = 2.0


class Observer:
    """See the module docstring."""

    def __init__(
        self,
        url: str,
        node: str,
        keys: list[str],
        registers: list[str],
        recorder: Recorder,
        *,
        interval: float = 0.1,
        reads_every: int = 5,
    ) -> None:
        self.url = url
        self.node = node
        self.keys = keys
        self.registers = registers
        self.rec = recorder
        self.interval = interval
        self.reads_every = reads_every
        #: The latest snapshot of each key: owners as (session, token) pairs.
        self.owners: dict[str, list[tuple[int, int]]] = {}
        #: The latest snapshot of each key: the waiting sessions, in queue order.
        self.waiters: dict[str, list[int]] = {}
        self.snapshots = 0
        self._client: tenure.Client | None = None
        self._session: tenure.Session | None = None
        # One operation at a time: the history's process OBSERVER is sequential.
        self._turn = asyncio.Lock()

    async def run(self, stop: asyncio.Event) -> None:
        """Snapshot every key each ``interval``, read the registers every few rounds."""
        rounds = 0
        try:
            while not stop.is_set():
                rounds += 1
                for key in self.keys:
                    await self.snapshot(key)
                if rounds % self.reads_every == 0:
                    await self.read_registers()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.interval):
                        await stop.wait()
        finally:
            await self.aclose()

    async def read_registers(self) -> None:
        """Read every register once."""
        for name in self.registers:
            await self._read(name)

    async def snapshot(self, key: str) -> None:
        """Record one describe of mutex ``key`` (owners and waiters)."""
        async with self._turn:
            await self._snapshot(key)

    async def _snapshot(self, key: str) -> None:
        op = self.rec.invoke(OBSERVER, "snapshot", key=key)
        try:
            session = await self._ensure()
            async with asyncio.timeout(CALL_WAIT):
                found = await session.semaphore(key).describe(owners=True, waiters=True)
        except NotFoundError:  # an idle mutex vanishes (it is ephemeral)
            value: dict[str, Any] = {"owners": [], "waiters": []}
        except (TenureError, OSError, TimeoutError) as error:
            self.rec.complete(OBSERVER, op, "info", error=repr(error))
            await self._forget_if_lost()
            return
        else:
            value = {
                "owners": [[owner.session_id, owner.token] for owner in found.owners],
                "waiters": [waiter.session_id for waiter in found.waiters],
            }
        self.owners[key] = [(sid, token) for sid, token in value["owners"]]
        self.waiters[key] = list(value["waiters"])
        self.snapshots += 1
        self.rec.complete(OBSERVER, op, "ok", value=value)

    async def _read(self, name: str) -> None:
        async with self._turn:
            await self._read_in_turn(name)

    async def _read_in_turn(self, name: str) -> None:
        op = self.rec.invoke(OBSERVER, "read", key=name)
        value: int | None
        try:
            session = await self._ensure()
            async with asyncio.timeout(CALL_WAIT):
                found = await session.semaphore(name).describe()
            value = int(found.data.decode())
        except NotFoundError:
            value = None
        except (TenureError, OSError, TimeoutError) as error:
            self.rec.complete(OBSERVER, op, "info", error=repr(error))
            await self._forget_if_lost()
            return
        self.rec.complete(OBSERVER, op, "ok", value=value)

    async def _ensure(self) -> tenure.Session:
        if self._client is None:
            async with asyncio.timeout(CALL_WAIT * 2):
                self._client = await tenure.connect(self.url, connect_timeout=CALL_WAIT)
        if self._session is None:
            async with asyncio.timeout(CALL_WAIT):
                self._session = await self._client.session(self.node, recovery_window=60.0)
        return self._session

    async def _forget_if_lost(self) -> None:
        if self._session is not None and self._session.closed:
            self._session = None

    async def aclose(self) -> None:
        """Close the observer's client (bounded)."""
        client, self._client, self._session = self._client, None, None
        if client is not None:
            with contextlib.suppress(TenureError, OSError, TimeoutError):
                async with asyncio.timeout(CALL_WAIT * 5):
                    await client.aclose()
