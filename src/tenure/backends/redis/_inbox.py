"""One client's inbox of one node's pushes, and the timer of the node's deadlines.

**Inbox.** The functions push what a client must hear (a grant of a queued request,
a failed request, a lost grant, a session's end, a watched change) to a Stream
per (client, node), ``<base>in:<client id>``, with ``XADD``. The client reads it with
``XREAD BLOCK`` on a connection of its own, from the last id it read: after a lost
connection the read starts again there, so nothing pushed meanwhile is lost
(Pub/Sub and keyspace notifications would drop it). Each entry carries the
inbox's sequence number ``n``; a gap (entries trimmed while the client was away,
or lost by a server restart) makes every session of the inbox read its state back
(:meth:`RedisStore.missed_pushes`). The client trims what it has read.

**Deadlines.** Every reply says when the node's next deadline (a session's expiry,
a request's timeout, a lease's end, a lock-delay's end) is due, by Redis's clock;
an inbox whose sessions wait for something (a queued request, a lease, a watch)
keeps a timer for it and calls ``tick`` then, which expires what Redis's clock
says is due and pushes the news. Nobody polls: a client with nothing to wait for
arms no timer, and every call expires what is due before it acts anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Sequence
from typing import Any, Final, Protocol

from redis import exceptions as rexc

from tenure.backends.redis._conn import RETRY_MAX, RETRY_MIN, FunctionReply, RedisFunctions
from tenure.backends.redis._pipe import RedisPipe
from tenure.errors import TenureError

__all__ = ["NodeInbox", "Recipient"]

log = logging.getLogger("tenure.redis")

#: How long one XREAD blocks (ms) before it is sent again; entries read per XREAD.
BLOCK_MS: Final = 10_000
READ_COUNT: Final = 512
#: Entries read between two trims of the inbox.
TRIM_EVERY: Final = 256
#: How long closing waits for the reader to stop (seconds).
CLOSE_WAIT: Final = 2.0
#: Added to a deadline's local time, so a tick finds it due on Redis's clock.
TICK_MARGIN: Final = 0.002


class Recipient(Protocol):
    """A session whose pushes the inbox hands on."""

    def hear(self, push: dict[str, bytes]) -> None:
        """One push for the session."""

    def missed_pushes(self) -> None:
        """Pushes may have been missed (a gap): read the state back."""

    def waits_for_deadlines(self) -> bool:
        """Whether the session waits for a deadline of the node to pass."""


class NodeInbox:
    """See the module docstring."""

    def __init__(self, conn: RedisFunctions, base: str, client_id: str) -> None:
        self.conn = conn
        self.base = base
        self.inbox = client_id
        self.inbox_key = f"{base}in:{client_id}"
        self.sessions: dict[int, Recipient] = {}
        self._last_id = b"0-0"
        self._seen = 0  # the last sequence number read
        self._untrimmed = 0
        self._reader: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")
        self._ticking: asyncio.Task[None] | None = None
        self._loop = asyncio.get_running_loop()
        # The reader's connection of its own (a blocked XREAD holds it): its answer
        # may take BLOCK_MS, plus the usual wait.
        timeout = BLOCK_MS / 1000 + conn.options.request_timeout
        self._stream = RedisPipe(dataclasses.replace(conn.options, request_timeout=timeout))
        self._closing = False

    def start(self) -> None:
        """Start reading the inbox (once)."""
        if self._reader is None:
            self._reader = asyncio.create_task(self._read())

    # -- the inbox -------------------------------------------------------------------

    async def _read(self) -> None:
        pause = RETRY_MIN
        # Not ``while True``: a cancel that races a failed read (closing fails the
        # read's call) must not leave the loop reading again forever.
        while not self._closing:
            try:
                answer = await self._stream.exchange(
                    "XREAD",
                    "COUNT",
                    READ_COUNT,
                    "BLOCK",
                    BLOCK_MS,
                    "STREAMS",
                    self.inbox_key,
                    self._last_id,
                )
            except (rexc.RedisError, OSError) as error:
                if self._closing:
                    return
                log.info("inbox %s: read failed (%s); reading again", self.inbox_key, error)
                await asyncio.sleep(pause)
                pause = min(pause * 2, RETRY_MAX)
                continue
            pause = RETRY_MIN
            # RESP3 answers a map of streams, RESP2 a list of pairs.
            streams = answer.items() if isinstance(answer, dict) else answer or ()
            for _, entries in streams:
                for entry_id, flat in entries:
                    self._last_id = entry_id
                    try:
                        self._take(dict(zip(flat[::2], flat[1::2], strict=True)))
                    except Exception:  # one bad entry must not stop the inbox
                        log.exception("inbox %s: entry %r not understood", self.inbox_key, entry_id)
                self._untrimmed += len(entries)
            if self._untrimmed >= TRIM_EVERY and not self._closing:
                self._untrimmed = 0
                with contextlib.suppress(rexc.RedisError, OSError):
                    await self.conn.calls.exchange("XTRIM", self.inbox_key, "MINID", self._last_id)

    def take_inline(self, pushes: Sequence[Sequence[bytes]]) -> None:
        """What a call pushed to this inbox, carried by its reply: taken now if next in
        sequence (the inbox read skips it later), else left to the inbox read."""
        for flat in pushes:
            fields = dict(zip(flat[::2], flat[1::2], strict=True))
            if int(fields[b"n"]) != self._seen + 1:
                return
            self._take(fields)

    def renumbered(self) -> None:
        """The server made this inbox anew: its entries count from 1 again."""
        self._seen = 0

    def _take(self, fields: dict[bytes, bytes]) -> None:
        n = int(fields[b"n"])
        if n <= self._seen:
            return  # taken already, from the reply of the call that pushed it
        gap = n != self._seen + 1
        if gap:
            log.info(
                "inbox %s: pushes missed (%d after %d): reading state back",
                self.inbox_key,
                n,
                self._seen,
            )
        self._seen = n
        if gap:
            for store in list(self.sessions.values()):
                store.missed_pushes()
        target = self.sessions.get(int(fields[b"sid"]))
        if target is not None:
            target.hear({k.decode(): v for k, v in fields.items()})

    # -- deadlines -------------------------------------------------------------------

    def heard(self, reply: FunctionReply, session: Recipient | None = None) -> None:
        """A reply (to ``session``'s call, or a tick) told when the node's next deadline
        is due: arm the timer if the session (a tick: any session) waits for one."""
        if reply.next_due is not None:
            self.due_at(reply.next_due, session)

    def due_at(self, due: float, session: Recipient | None = None) -> None:
        """A deadline of the node is due at ``due`` (Redis's clock): arm the timer if
        ``session`` (None: any session of the inbox) waits for one."""
        at = self.conn.local_time(due) + TICK_MARGIN
        if at >= self._timer_at:
            return
        if session is not None:
            if not session.waits_for_deadlines():
                return
        elif not any(s.waits_for_deadlines() for s in self.sessions.values()):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = self._loop.call_at(at, self._fire)

    def _fire(self) -> None:
        self._timer, self._timer_at = None, float("inf")
        if self._ticking is None or self._ticking.done():
            self._ticking = asyncio.ensure_future(self._tick())

    async def _tick(self) -> None:
        try:
            reply = await self.conn.retrying(None, "tick", self.base)
        except TenureError as error:
            log.info("node %s: tick failed: %s", self.base, error)
            if self._timer is None and not self.conn.closed:  # try again shortly
                self._timer_at = self._loop.time() + RETRY_MAX
                self._timer = self._loop.call_at(self._timer_at, self._fire)
            return
        self.heard(reply)

    # -- the end ---------------------------------------------------------------------

    async def close(self, *, delete_inbox: bool) -> None:
        """Stop reading and ticking (and delete the inbox: nobody reads it any more)."""
        self._closing = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        tasks = [task for task in (self._reader, self._ticking) if task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=CLOSE_WAIT)
        await self._stream.close()  # a blocked XREAD's connection: its answer is not read
        if delete_inbox:
            with contextlib.suppress(rexc.RedisError, OSError):
                await self.conn.client.delete(self.inbox_key)
                await self.conn.client.hdel(f"{self.base}inseq", self.inbox)
                # Kept as an orphan if its last session expired (lua/20_sessions.lua).
                await self.conn.client.zrem(f"{self.base}orph", self.inbox)

    def describe(self) -> dict[str, Any]:
        """For logs and tests: where the inbox is read and what was seen."""
        return {"inbox": self.inbox_key, "last_id": self._last_id, "seen": self._seen}
