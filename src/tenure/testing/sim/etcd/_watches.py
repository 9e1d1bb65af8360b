"""The watches of a simulated etcd: who watches what, and what each is told.

etcd's watch server (server/etcdserver/api/v3rpc/watch.go, server/storage/mvcc:
``watcher.go``, ``watchable_store.go``), sans-I/O: requests come in by watch stream
(:meth:`SimWatchTable.request`), answers go out through :meth:`SimWatchTable.drain`,
each ``(stream, WatchResponse)``, in the order etcd would send them on that stream.

* **create**: an empty key is ``b"\\0"``; a ``range_end`` of ``b"\\0"`` watches every
  key from ``key`` on; a range whose end is not after its key is refused ("mvcc:
  watcher range is empty"), and so is a watch id the stream uses already ("mvcc:
  duplicate watch ID provided on the WatchStream"), each answered ``created`` and
  ``canceled`` with ``watch_id`` -1; a start revision below 0 is answered so with
  ErrCompacted. Id 0 asks etcd to choose (the stream's next free one, from 0). The
  answer's header revision is the store's revision then.
* **synced or not**: a watch from revision 0 (now) or from a future revision is
  *synced*: it hears of each write as it is made, one response per write and watch.
  A watch from a revision already passed is *unsynced* until :meth:`sync` (etcd's
  sync loop, every 100 ms: the caller's timer): then it gets every change since its
  start revision in one response (at most :data:`MAX_REVISIONS` revisions of them;
  the rest at the next sync), or, if that revision was compacted, a response
  ``canceled`` with ``compact_revision`` set (and header revision 0, as etcd's), and
  the watch is gone.
* **filters** (NOPUT, NODELETE) and **prev_kv** (the key's version before the event,
  unless compacted away) as etcd's; a response left empty by the filters is not sent.
* **progress**: :meth:`progress_tick` is etcd's progress ticker (every 10 minutes by
  default: the caller's timer): each synced watch that asked for ``progress_notify``
  and heard no event since the last tick gets an empty response at the current
  revision. A WatchProgressRequest is answered (``watch_id`` -1) only when every watch
  of the stream is synced.
* **cancel**: a watch that exists is answered ``canceled``; an unknown id, nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from aetcd.rpc import kv_pb2, rpc_pb2

from tenure.testing.sim.etcd._keyspace import KeyVersion, SimKeyspace

__all__ = ["MAX_REVISIONS", "SimWatchTable"]

#: The most revisions of events one catching-up response carries (etcd's
#: watchBatchMaxRevs).
MAX_REVISIONS: Final = 1000
_INVALID_ID: Final = -1  # clientv3.InvalidWatchID
_NOPUT: Final = rpc_pb2.WatchCreateRequest.NOPUT
_NODELETE: Final = rpc_pb2.WatchCreateRequest.NODELETE


@dataclass(slots=True)
class _WatchState:
    """One watch: its range, the next revision it is to hear of, and its options."""

    watch_id: int
    key: bytes
    end: bytes | None  # None: the key alone; b"": every key from it on
    next_revision: int  # etcd's minRev
    start: int  # the start revision asked for
    synced: bool
    prev_kv: bool
    progress: bool
    filters: frozenset[int]
    quiet: bool = True  # no event since the last progress tick (etcd's sws.progress)

    def covers(self, key: bytes) -> bool:
        """Whether ``key`` is in the watched range."""
        if self.end is None:
            return key == self.key
        return self.key <= key and (not self.end or key < self.end)

    def wants(self, change: KeyVersion) -> bool:
        """Whether ``change`` is an event of this watch."""
        if change.main < self.next_revision or not self.covers(change.key):
            return False
        return (_NODELETE if change.tombstone else _NOPUT) not in self.filters


class SimWatchTable:
    """Every watch of every watch stream (module docstring); ``header(revision)`` makes
    a response header."""

    def __init__(self, keys: SimKeyspace, header: Callable[[int], Any]) -> None:
        self._keys = keys
        self._header = header
        self._streams: dict[int, dict[int, _WatchState]] = {}
        self._next_auto: dict[int, int] = {}
        self._next_stream = 0
        self._outbox: list[tuple[int, Any]] = []

    # -- streams ----------------------------------------------------------------------

    def open_stream(self) -> int:
        """A new watch stream; its number."""
        self._next_stream += 1
        self._streams[self._next_stream] = {}
        self._next_auto[self._next_stream] = 0
        return self._next_stream

    def close_stream(self, stream: int) -> None:
        """The stream ended: its watches with it, and what it had still to send."""
        self._streams.pop(stream, None)
        self._next_auto.pop(stream, None)
        self._outbox = [(s, response) for s, response in self._outbox if s != stream]

    def drain(self) -> list[tuple[int, Any]]:
        """The responses to send, each with its stream, in order."""
        out, self._outbox = self._outbox, []
        return out

    def unsynced(self) -> bool:
        """Whether a watch waits for :meth:`sync`."""
        return any(not w.synced for watches in self._streams.values() for w in watches.values())

    def watch_ids(self, stream: int) -> list[int]:
        """The ids of ``stream``'s watches."""
        return sorted(self._streams.get(stream, {}))

    # -- requests ---------------------------------------------------------------------

    def request(self, stream: int, request: Any) -> None:
        """One WatchRequest received on ``stream``."""
        kind = request.WhichOneof("request_union")
        if stream not in self._streams:
            return
        if kind == "create_request":
            self._create(stream, request.create_request)
        elif kind == "cancel_request":
            watch_id = int(request.cancel_request.watch_id)
            if self._streams[stream].pop(watch_id, None) is not None:
                self._send(stream, watch_id, canceled=True)
        elif kind == "progress_request" and all(
            w.synced and self._keys.revision >= w.start for w in self._streams[stream].values()
        ):
            self._send(stream, _INVALID_ID)

    def _create(self, stream: int, create: Any) -> None:
        key, revision = bytes(create.key) or b"\0", self._keys.revision
        end: bytes | None = bytes(create.range_end) or None
        if end == b"\0":
            end = b""
        watches, start = self._streams[stream], int(create.start_revision)
        error = None
        if start < 0:
            error = "mvcc: required revision has been compacted"
        elif end and key >= end:
            error = "mvcc: watcher range is empty"
        elif create.watch_id and create.watch_id in watches:
            error = "mvcc: duplicate watch ID provided on the WatchStream"
        if error is not None:
            self._send(stream, _INVALID_ID, created=True, canceled=True, cancel_reason=error)
            return
        watch_id = int(create.watch_id)
        if watch_id == 0:  # etcd chooses: the stream's next free id, from 0
            while self._next_auto[stream] in watches:
                self._next_auto[stream] += 1
            watch_id = self._next_auto[stream]
            self._next_auto[stream] += 1
        synced = start == 0 or start > revision
        watches[watch_id] = _WatchState(
            watch_id,
            key,
            end,
            max(revision + 1, start) if synced else start,
            start,
            synced,
            bool(create.prev_kv),
            bool(create.progress_notify),
            frozenset(int(f) for f in create.filters),
        )
        self._send(stream, watch_id, created=True)

    # -- what the watches hear --------------------------------------------------------

    def notify(self, revision: int, changes: list[KeyVersion]) -> None:
        """A write made ``changes`` at ``revision``: every synced watch hears of its own."""
        for stream, watches in self._streams.items():
            for watch in watches.values():
                if not watch.synced:
                    continue
                events = [change for change in changes if watch.wants(change)]
                # (a watch from a future revision keeps waiting for it)
                watch.next_revision = max(watch.next_revision, revision + 1)
                if events:
                    self._events(stream, watch, events, revision)

    def sync(self) -> None:
        """Catch the unsynced watches up (etcd's syncWatchers; module docstring)."""
        revision, compacted = self._keys.revision, self._keys.compacted
        for stream, watches in self._streams.items():
            for watch in [w for w in watches.values() if not w.synced]:
                if watch.next_revision < compacted:
                    del watches[watch.watch_id]
                    self._send(stream, watch.watch_id, 0, canceled=True, compact_revision=compacted)
                    continue
                events = [
                    c for c in self._keys.changes_since(watch.next_revision) if watch.wants(c)
                ]
                revisions = sorted({change.main for change in events})
                if len(revisions) > MAX_REVISIONS:  # the rest at the next sync
                    more = revisions[MAX_REVISIONS]
                    events = [change for change in events if change.main < more]
                    watch.next_revision = more
                else:
                    watch.synced = True
                    watch.next_revision = max(revision + 1, watch.next_revision)
                if events:
                    self._events(stream, watch, events, revision)

    def progress_tick(self, stream: int) -> None:
        """etcd's progress ticker fired for ``stream`` (module docstring)."""
        revision = self._keys.revision
        for watch in self._streams.get(stream, {}).values():
            if watch.progress and watch.quiet and watch.synced and revision >= watch.start:
                self._send(stream, watch.watch_id)
            watch.quiet = True

    # -- responses --------------------------------------------------------------------

    def _events(self, stream: int, watch: _WatchState, changes: list[KeyVersion], at: int) -> None:
        events = []
        for change in changes:
            event = kv_pb2.Event(
                type=kv_pb2.Event.DELETE if change.tombstone else kv_pb2.Event.PUT,
                kv=change.message(),
            )
            created = not change.tombstone and change.create == change.main
            if watch.prev_kv and not created and change.main - 1 >= self._keys.compacted:
                before = self._keys.at(change.key, change.main - 1)
                if before is not None:
                    event.prev_kv.CopyFrom(before.message())
            events.append(event)
        watch.quiet = False
        self._send(stream, watch.watch_id, at, events=events)

    def _send(self, stream: int, watch_id: int, revision: int | None = None, **fields: Any) -> None:
        header = self._header(self._keys.revision if revision is None else revision)
        self._outbox.append(
            (stream, rpc_pb2.WatchResponse(header=header, watch_id=watch_id, **fields))
        )
