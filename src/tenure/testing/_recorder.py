"""A recorder of grants and releases, to assert on what code under test did with locks.

:class:`Recorder` is an observer (:class:`tenure.Observer`): give it to
``tenure.connect(url, observers=[recorder])``, or to :func:`tenure.add_observer` to
hear every client of the process (the ``tenure_recorder`` fixture does, for one
test). It keeps, in one sequence, when each acquire started, when it was granted
or failed, and when each hold ended (released or lost), numbered by a counter of
its own (no clock: the order is what it asserts on).

What it sees is what this process's clients saw. On ``memory://`` (one event loop)
that is the engine's order. Over a network, grants and losses told to different
clients may reach them in another order than the store's.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial

from tenure import MAX_COUNT, Attempt, Lease
from tenure.errors import LostError
from tenure.testing.lincheck import History, check, from_events


@dataclass
class RecordedHold:
    """One hold: its lease's token from its grant until it was released or lost.

    ``granted`` and ``ended`` are the recorder's sequence numbers (``ended`` None
    while held); ``lost`` is the loss error, None if released (or still held).
    """

    node: str
    name: str
    session_id: int
    token: int
    count: int
    kind: str
    granted: int
    ended: int | None = None
    lost: LostError | None = None

    @property
    def exclusive(self) -> bool:
        """Whether it holds every token (a mutex's, a writer's, an election's)."""
        return self.count == MAX_COUNT

    def __str__(self) -> str:
        end = "held" if self.ended is None else f"#{self.ended}"
        how = "" if self.ended is None else (" lost" if self.lost is not None else " released")
        return (
            f"{self.kind} {self.name!r} token {self.token} of session {self.session_id}: "
            f"#{self.granted}..{end}{how}"
        )


@dataclass
class RecordedAcquire:
    """One acquire: when it ``started`` (a sequence number), and how it ended: its
    holds (one per name) once ``granted`` (the sequence number), else its ``error``."""

    node: str
    names: tuple[str, ...]
    session_id: int
    count: int
    kind: str
    timeout: float | None
    started: int
    granted: int | None = None
    failed: int | None = None
    error: BaseException | None = None
    holds: list[RecordedHold] = field(default_factory=list)

    def __str__(self) -> str:
        if self.granted is not None:
            outcome = f"granted #{self.granted}"
        elif self.failed is not None:
            outcome = f"failed #{self.failed} ({type(self.error).__name__})"
        else:
            outcome = "waiting"
        names = ", ".join(map(repr, self.names))
        return f"{self.kind} {names} by session {self.session_id}: #{self.started} {outcome}"


class Recorder:
    """Records acquires, grants and releases (an observer: see the module docstring).

    ``assert_never_overlap()`` and ``assert_fifo()`` check the history; ``acquires``
    and :meth:`holds` are the history itself, for checks of your own. Safe to share
    between threads (the sync face's clients call it from their portal threads).
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._numbers = itertools.count(1)
        #: Every acquire seen, in the order they started.
        self.acquires: list[RecordedAcquire] = []

    def __repr__(self) -> str:
        return f"<Recorder: {len(self.acquires)} acquires>"

    # -- what the client tells (the Observer protocol) ---------------------------------

    def acquire_started(self, attempt: Attempt) -> _Watch:
        """Record an acquire's start; its end is told to the returned watch."""
        with self._guard:
            record = RecordedAcquire(
                attempt.node,
                attempt.names,
                attempt.session_id,
                attempt.count,
                attempt.kind.__name__,
                attempt.timeout,
                next(self._numbers),
            )
            self.acquires.append(record)
        return _Watch(self, record)

    def _granted(self, record: RecordedAcquire, leases: tuple[Lease, ...]) -> None:
        with self._guard:
            record.granted = number = next(self._numbers)
            for lease in leases:
                hold = RecordedHold(
                    record.node,
                    lease.name,
                    record.session_id,
                    lease.token,
                    lease.count,
                    record.kind,
                    number,
                )
                record.holds.append(hold)
        for hold, lease in zip(record.holds, leases, strict=True):
            lease.lost.add_callback(partial(self._ended, hold))

    def _failed(self, record: RecordedAcquire, error: BaseException) -> None:
        with self._guard:
            record.failed, record.error = next(self._numbers), error

    def _ended(self, hold: RecordedHold, reason: LostError | None) -> None:
        with self._guard:
            hold.ended, hold.lost = next(self._numbers), reason

    # -- the history -------------------------------------------------------------------

    def holds(self, name: str | None = None) -> list[RecordedHold]:
        """Every hold granted (of semaphore ``name`` only, if given), in grant order."""
        with self._guard:
            found = [
                hold
                for record in self.acquires
                for hold in record.holds
                if name is None or hold.name == name
            ]
        return sorted(found, key=lambda hold: hold.granted)

    def clear(self) -> None:
        """Forget the history (holds under way are still told, and not kept)."""
        with self._guard:
            self.acquires = []

    def assert_never_overlap(self, *names: str) -> None:
        """No two holds of one semaphore were held at once: one holder at a time.

        Checks each name given, or every name recorded. For mutexes, elections,
        writers and one-token semaphores; readers of a readers-writer lock, group
        members and holds of a semaphore of several tokens may rightly overlap: name
        the semaphores to check when the code under test also uses those.

        Raises:
            AssertionError: naming both holds and when each began and ended.
        """
        by_semaphore: dict[tuple[str, str], list[RecordedHold]] = {}
        for hold in self.holds():
            if not names or hold.name in names:
                by_semaphore.setdefault((hold.node, hold.name), []).append(hold)
        for holds in by_semaphore.values():
            latest: RecordedHold | None = None  # of those granted so far, the last to end
            for hold in holds:
                if latest is not None and (latest.ended is None or latest.ended > hold.granted):
                    raise AssertionError(
                        f"two holds of {hold.name!r} (node {hold.node!r}) at once: {latest} "
                        f"still held when {hold} was granted"
                    )
                if latest is None or _ends_later(hold, latest):
                    latest = hold

    def assert_fifo(self, *names: str) -> None:
        """Grants came in the order the acquires started: no acquire of a semaphore was
        granted before one that started earlier and was granted too.

        Checks each name given, or every name recorded. An acquire that failed (its
        timeout, a cancellation) is left out: it constrains no one. Acquires started
        by different clients count as started in the order this process saw, which
        is the store's order on ``memory://``.

        Raises:
            AssertionError: naming the acquire that was overtaken and the one that did.
        """
        by_semaphore: dict[tuple[str, str], list[RecordedAcquire]] = {}
        with self._guard:
            for record in self.acquires:
                if record.granted is None:
                    continue
                for name in record.names:
                    if not names or name in names:
                        by_semaphore.setdefault((record.node, name), []).append(record)
        for (node, name), records in by_semaphore.items():
            latest: RecordedAcquire | None = None  # of those started so far, the last granted
            for record in records:  # (in the order they started)
                assert record.granted is not None
                if latest is not None and record.granted < (latest.granted or 0):
                    raise AssertionError(
                        f"{name!r} (node {node!r}) was not granted first come, first "
                        f"served: {record} overtook {latest}, which started earlier"
                    )
                latest = record

    def linearizable_history(self, *names: str) -> History:
        """What the recorder saw as a :mod:`tenure.testing.lincheck` history of the
        ``semaphore`` model, a key ``NODE/NAME`` per semaphore (each name given, or
        every name recorded), timed by the recorder's sequence numbers.

        Each granted hold is an ``acquire`` from the acquire's start to its grant (its
        count, its token); a release a ``release`` at the instant it was told; a loss a
        ``lost`` from the grant to the telling (the store ended it in between). Failed
        and pending acquires constrain nothing and are left out.
        """
        events: list[tuple[int, dict[str, object]]] = []
        with self._guard:
            records = list(self.acquires)
        for index, record in enumerate(records):
            for part, hold in enumerate(record.holds):
                if names and hold.name not in names:
                    continue
                key, process = f"{hold.node}/{hold.name}", f"{index}.{part}"
                assert record.granted is not None  # (it has holds)
                acquired = {"process": process, "f": "acquire", "key": key}
                events.append((0, {**acquired, "type": "invoke", "value": hold.count}))
                events[-1][1]["time"] = record.started
                events.append((0, {**acquired, "type": "ok", "value": hold.token}))
                events[-1][1]["time"] = record.granted
                if hold.ended is None:
                    continue
                how = "release" if hold.lost is None else "lost"
                ended = {"process": process, "f": how, "key": key, "value": hold.token}
                told_from = hold.ended if hold.lost is None else record.granted + 0.5
                events.append((0, {**ended, "type": "invoke", "time": told_from}))
                events.append((0, {**ended, "type": "ok", "time": hold.ended}))
        events.sort(key=lambda item: float(str(item[1]["time"])))
        numbered = [(number, event) for number, (_, event) in enumerate(events, start=1)]
        return from_events(numbered, "<recorder>")

    def assert_linearizable(
        self, *names: str, limits: Mapping[str, int] | None = None, timeout: float = 30.0
    ) -> None:
        """What the code under test did with its semaphores is linearizable: no more
        tokens held than a semaphore's limit at any instant, each release and loss of
        a hold that was held, tokens strictly increasing in grant order
        (:meth:`linearizable_history`, checked by :mod:`tenure.testing.lincheck`).

        Checks each name given, or every name recorded. ``limits`` maps a semaphore's
        name to its limit (a mutex, a writer or an election takes every token: theirs
        need none); a semaphore not in it is held to ``tenure.MAX_COUNT``. As for
        :meth:`assert_never_overlap`, what is checked is what this process saw: exact
        on ``memory://``; over a network, grants and ends told to different clients
        may arrive in another order than the store's.

        Raises:
            AssertionError: with lincheck's witness (the semaphore, the longest
                linearizable prefix, the operation that could not follow it).
        """
        history = self.linearizable_history(*names)
        given = limits or {}
        per_key = {
            key: given.get(str(key).split("/", 1)[1], MAX_COUNT) for key in history.key_names()
        }
        result = check(history, "semaphore", timeout=timeout, header={"limit": per_key})
        if not result.ok:
            raise AssertionError("what the recorder saw is not linearizable\n" + result.explain())


class _Watch:
    """One acquire's end, told to its recorder."""

    __slots__ = ("_record", "_recorder")

    def __init__(self, recorder: Recorder, record: RecordedAcquire) -> None:
        self._recorder = recorder
        self._record = record

    def granted(self, leases: tuple[Lease, ...]) -> None:
        """The acquire was granted ``leases``."""
        self._recorder._granted(self._record, leases)

    def failed(self, error: BaseException) -> None:
        """The acquire failed with ``error``."""
        self._recorder._failed(self._record, error)


def _ends_later(hold: RecordedHold, than: RecordedHold) -> bool:
    """Whether ``hold`` ends after ``than`` (a hold still held ends last)."""
    if hold.ended is None:
        return True
    return than.ended is not None and hold.ended > than.ended
