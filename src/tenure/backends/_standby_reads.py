"""Reads from a cluster's standbys: a ``tenure://`` client's reads that allow some
staleness (``max_staleness``: docs/cluster.md, "Reads from standbys").

A client of a cluster given ``max_staleness`` sends its reads (a node's description,
the listings, who blocks a name, the most contended names, a session's describe of a
semaphore) to the standbys, in turn, each over a connection of its own that a
standby's Welcome does not turn away; the leader keeps the sessions, the acquires
and every change. The standbys are the doors of the URL that do not lead, and the
members the cluster names standbys (ClusterStatus, their advertised addresses: a URL
may list one door, or a load balancer), asked once when the reads are first used and
again when every standby known failed (at most once per :data:`SHUN_SECONDS`). A lone
server (its Welcome names no role) has none: the reads are its own.
The standby answers from its own state once it has confirmed it fresh enough
(protocol version 11, :mod:`tenure.server._net.stale_reads`); two rules keep what
the client reads from going back in time:

* **Read your writes.** Each read allows at most the seconds since the client last
  heard from the leader (:attr:`Link.heard_at`: an answer or a push), and never more
  than ``max_staleness``. What the leader told the client was committed by the time
  it was heard, and the standby's state is then known to hold everything committed
  that many seconds before the read reached it: so it holds what the client wrote
  and was told. (Both ends measure on their own monotonic clock; no clock is read
  against another.)
* **Never older than read.** Each read asks for at least the log entry the newest
  standby answer held (``min_index``), whichever standby answers.

A standby that cannot answer (unreachable, not confirmed within its
``--stale-read-wait``, no longer a standby, or of an older protocol version) is left
alone for :data:`SHUN_SECONDS` and the next is asked; with none left, the leader
answers, as it answers every read without ``max_staleness``.

**Watches** (protocol version 13, :data:`STANDBY_WATCH_VERSION`): a session's watch
that allows staleness is armed the same way, on a standby of that version (one of
an older version is passed over, not left alone: its reads are still good), else on
the leader (:meth:`StandbyReads.arm`). Its firings come on that standby's
connection, and go to the session's watches by session (:class:`StandbyWatcher`,
with the standby's address: watch ids are each member's own); a standby connection
lost, or left alone, is told to every session's watches, which arm again what it
took. :class:`StandbyArms` is one session's side of it.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Final, Protocol, TypeVar

from tenure._core import CancelWatch, Command, Effect, WatchFired
from tenure._protocol import Reply, Welcome
from tenure._protocol.cluster import ClusterStatus
from tenure._protocol.messages import LEADER
from tenure.backends._link import Door, Link, LinkOptions
from tenure.errors import PermissionDeniedError, TenureError, UnavailableError, UnsupportedError

__all__ = [
    "SHUN_SECONDS",
    "STALE_READ_VERSION",
    "STANDBY_WATCH_VERSION",
    "StandbyArms",
    "StandbyReads",
    "StandbyWatcher",
]

log = logging.getLogger("tenure.client")

R = TypeVar("R")

#: How long a door that could not answer a read is left alone, in seconds.
SHUN_SECONDS: Final = 5.0
#: The protocol version of reads from standbys (Request's ``max_staleness``).
STALE_READ_VERSION: Final = 11
#: The protocol version of watches on standbys.
STANDBY_WATCH_VERSION: Final = 13


class StandbyWatcher(Protocol):
    """What a session's watches are told of those armed on standbys."""

    def fired_from(self, source: str, effect: WatchFired) -> None:
        """A firing of a watch armed on the standby at ``source`` (its address)."""

    def source_lost(self, source: str) -> None:
        """The connection to ``source`` was lost: the watches armed there are gone."""


class _ReadHome:
    """The home of a standby's read connection: no session lives on it; the firings
    of the watches armed there go to their sessions' (:class:`StandbyWatcher`)."""

    def __init__(self, reads: StandbyReads, door: str) -> None:
        self._reads = reads
        self._door = door

    def push(self, effect: Effect) -> None:
        """A firing of a watch armed here: to its session's watches."""
        if type(effect) is WatchFired:
            watcher = self._reads.watchers.get(effect.session_id)
            if watcher is not None:
                watcher.fired_from(self._door, effect)

    async def connected(self, welcome: Welcome) -> None:
        """Nothing to set up."""

    def disconnected(self) -> None:
        """The watches armed here are gone."""
        self._reads.lost(self._door)


