"""A watcher of the linearizable workload: what it saw of a register, recorded.

A watcher client watches one register's data (``semaphore(key).watch(data=True)``)
and writes each state it is given to its own file (``watch-w<index>c<n>.jsonl``,
:func:`tenure.testing.workload.watch_file`) as lincheck events of ``f: "watch"``:

* the header: ``{"watch": "data", "model": "register", "key": KEY, "initial": 0}``;
* one operation per state seen: ``invoke`` (value null) when the watcher asked for
  the next state (the watch opened, or the previous state handed over), ``ok`` when
  it got one, its value the register's value then (the data as an integer; null for
  a semaphore that does not exist). So each ``ok`` is a state the register had at
  some point of its interval, and tenure coalesces: a watcher busy between two
  states gets the latest, not each one (a subsequence of the register's states, in
  order, without repeats: the watch iterator drops a state equal to the last one);
* the watch ending with an error: that operation ``info``; the watcher opens a new
  watch (a new session if the old one was lost) as a new process (``w0c1.2``), whose
  first state is the register's state when it opened.

The register's own operations are in the workers' ``register`` files;
:func:`~tenure.testing.workload._merge.watch_records` makes each watch a lincheck watch
record, which the fault suite and the simulation hold to the registers'
linearization (:func:`tenure.testing.lincheck.check_watches`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import traceback
from collections.abc import AsyncGenerator
from typing import Final

import tenure
from tenure.errors import LostError, TenureError
from tenure.testing.workload._books import Books, ProcessIds
from tenure.testing.workload._config import LinConfig
from tenure.testing.workload._recording import Notes

#: Seconds a watcher waits before it watches again after its watch ended.
AGAIN: Final = (0.1, 0.4)


class RegisterWatcher:
    """One watcher client (see the module docstring)."""

    def __init__(self, config: LinConfig, number: int, books: Books, recorder: Notes) -> None:
        self.config = config
        self.label = f"w{config.index}c{number}"
        self.url = config.door_of(number)
        self.rng = random.Random(f"{config.seed}-{self.label}")
        self.key = self.rng.choice(config.registers)
        self.writer = books.watcher(self.label, self.key)
        self.procs = ProcessIds(self.label)
        self.rec = recorder

    async def run(self, stop: asyncio.Event) -> None:
        """Watch until ``stop``: a new watch (and session) whenever one ends."""
        try:
            while not stop.is_set():
                try:
                    await self._watch(stop)
                except (TenureError, OSError, TimeoutError) as error:
                    self.rec.note(self.label, "watch-ended", error=repr(error))
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.rng.uniform(*AGAIN)):
                        await stop.wait()
        except Exception as error:
            # (where it was raised: the note is all that is left of it)
            where = traceback.format_exc(limit=-12)
            self.rec.note(self.label, "client-error", error=repr(error), where=where)
            raise
        finally:
            self.writer.close()

    async def _watch(self, stop: asyncio.Event) -> None:
        async with asyncio.timeout(self.config.op_timeout):
            client = await tenure.connect(self.url, connect_timeout=2.0)
        try:
            async with asyncio.timeout(self.config.op_timeout):
                session = await client.session(self.config.node, recovery_window=self.config.window)
            stream = session.semaphore(self.key).watch(data=True)
            async with contextlib.aclosing(stream):
                while not stop.is_set():
                    process = self.procs.current
                    self.writer.invoke(process, "watch", None, self.key)
                    try:
                        found = await _next_or_stop(stream, stop)
                    except (asyncio.CancelledError, LostError, TenureError, OSError):
                        self.writer.info(process, "watch", None, self.key)
                        self.procs.unknown()
                        raise
                    if found is None:  # stopped while waiting: nothing more was seen
                        self.writer.info(process, "watch", None, self.key)
                        self.procs.unknown()
                        return
                    value = int(found.data.decode()) if found.exists else None
                    self.writer.ok(process, "watch", value, self.key)
        finally:
            with contextlib.suppress(TenureError, OSError, TimeoutError):
                async with asyncio.timeout(10.0):
                    await client.aclose()


async def _next_or_stop(
    stream: AsyncGenerator[tenure.SemaphoreDescription, None], stop: asyncio.Event
) -> tenure.SemaphoreDescription | None:
    """The stream's next state, or None once ``stop`` is set first."""
    following = asyncio.ensure_future(anext(stream))
    stopping = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({following, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if following in done:
        found: tenure.SemaphoreDescription = following.result()
        return found
    following.cancel()
    with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, TenureError, OSError):
        await following
    return None
