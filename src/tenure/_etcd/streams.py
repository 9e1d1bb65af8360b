"""The etcd client's streams: one LeaseKeepAlive for every lease, one Watch for every watch.

Both run as a task that (re)opens its stream on the client's current channel
(:class:`~tenure._etcd.client.EtcdClient`). When a stream breaks (the member died,
the network dropped) the client fails over to the next endpoint and the stream is
opened again there, with backoff:

* **keepalive**: each lease is renewed at a third of its TTL; the answer tells its
  holder (an ``etcd://`` session, a cluster member) when etcd last heard it
  (:meth:`Renewable.renewed`, with the send time of the request it answers) or that
  the lease is gone (TTL <= 0). After a new stream opens, every holder checks its
  lease (:meth:`Renewable.reconnected`: a session re-attaches).
* **watch**: every watch is created with our own id (etcd >= 3.4) from the
  revision after the last event it saw, so a new stream misses nothing; a watch
  that etcd cancels because that revision was compacted is told so, and its owner
  reads the state afresh (etcd#13156: never re-watch from an old revision).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
from typing import Any, Protocol

import grpc
from aetcd.rpc import rpc_pb2

from tenure._etcd.client import EtcdClient

__all__ = ["KeepAlive", "Renewable", "WatchHub", "Watcher"]

log = logging.getLogger("tenure.etcd")


class Renewable(Protocol):
    """A lease the keepalive stream renews (an ``etcd://`` session's, a cluster member's)."""

    lease_id: int
    ttl: int

    def renewed(self, sent_at: float) -> None:
        """etcd renewed the lease in answer to a request sent at ``sent_at`` (loop time)."""

    def lease_gone(self) -> None:
        """etcd answered that the lease does not exist any more."""

    def reconnected(self) -> None:
        """A new stream is open (after a failover): check the lease and re-attach."""


#: What a stream raises when it ended under us: an error status, the end of the
#: stream, or a write racing the call's end (grpc.aio raises InvalidStateError
#: "RPC already finished" then: seen when the member a watch stream was on was
#: SIGKILLed, which used to end the hub's task and with it every watch).
_STREAM_ENDED = (
    grpc.aio.AioRpcError,
    grpc.aio.UsageError,
    ConnectionError,
    asyncio.InvalidStateError,
)


async def _backoff(delay: float) -> float:
    await asyncio.sleep(delay)
    return min(delay * 2, 1.0)


class _Stream:
    """A bidirectional stream kept open: opened again, failing over, when it breaks.

    Subclasses say how to open it (:meth:`_open`), what to do on a new stream after
    the first (:meth:`_reopened`), how to write (:meth:`_write`, until the reader
    ends) and read (:meth:`_read`), and what a broken stream loses (:meth:`_broken`).
    """

    what = "stream"

    def __init__(self, client: EtcdClient) -> None:
        self._client = client
        self._task: asyncio.Task[None] | None = None
        #: The member the stream was last opened on (None: never opened). A stream
        #: stays where it was opened until it breaks, while the client's unary
        #: calls may fail over meanwhile: the two need not be on the same member.
        self.endpoint: str | None = None

    def _start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def close(self) -> None:
        """Stop the stream."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _open(self) -> Any:
        raise NotImplementedError

    def _reopened(self) -> None:
        """A new stream after a broken one (before anything is written on it)."""

    async def _write(self, call: Any, reader: asyncio.Task[None]) -> None:
        raise NotImplementedError

    async def _read(self, call: Any) -> None:
        raise NotImplementedError

    def _broken(self) -> None:
        """The stream broke: what was in flight on it is lost."""

    async def _run(self) -> None:
        delay = 0.05
        first = True
        while True:
            generation = self._client.generation
            call = self._open()
            self.endpoint = self._client.endpoint
            reader = asyncio.create_task(self._read(call))
            try:
                if not first:
                    self._reopened()
                first = False
                await self._write(call, reader)
            except _STREAM_ENDED as error:
                log.info("etcd %s stream lost: %s", self.what, error)
            except Exception:  # never let the stream's task die: every lease needs it
                log.exception("etcd %s stream failed; opening it again", self.what)
            finally:
                call.cancel()
                reader.cancel()
                # The reader's end, whatever it was, is not ours to raise; but a cancel
                # of this task while it waits here is (close() awaits this task: a cancel
                # swallowed here would keep the stream reopening, and close() waiting).
                await asyncio.gather(reader, return_exceptions=True)
            self._broken()
            self._client.failover(generation)
            delay = await _backoff(delay)


class KeepAlive(_Stream):
    """One LeaseKeepAlive stream renewing every registered lease at a third of its TTL."""

    what = "keepalive"

    def __init__(self, client: EtcdClient) -> None:
        super().__init__(client)
        self._leases: dict[int, Renewable] = {}
        self._due: dict[int, float] = {}
        self._sent: dict[int, collections.deque[float]] = {}
        self._wake = asyncio.Event()

    def add(self, lease: Renewable, *, at_once: bool = False) -> None:
        """Renew ``lease`` from now on (its first renewal a third of its TTL from now, or
        ``at_once``: a resumed lease may have little of its TTL left)."""
        loop = asyncio.get_running_loop()
        self._leases[lease.lease_id] = lease
        self._due[lease.lease_id] = loop.time() + (0.0 if at_once else lease.ttl / 3)
        self._sent[lease.lease_id] = collections.deque()
        self._wake.set()
        self._start()

    def remove(self, lease_id: int, lease: Renewable | None = None) -> None:
        """Stop renewing (only if the lease is renewed for ``lease``, when given: a
        session resumed in this client renews the same lease id as the one it fenced)."""
        if lease is not None and self._leases.get(lease_id) is not lease:
            return
        self._leases.pop(lease_id, None)
        self._due.pop(lease_id, None)
        self._sent.pop(lease_id, None)

    def _open(self) -> Any:
        return self._client.lease.LeaseKeepAlive(metadata=self._client.metadata())

    def _reopened(self) -> None:
        for lease in list(self._leases.values()):
            lease.reconnected()

    def _broken(self) -> None:
        for sent in self._sent.values():
            sent.clear()  # those requests' answers are lost with the stream

    async def _write(self, call: Any, reader: asyncio.Task[None]) -> None:
        loop = asyncio.get_running_loop()
        while not reader.done():
            now = loop.time()
            for lease_id in list(self._due):
                # Looked up afresh: a lease removed while a write above was awaited is
                # skipped (it raised KeyError, and the stream was torn down and every
                # lease told "reconnected": seen when a member stepped down under load).
                lease, due = self._leases.get(lease_id), self._due.get(lease_id)
                if lease is not None and due is not None and due <= now:
                    self._due[lease_id] = now + lease.ttl / 3
                    self._sent[lease_id].append(now)
                    await call.write(rpc_pb2.LeaseKeepAliveRequest(ID=lease_id))
            self._wake.clear()
            wait = min(self._due.values(), default=now + 1.0) - loop.time()
            waker = asyncio.ensure_future(self._wake.wait())
            try:
                # FIRST_COMPLETED: a lease added to renew at once (a resume) wakes the
                # writer; waiting for both would sleep until the next renewal was due.
                await asyncio.wait(
                    {reader, waker}, timeout=max(wait, 0.0), return_when=asyncio.FIRST_COMPLETED
                )
            finally:  # (also when the stream is closed meanwhile: no task left behind)
                waker.cancel()
        reader.result()  # raise what ended the stream

    async def _read(self, call: Any) -> None:
        while True:
            reply = await call.read()
            if reply is grpc.aio.EOF:
                raise ConnectionError("keepalive stream ended")
            lease_id = int(reply.ID)
            lease = self._leases.get(lease_id)
            sent = self._sent.get(lease_id)
            if lease is None or sent is None:
                continue
            sent_at = sent.popleft() if sent else asyncio.get_running_loop().time()
            if reply.TTL <= 0:
                self.remove(lease_id)
                lease.lease_gone()
            else:
                lease.renewed(sent_at)


class Watcher:
    """One watch: the events it brought since last drained, and whether it must re-read.

    Its owner waits on :meth:`wait` and then takes :meth:`drain`; ``reset`` is set
    when events may have been missed (the range was compacted past the watch's
    revision, which is then moved to ``compacted``): re-read the state, then
    :meth:`restart` from the revision after the read.
    """

    def __init__(self, hub: WatchHub, watch_id: int, key: bytes, end: bytes, start: int) -> None:
        self._hub = hub
        self.watch_id = watch_id
        self.key, self.end = key, end
        #: The revision to watch from; 0: from etcd's current one, when it is made.
        self.next_revision = start
        #: The revision etcd was at when it made the watch (None: not made yet).
        self.created_revision: int | None = None
        self.events: list[Any] = []
        self.reset = False
        self.compacted = 0
        self._changed = asyncio.Event()

    def created(self, revision: int) -> None:
        """etcd made the watch at ``revision``: one made from "now" goes on after it."""
        if self.next_revision == 0:
            self.next_revision = revision + 1
        self.created_revision = revision
        self._changed.set()

    def push(self, events: list[Any]) -> None:
        """Events arrived."""
        if events:
            self.events.extend(events)
            self.next_revision = int(events[-1].kv.mod_revision) + 1
            self._changed.set()

    def must_reset(self, compacted: int = 0) -> None:
        """Events may have been lost: the owner must read the state again."""
        self.reset = True
        self.compacted = max(self.compacted, compacted)
        self._changed.set()

    async def wait(self) -> None:
        """Until something arrived."""
        await self._changed.wait()

    def drain(self) -> tuple[list[Any], bool]:
        """Take the events, and whether the state must be read again."""
        events, reset = self.events, self.reset
        self.events, self.reset = [], False
        self._changed.clear()
        return events, reset

    def restart(self, revision: int) -> None:
        """Watch again from ``revision`` (after a re-read at ``revision - 1``)."""
        self._hub.recreate(self, revision)

    def cancel(self) -> None:
        """Stop watching (idempotent)."""
        self._hub.cancel(self)


class WatchHub(_Stream):
    """One Watch stream carrying every watch of this client."""

    what = "watch"

    def __init__(self, client: EtcdClient) -> None:
        super().__init__(client)
        self._watchers: dict[int, Watcher] = {}
        self._ids = itertools.count(1)  # 0 asks etcd to choose: never ours
        self._outbox: asyncio.Queue[Any] = asyncio.Queue()

    def watch(self, key: bytes, end: bytes, start: int) -> Watcher:
        """Watch ``[key, end)`` from revision ``start`` (0: from when etcd makes it).

        etcd serves a watch whose start revision has passed already from its
        "unsynced" group, which it catches up every 100 ms: such a watch hears of a
        change up to 100 ms late. One from "now" (0) is synced at once; its owner
        learns the revision it was made at (:attr:`Watcher.created_revision`).
        """
        watcher = Watcher(self, next(self._ids), key, end, start)
        self._watchers[watcher.watch_id] = watcher
        self._outbox.put_nowait(self._create(watcher))
        self._start()
        return watcher

    def recreate(self, watcher: Watcher, revision: int) -> None:
        """Cancel ``watcher``'s etcd watch and create it again from ``revision``."""
        if watcher.watch_id not in self._watchers:
            return
        self._outbox.put_nowait(self._cancel(watcher.watch_id))
        del self._watchers[watcher.watch_id]
        watcher.watch_id = next(self._ids)
        watcher.next_revision = revision
        self._watchers[watcher.watch_id] = watcher
        self._outbox.put_nowait(self._create(watcher))

    def cancel(self, watcher: Watcher) -> None:
        """Stop ``watcher``."""
        if self._watchers.pop(watcher.watch_id, None) is not None:
            self._outbox.put_nowait(self._cancel(watcher.watch_id))

    @staticmethod
    def _create(watcher: Watcher) -> Any:
        request = rpc_pb2.WatchCreateRequest(
            key=watcher.key,
            range_end=watcher.end,
            start_revision=watcher.next_revision,
            watch_id=watcher.watch_id,
            # etcd then says where it is when a watch is idle for its
            # --experimental-watch-progress-notify-interval (10 min by default): a
            # client whose timers stall hears from the network that time passed.
            progress_notify=True,
        )
        return rpc_pb2.WatchRequest(create_request=request)

    @staticmethod
    def _cancel(watch_id: int) -> Any:
        return rpc_pb2.WatchRequest(cancel_request=rpc_pb2.WatchCancelRequest(watch_id=watch_id))

    def _open(self) -> Any:
        return self._client.watch.Watch(metadata=self._client.metadata())

    def _reopened(self) -> None:
        # A new stream: create every watch again from where it was, and have every
        # owner read the state (a watch re-created as its old one was being
        # answered may hand it an event twice).
        self._outbox = asyncio.Queue()
        for watcher in list(self._watchers.values()):
            self._outbox.put_nowait(self._create(watcher))
            watcher.must_reset()

    async def _write(self, call: Any, reader: asyncio.Task[None]) -> None:
        while True:
            getter = asyncio.ensure_future(self._outbox.get())
            try:
                await asyncio.wait({reader, getter}, return_when=asyncio.FIRST_COMPLETED)
            finally:  # (also when the stream is closed meanwhile: no task left behind)
                if not getter.done():
                    getter.cancel()
            if reader.done():
                reader.result()
            await call.write(getter.result())

    async def _read(self, call: Any) -> None:
        while True:
            reply = await call.read()
            if reply is grpc.aio.EOF:
                raise ConnectionError("watch stream ended")
            watcher = self._watchers.get(int(reply.watch_id))
            if watcher is None:
                continue
            if reply.canceled:
                if reply.compact_revision:
                    watcher.must_reset(int(reply.compact_revision))
                else:
                    log.warning("etcd cancelled watch: %s", reply.cancel_reason)
                    watcher.must_reset()
                continue
            if reply.created:
                watcher.created(int(reply.header.revision))
            watcher.push(list(reply.events))