class StandbyReads:
    """A service's reads that allow staleness, spread over its standbys (module
    docstring); ``doors``: the URL's; ``leader``: the service's own link, which answers
    the rest."""

    def __init__(self, doors: Sequence[Door], options: LinkOptions, leader: Link) -> None:
        self.doors = list(doors)
        #: The standbys the cluster named (ClusterStatus), asked besides :attr:`doors`.
        self.learnt: list[Door] = []
        self.options = replace(options, accept_standby=True)
        self.leader = leader
        #: The newest log entry a standby's answer held (the next read's ``min_index``).
        self.min_index = 0
        #: How many reads each door answered (by its address), the leader's under "".
        self.answered: dict[str, int] = {}
        self._links: dict[str, Link] = {}
        self._opening: dict[str, asyncio.Future[Link]] = {}  # door -> its link being opened
        self._shunned: dict[str, float] = {}  # door -> loop time until which it is not asked
        self._turn = 0
        self._asked_at = -math.inf  # loop time the cluster was last asked its members
        self._learning: asyncio.Future[None] | None = None
        #: The watches of each session that armed one here, by session id.
        self.watchers: dict[int, StandbyWatcher] = {}
        self._cancels: set[asyncio.Future[Reply]] = set()  # CancelWatch answers awaited

    async def read(
        self, command: Command[R], max_staleness: float, leader: Callable[[], Awaitable[R]]
    ) -> R:
        """``command``'s answer from a standby, at most ``max_staleness`` seconds stale
        and never older than what the client was told or read; else ``leader()``'s (the
        read as the service's link sends it, again after a lost connection)."""
        welcome = self.leader.welcome
        if welcome is not None and not welcome.role:
            return await self.from_leader(leader)  # (a lone server: no standby)
        if self._asked_at == -math.inf:
            await self.learn()
        found = await self._answered(command, max_staleness, STALE_READ_VERSION)
        if found is None:
            return await self.from_leader(leader)
        return found[0].value  # type: ignore[return-value]

    async def arm(
        self, command: Command[R], max_staleness: float, session_id: int, watcher: StandbyWatcher
    ) -> tuple[R, str] | None:
        """``command`` (a watch of session ``session_id``'s) armed on a standby of
        :data:`STANDBY_WATCH_VERSION`, as a read is answered: its answer, and the
        standby's address, whose connection brings its firings to ``watcher``; None:
        no standby armed it (arm it on the leader)."""
        welcome = self.leader.welcome
        if welcome is not None and not welcome.role:
            return None  # (a lone server: no standby)
        if self._asked_at == -math.inf:
            await self.learn()
        self.watchers[session_id] = watcher
        found = await self._answered(command, max_staleness, STANDBY_WATCH_VERSION)
        if found is None:
            return None
        reply, door = found
        return reply.value, door  # type: ignore[return-value]

    def cancel(self, source: str, command: CancelWatch) -> None:
        """Disarm a watch armed on the standby at ``source`` (sent if it is connected:
        a lost connection took its watches with it); its answer is not awaited."""
        link = self._links.get(source)
        if link is None or not link.connected:
            return
        fields = {"max_staleness": 0.0}
        answer = asyncio.ensure_future(link.request_whole(command, fields))
        self._cancels.add(answer)
        answer.add_done_callback(self._cancelled)

    def _cancelled(self, answer: asyncio.Future[Reply]) -> None:
        self._cancels.discard(answer)
        if not answer.cancelled():
            answer.exception()  # (retrieved: a lost answer changes nothing here)

    def lost(self, door: str) -> None:
        """The connection to ``door`` was lost, or left alone: every session's
        watches armed there are gone."""
        for watcher in list(self.watchers.values()):
            watcher.source_lost(door)

    async def _answered(
        self, command: Command[R], max_staleness: float, version: int
    ) -> tuple[Reply, str] | None:
        """``command``'s whole Reply from a standby of ``version`` or newer, and the
        standby's address; the cluster asked its members again first when every
        standby known failed; None: none answered."""
        found = await self._from_standbys(command, max_staleness, version)
        loop = asyncio.get_running_loop()
        if found is None and loop.time() >= self._asked_at + SHUN_SECONDS:
            await self.learn()  # (every standby known failed: the cluster may have others)
            found = await self._from_standbys(command, max_staleness, version)
        return found

    async def from_leader(self, leader: Callable[[], Awaitable[R]]) -> R:
        """``leader()``'s answer, counted as the leader's (under "" in :attr:`answered`)."""
        self._count("")
        return await leader()

    async def _from_standbys(
        self, command: Command[R], max_staleness: float, version: int
    ) -> tuple[Reply, str] | None:
        """``command``'s whole Reply from the first standby of ``version`` or newer that
        answers it, and its address (None: none)."""
        loop = asyncio.get_running_loop()
        for door in self._candidates(loop.time()):
            now = loop.time()
            allowed = max(0.0, min(max_staleness, now - self.leader.heard_at))
            link: Link | None = None
            try:
                link = await self._link(door)
                if _leads(link):  # (the leader's reads are the caller's fallback's)
                    raise UnavailableError(f"{door} leads now")
                reply = await _indexed(link, command, allowed, self.min_index, now, version)
            except PermissionDeniedError as error:
                if link is None or not _leads(link):
                    self._count(str(door))  # (answered too: the command's own error)
                    raise
                # It took the lead as the read went (its read connection followed it): a
                # read naming a session is refused on a leader's connection that does
                # not own it. Asked elsewhere, as any member that no longer stands by.
                self._shun(door, loop.time(), error)
                continue
            except UnsupportedError as error:
                if version == STALE_READ_VERSION:  # (too old for a watch: good for reads)
                    self._shun(door, loop.time(), error)
                continue
            except UnavailableError as error:
                self._shun(door, loop.time(), error)
                continue
            except TenureError:
                self._count(str(door))  # (answered too: the command's own error)
                raise
            self.min_index = max(self.min_index, reply.index)
            self._count(str(door))
            return reply, str(door)
        return None

    def _count(self, door: str) -> None:
        """One more read answered by ``door`` ("": the leader)."""
        self.answered[door] = self.answered.get(door, 0) + 1

    async def learn(self) -> None:
        """Ask the cluster which members stand by (one asking at a time): their
        advertised addresses join the doors asked (:attr:`learnt`)."""
        if self._learning is None:
            self._learning = asyncio.ensure_future(self._learn())
        learning = self._learning
        try:
            await asyncio.shield(learning)  # (a cancelled read leaves it to the others)
        finally:
            if learning.done() and self._learning is learning:
                self._learning = None

    async def _learn(self) -> None:
        loop = asyncio.get_running_loop()
        self._asked_at = loop.time()
        try:
            view = await self.leader.call(
                ClusterStatus(), wait_until=loop.time() + self.options.connect_timeout
            )
        except TenureError as error:  # (no read access, an old server, none reachable)
            log.info("reads from standbys: the cluster's members are unknown (%s)", error)
            return
        learnt: list[Door] = []
        for member in view.members:
            door = self.leader.doors.endpoint_of(member.address)
            if member.role == "standby" and door is not None and door not in learnt:
                learnt.append(door)
        self.learnt = learnt

    def _candidates(self, now: float) -> list[Door]:
        """The doors to ask, in turn from the next one: the URL's and the standbys
        learnt, not the leader's, not shunned."""
        leading = str(self.leader.endpoint) if self.leader.connected else ""
        listed = {str(door) for door in self.doors}
        known = [*self.doors, *(door for door in self.learnt if str(door) not in listed)]
        doors = [
            door
            for door in known
            if str(door) != leading and self._shunned.get(str(door), -math.inf) <= now
        ]
        if not doors:
            return doors
        start, self._turn = self._turn % len(doors), self._turn + 1
        return doors[start:] + doors[:start]

    async def _link(self, door: Door) -> Link:
        """The read connection to ``door``: opened the first time (once, however many
        reads ask at once), or again once it was dropped.

        Raises:
            UnavailableError: it could not be opened (the door is then left alone).
        """
        address = str(door)
        link = self._links.get(address)
        if link is not None:
            return link
        opening = self._opening.get(address)
        if opening is None:
            opening = self._opening[address] = asyncio.ensure_future(self._open(door))
            opening.add_done_callback(lambda _: self._opening.pop(address, None))
        return await asyncio.shield(opening)  # (a cancelled read leaves it to the others)

    async def _open(self, door: Door) -> Link:
        link = Link(door, self.options, _ReadHome(self, str(door)))
        await link.open()
        self._links[str(door)] = link
        return link

    def _shun(self, door: Door, now: float, error: BaseException) -> None:
        """Leave ``door`` alone for :data:`SHUN_SECONDS` (its connection dropped: it is
        opened again when next asked)."""
        self._shunned[str(door)] = now + SHUN_SECONDS
        log.info("reads from %s: %s; asking another member for %gs", door, error, SHUN_SECONDS)
        link = self._links.pop(str(door), None)
        if link is not None:
            task = asyncio.get_running_loop().create_task(link.aclose())
            task.add_done_callback(_retrieved)
            self.lost(str(door))

    async def aclose(self) -> None:
        """Close every read connection (and stop asking the cluster its members)."""
        if self._learning is not None:
            self._learning.cancel()
        links, self._links = list(self._links.values()), {}
        for link in links:
            await link.aclose()


