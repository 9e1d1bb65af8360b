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

A :class:`PrefixWatcher` watches every register at once, through a prefix cache
(``client.cache(node, prefix=...)``: a prefix watch armed, then the prefix listed), and
records each register's states as a :class:`RegisterWatcher` does one's: a process of
its own per register and cache (``w0c1.2/reg-0``), invoked when the cache is asked
for, its first state the cache's when it was entered, then each change the cache
tells of it (the latest, if several came while the watcher was busy). The cache keeps
itself current across its sessions' losses (a new session, a new watch, the prefix
listed again and what differs told), so one cache is one watch for as long as it is
open; the same rules hold its states to the registers' linearization. Each cache is
closed after a while (:data:`CACHE_LIFE`) and another opened, as a new process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import traceback
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from typing import Final, TypeVar

import tenure
from tenure.errors import LostError, TenureError
from tenure.testing.lincheck import HistoryWriter
from tenure.testing.workload._books import Books, ProcessIds
from tenure.testing.workload._config import LinConfig
from tenure.testing.workload._recording import Notes

#: Seconds a watcher waits before it watches again after its watch ended.
AGAIN: Final = (0.1, 0.4)
#: Seconds a prefix watcher keeps one cache open before it opens the next (each opening
#: arms a watch and lists the prefix while the registers change: the race a cache must win).
CACHE_LIFE: Final = (0.5, 3.0)


class _Watcher(ABC):
    """What every watcher does: watch until stopped, again whenever a watch ends."""

    def __init__(self, config: LinConfig, number: int, books: Books, recorder: Notes) -> None:
        self.config = config
        self.label = f"w{config.index}c{number}"
        self.url = config.door_of(number)
        self.rng = random.Random(f"{config.seed}-{self.label}")
        self.procs = ProcessIds(self.label)
        self.rec = recorder
        #: Where what it sees goes (its subclass opens it: the header names what it watches).
        self.writer: HistoryWriter

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
            self._close()

    async def _watch(self, stop: asyncio.Event) -> None:
        async with asyncio.timeout(self.config.op_timeout):
            client = await tenure.connect(self.url, connect_timeout=2.0)
        try:
            await self._watch_through(client, stop)
        finally:
            with contextlib.suppress(TenureError, OSError, TimeoutError):
                async with asyncio.timeout(10.0):
                    await client.aclose()

    @abstractmethod
    async def _watch_through(self, client: tenure.Client, stop: asyncio.Event) -> None:
        """Watch through ``client`` until ``stop`` (or the watch ends: an error)."""

    def _close(self) -> None:
        self.writer.close()


class RegisterWatcher(_Watcher):
    """A watcher of one register (see the module docstring)."""

    def __init__(self, config: LinConfig, number: int, books: Books, recorder: Notes) -> None:
        super().__init__(config, number, books, recorder)
        self.key = self.rng.choice(config.registers)
        self.writer = books.watcher(self.label, self.key)

    async def _watch_through(self, client: tenure.Client, stop: asyncio.Event) -> None:
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
                self.writer.ok(process, "watch", _value(found), self.key)


class PrefixWatcher(_Watcher):
    """A watcher of every register through a prefix cache (see the module docstring)."""

    def __init__(self, config: LinConfig, number: int, books: Books, recorder: Notes) -> None:
        super().__init__(config, number, books, recorder)
        self.keys = sorted(config.registers)
        #: The prefix the cache mirrors: the registers' own (none but them under it;
        #: names, not paths: their common characters are meant).
        self.prefix = os.path.commonprefix(self.keys)  # noqa: RUF071
        self.writer = books.watcher(self.label, self.prefix)

    async def _watch_through(self, client: tenure.Client, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self._one_cache(client, stop, self.rng.uniform(*CACHE_LIFE))

    async def _one_cache(self, client: tenure.Client, stop: asyncio.Event, life: float) -> None:
        """One cache, open for ``life`` seconds (or until ``stop``): a watch of each register."""
        base = self.procs.current
        processes = {key: f"{base}/{key}" for key in self.keys}
        for key, process in processes.items():
            self.writer.invoke(process, "watch", None, key)
        try:
            async with asyncio.timeout(self.config.op_timeout):
                cache = await client.cache(self.config.node, prefix=self.prefix, owners=False)
            async with cache:
                changes = cache.changes()  # (before any await: no change missed)
                for key, process in processes.items():
                    self._saw(process, key, cache.get(key))
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(life):
                        while (found := await _next_or_stop(changes, stop)) is not None:
                            if found.name in processes:
                                self._saw(processes[found.name], found.name, found.view)
        finally:  # (its life over, stopped, or ended: what each key waited for is unknown)
            for key, process in processes.items():
                self.writer.info(process, "watch", None, key)
            self.procs.unknown()

    def _saw(self, process: str, key: str, view: tenure.SemaphoreDescription | None) -> None:
        """Record a state of ``key`` seen, and ask for its next."""
        self.writer.ok(process, "watch", None if view is None else _value(view), key)
        self.writer.invoke(process, "watch", None, key)


def watcher(
    config: LinConfig, number: int, books: Books, recorder: Notes
) -> RegisterWatcher | PrefixWatcher:
    """The watcher client ``number`` is (one of the first ``config.watchers``; of them,
    the last ``config.prefix_watchers`` watch through a prefix cache)."""
    prefix = number >= config.watchers - config.prefix_watchers
    kind = PrefixWatcher if prefix else RegisterWatcher
    return kind(config, number, books, recorder)


def _value(found: tenure.SemaphoreDescription) -> int | None:
    """A register's value in a state (its data as an integer; None: it does not exist)."""
    return int(found.data.decode()) if found.exists else None


_T = TypeVar("_T")


async def _next_or_stop(stream: AsyncIterator[_T], stop: asyncio.Event) -> _T | None:
    """The stream's next item, or None once ``stop`` is set first (cancelled, the wait
    for the item is cancelled too)."""
    following = asyncio.ensure_future(anext(stream))
    stopping = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({following, stopping}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        following.cancel()  # (what it ends with, the stream's end included, is nobody's)
        following.add_done_callback(lambda task: task.cancelled() or task.exception())
        raise
    finally:
        stopping.cancel()
    if following in done:
        found: _T = following.result()
        return found
    following.cancel()
    with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, TenureError, OSError):
        await following
    return None
