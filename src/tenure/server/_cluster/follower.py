"""A warm engine: the cluster's state, kept up to date by following the log in etcd.

Every server of a cluster runs a :class:`Follower` while it does not lead. It loads
the newest snapshot and the log entries after it, read at one revision, then
watches the log from the next revision and applies each new entry as it arrives,
in index order, exactly as the leader applied its records (the engine is
deterministic and every record carries the leader's time). Effects are dropped: a
standby tells nobody anything. So when it is elected it only reads the tail that
its watch had not brought yet (:meth:`Follower.catch_up`) and serves the same
engine at once.

What cannot be applied in order is read again: a gap in the watched entries, a
watch cancelled because etcd compacted its revision, or a log trimmed past this
follower by a snapshot (it then loads that snapshot). An entry that does not apply
is a :class:`~tenure.errors.CorruptLogError`: this server's state can no longer be
trusted, and it stops.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable
from typing import Final

import msgpack

from tenure._core import Effect, Engine
from tenure._core.snapshot import load
from tenure._etcd.requests import prefix_end
from tenure._etcd.streams import WatchHub
from tenure.errors import CorruptLogError, UnavailableError
from tenure.server._cluster.keys import ClusterDataError, LogEntry, decode_entry
from tenure.server._cluster.store import ClusterStore
from tenure.server._durability.journal import collector_paused
from tenure.server._durability.records import apply_record
from tenure.server._durability.storage import unframed

log = logging.getLogger("tenure.cluster")

__all__ = ["Follower"]

#: An event's type in etcd's watch: a put (0) or a delete (1).
_PUT: Final = 0
#: The longest pause between two reads of the log that etcd did not answer, in seconds.
MAX_PAUSE: Final = 2.0


class Follower:
    """See the module docstring."""

    def __init__(self, store: ClusterStore, hub: WatchHub, *, max_nodes: int = 10_000) -> None:
        self.store = store
        self.hub = hub
        self.max_nodes = max_nodes
        self.engine = Engine(max_nodes=max_nodes)
        #: The index of the last entry applied (0: none).
        self.applied = 0
        #: The term of the last entry applied.
        self.term = 0
        #: The revision the engine's state was last read at (the watch goes on after it).
        self.revision = 0
        self.loads = 0  # how many times the state was loaded whole (a snapshot, or none)
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        #: Told of each engine loaded afresh (the standby's host shows the new one).
        self.on_load: Callable[[Engine], None] = lambda engine: None
        #: Told the effects of each entry applied (the watches a standby armed in its
        #: engine fire so: tenure.server._net.standby_watches); None: dropped.
        self.on_effects: Callable[[list[Effect]], None] | None = None

    # -- reading ------------------------------------------------------------------------

    async def load(self) -> None:
        """Build the engine afresh: the newest snapshot, then every entry after it, all
        read at one revision.

        Raises:
            CorruptLogError: the snapshot or an entry cannot be applied.
        """
        store = self.store
        pointer, revision = await store.pointer()
        engine = Engine(max_nodes=self.max_nodes)
        applied = term = 0
        if pointer is not None:
            data = await store.read_snapshot(pointer, revision)
            with collector_paused():
                # Not counted here: the host counts once it sets a quota or the
                # budget, else pauses the counting (tenure.server._serve).
                engine = load(msgpack.unpackb(data, raw=False), counted=False)
            applied, term = pointer.index, pointer.term
        self.engine, self.applied, self.term, self.revision = engine, applied, term, revision
        self.loads += 1
        async for page in store.log_pages(applied, revision=revision):
            for index, entry in page.entries:
                if index != self.applied + 1:
                    raise CorruptLogError(
                        "etcd", None, f"log entry {self.applied + 1} is missing (found {index})"
                    )
                self._apply(index, entry)
        # The loaded state lives on: as a single server's after its recovery, the
        # cyclic collector's full collections need not walk it (a standby's took
        # 270-450 ms at a million holds, while its loop follows the log).
        gc.freeze()
        # A snapshot with no entry after it applies nothing: wake applied_past() anyway.
        self._changed.set()
        fields = {"snapshot": pointer.index if pointer else 0, "applied": self.applied}
        log.info("cluster state loaded", extra={"event": "cluster_loaded", "fields": fields})
        self.on_load(self.engine)

    async def catch_up(self) -> None:
        """Apply every entry after :attr:`applied` that etcd has now (linearizably).

        Loads the newest snapshot instead if the log was trimmed past this follower.
        """
        async for page in self.store.log_pages(self.applied):
            for index, entry in page.entries:
                if index <= self.applied:
                    continue
                if index != self.applied + 1:  # a snapshot trimmed what we still need
                    await self.load()
                    return
                self._apply(index, entry)
            self.revision = max(self.revision, page.revision)
        pointer, _ = await self.store.pointer()
        if pointer is not None and pointer.index > self.applied:
            await self.load()

    def _apply(self, index: int, entry: LogEntry) -> None:
        if entry.term < self.term:
            raise CorruptLogError(
                "etcd", None, f"log entry {index} has term {entry.term} after {self.term}"
            )
        records = entry.records
        try:
            spans = unframed(records)
        except ValueError as error:
            raise CorruptLogError("etcd", None, f"log entry {index}: {error}") from None
        engine = self.engine
        for number, (start, end) in enumerate(spans):
            apply_record(engine, records[start:end], f"log entry {index} record {number}", "etcd")
        # The leader told its clients; here only the watches armed on this standby hear.
        effects = engine.take_effects()
        if effects and self.on_effects is not None:
            self.on_effects(effects)
        self.applied, self.term = index, entry.term
        self._changed.set()

    # -- following ----------------------------------------------------------------------

    def start(self) -> None:
        """Follow the log from :attr:`revision` on (until :meth:`stop`)."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._follow())

    async def stop(self) -> None:
        """Stop following (what was applied stays)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    @property
    def failed(self) -> BaseException | None:
        """Why following stopped on its own (an entry that does not apply), if it did."""
        task = self._task
        if task is None or not task.done() or task.cancelled():
            return None
        return task.exception()

    async def applied_past(self, index: int) -> None:
        """Until :attr:`applied` is at least ``index`` (for tests and status)."""
        while self.applied < index:
            self._changed.clear()
            await self._changed.wait()

    async def _follow(self) -> None:
        keys = self.store.keys
        watcher = self.hub.watch(keys.log, prefix_end(keys.log), self.revision + 1)
        try:
            while True:
                await watcher.wait()
                events, reset = watcher.drain()
                gap = False
                for event in events:
                    if event.type != _PUT:
                        continue  # a snapshot trimmed entries it covers
                    index = keys.index_of(bytes(event.kv.key))
                    if index <= self.applied:
                        continue
                    if index != self.applied + 1:
                        gap = True
                        break
                    self._apply(index, _entry(bytes(event.kv.value), index))
                if reset or gap:
                    await self._catch_up_while_etcd_is_away()
                    watcher.restart(self.revision + 1)
        finally:
            watcher.cancel()

    async def _catch_up_while_etcd_is_away(self) -> None:
        """:meth:`catch_up`, tried again until etcd answers (a standby waits for etcd:
        only an entry that does not apply ends its following)."""
        pause = 0.1
        while True:
            try:
                await self.catch_up()
                return
            except UnavailableError as error:
                log.warning("reading the log: %s; trying again", error)
            await asyncio.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE)


def _entry(raw: bytes, index: int) -> LogEntry:
    try:
        return decode_entry(raw)
    except ClusterDataError as error:
        raise CorruptLogError("etcd", None, f"log entry {index}: {error}") from None