async def _indexed(
    link: Link,
    command: Command[R],
    max_staleness: float,
    min_index: int,
    now: float,
    needed: int = STALE_READ_VERSION,
) -> Reply:
    """``command`` sent to ``link``'s server as a read (or a watch) a standby may answer
    (once a connection is ready, within the connect timeout of ``now``): its whole Reply.

    Raises:
        UnsupportedError: the server speaks a version older than ``needed``
            (:data:`STALE_READ_VERSION`: it would answer as a leader, or refuse).
        UnavailableError: no connection, or the standby could not answer.
    """
    await link.wait_ready(now + link.options.connect_timeout)
    version = link.welcome.version if link.welcome is not None else 0
    if version < needed:
        what = "reads from" if needed == STALE_READ_VERSION else "watches on"
        raise UnsupportedError(
            f"{link.endpoint} speaks protocol version {version}, which has no {what} "
            f"standbys (version {needed})"
        )
    fields = {"max_staleness": max_staleness, "min_index": min_index}
    return await link.request_whole(command, fields)


def _retrieved(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()


class StandbyArms:
    """One session's watches armed on its service's standbys (module docstring):
    ``reads()``, the service's (or its node's cell's) :class:`StandbyReads`, None for
    none; ``fresh_only()``, whether a watch must be armed on the leader now (a release
    of the session's is unanswered: a standby could describe it still held)."""

    def __init__(
        self,
        reads: Callable[[], StandbyReads | None],
        fresh_only: Callable[[], bool],
        session_id: int,
        watcher: StandbyWatcher,
    ) -> None:
        self._reads = reads
        self._fresh_only = fresh_only
        self._session_id = session_id
        self._watcher = watcher
        self._used: list[StandbyReads] = []  # where it registered its watcher

    async def arm(self, command: Command[R], max_staleness: float) -> tuple[R, str] | None:
        """See :meth:`StandbyReads.arm` (None also while only the leader may arm it)."""
        reads = self._reads()
        if reads is None or self._fresh_only():
            return None
        if reads not in self._used:
            self._used.append(reads)
        return await reads.arm(command, max_staleness, self._session_id, self._watcher)

    def cancel(self, source: str, watch_id: int) -> None:
        """Disarm the watch ``watch_id`` armed on the standby at ``source``."""
        for reads in self._used:
            reads.cancel(source, CancelWatch(self._session_id, watch_id))

    def close(self) -> None:
        """The session ended: its watches hear no more firings."""
        for reads in self._used:
            if reads.watchers.get(self._session_id) is self._watcher:
                del reads.watchers[self._session_id]
        self._used.clear()


def _leads(link: Link) -> bool:
    """Whether ``link``'s member leads now, as its last Welcome said (a standby's read
    connection follows its member when it takes the lead)."""
    welcome = link.welcome
    return welcome is not None and welcome.role == LEADER
