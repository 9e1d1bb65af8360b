"""A key's record: what each of limits' strategies keeps of one key, and its rules.

The storage keeps one record per key, in the data of the key's semaphore, in ASCII
(``tenure describe`` shows it):

* ``limits fixed COUNT EXPIRES``: a fixed window, its hits and its end (UNIX
  seconds). The first hit starts it, for ``expiry`` seconds; a hit after its end
  starts the next (limits' rule: its Redis storage's INCR and EXPIRE).
* ``limits moving MS[*N] MS[*N]...``: a moving window, the log of hits newest first
  (when each went, UNIX milliseconds; ``*N``: N hits of one call). A hit of
  ``amount`` goes only if the ``(limit - amount + 1)``-th newest hit is older than
  ``expiry``; the log keeps the newest ``limit`` hits of the last ``expiry`` seconds
  (limits' rule: its Redis storage's list, its ``lindex`` and ``ltrim``).
* ``limits sliding START PREVIOUS CURRENT``: a sliding window counter, the hits of
  the bucket that began at START (UNIX seconds) and of the one before it. A bucket
  lasts ``expiry`` seconds and is counted for two: ``expiry`` after START the
  current bucket becomes the previous one, weighted by the time it has left
  (limits' rule, buckets started by the first hit, as its Redis and MongoDB storages
  start them).

Every rule here is a pure function of a record and ``now`` (UNIX seconds of the
storage's clock). A change returns a :class:`Step`: the record to write, what the
call answers, and until when the record matters (after that it reads as no record,
and the storage lets its semaphore go).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Generic, TypeAlias, TypeVar

from tenure.errors import PreconditionFailedError

T = TypeVar("T")

#: What every record's data starts with: any other data is not a record of ours.
MAGIC = b"limits "


@dataclass(frozen=True, slots=True)
class Fixed:
    """A fixed window: ``count`` hits, ending at ``expires`` (UNIX seconds)."""

    count: int
    expires: float


@dataclass(frozen=True, slots=True)
class Moving:
    """A moving window's log: ``(milliseconds, hits)`` pairs, newest first."""

    entries: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class Sliding:
    """A sliding window counter: the bucket begun at ``start``, and the one before it."""

    start: float
    previous: int
    current: int


#: A key's record; None: no record (never hit, cleared, or over).
Record: TypeAlias = Fixed | Moving | Sliding | None


@dataclass(frozen=True, slots=True)
class Step(Generic[T]):
    """A change worked out: the record to keep, the answer, and until when it matters."""

    record: Record
    answer: T
    until: float


def _seconds(value: float) -> bytes:
    return f"{value:.6f}".encode()


def encode(record: Record) -> bytes:
    """The data that keeps ``record`` (None: empty data)."""
    if record is None:
        return b""
    if isinstance(record, Fixed):
        return b"limits fixed %d %s" % (record.count, _seconds(record.expires))
    if isinstance(record, Sliding):
        return b"limits sliding %s %d %d" % (
            _seconds(record.start),
            record.previous,
            record.current,
        )
    hits = [b"%d" % ms if n == 1 else b"%d*%d" % (ms, n) for ms, n in record.entries]
    return b" ".join([b"limits moving", *hits])


def parse(name: str, data: bytes) -> Record:
    """The record ``data`` keeps (empty: None).

    Raises:
        PreconditionFailedError: the semaphore ``name`` holds data that is no record.
    """
    if data == b"":
        return None
    try:
        words = data.decode("ascii").split(" ")
        if data.startswith(MAGIC) and len(words) >= 2:
            kind, fields = words[1], words[2:]
            if kind == "fixed" and len(fields) == 2:
                return Fixed(_count(fields[0]), _time(fields[1]))
            if kind == "sliding" and len(fields) == 3:
                return Sliding(_time(fields[0]), _count(fields[1]), _count(fields[2]))
            if kind == "moving":
                return Moving(tuple(_entry(field) for field in fields))
    except (UnicodeDecodeError, ValueError):
        pass
    raise PreconditionFailedError(
        f"semaphore {name!r} holds data that is not a limits record: {data[:60]!r}"
    )


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def _time(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def _entry(text: str) -> tuple[int, int]:
    ms, _, hits = text.partition("*")
    count = _count(hits) if hits else 1
    if count == 0:
        raise ValueError(text)
    return int(ms), count


# -- fixed window ---------------------------------------------------------------------


def fixed_hit(record: Record, now: float, expiry: float, amount: int) -> Step[int]:
    """``incr``: add ``amount`` hits to the window running now (a new one if none
    runs, or if it has no hit: limits starts the window when the count leaves 0);
    the window's count after it."""
    if isinstance(record, Fixed) and now < record.expires and record.count > 0:
        window = Fixed(record.count + amount, record.expires)
    else:
        window = Fixed(amount, now + expiry)
    return Step(window, window.count, window.expires)


def fixed_count(record: Record, now: float) -> int:
    """``get``: the hits of the fixed window running now (0 if none runs)."""
    return record.count if isinstance(record, Fixed) and now < record.expires else 0


def fixed_end(record: Record, now: float) -> float:
    """``get_expiry``: when the fixed window running now ends (``now`` if none runs)."""
    return record.expires if isinstance(record, Fixed) and now < record.expires else now


# -- moving window --------------------------------------------------------------------


def _milliseconds(seconds: float) -> int:
    return math.floor(seconds * 1000)


def _log(record: Record) -> tuple[tuple[int, int], ...]:
    return record.entries if isinstance(record, Moving) else ()


def _nth_newest(entries: tuple[tuple[int, int], ...], index: int) -> int | None:
    """When the ``index``-th newest hit (0: the newest) went; None if there are fewer."""
    for ms, hits in entries:
        if index < hits:
            return ms
        index -= hits
    return None


def _newest(entries: tuple[tuple[int, int], ...], limit: int, since: int) -> list[list[int]]:
    """The newest ``limit`` hits at ``since`` or later, newest first."""
    kept: list[list[int]] = []
    room = limit
    for ms, hits in entries:
        if room == 0:
            break
        if ms >= since:
            take = min(hits, room)
            kept.append([ms, take])
            room -= take
    return kept


def moving_hit(record: Record, now: float, limit: int, expiry: float, amount: int) -> Step[bool]:
    """``acquire_entry``: log ``amount`` hits now if the window has room for them."""
    entries = _log(record)
    now_ms, expiry_ms = _milliseconds(now), math.ceil(expiry * 1000)
    since = now_ms - expiry_ms
    until = moving_end(record, expiry)
    if amount > limit:
        return Step(record, False, until)
    blocking = _nth_newest(entries, limit - amount)
    if blocking is not None and blocking >= since:
        return Step(record, False, until)
    kept = _newest(((now_ms, amount), *entries) if amount else entries, limit, since)
    if len(kept) > 1 and kept[0][0] == kept[1][0]:  # one more call in the same millisecond
        kept[1][1] += kept.pop(0)[1]
    log = Moving(tuple((ms, hits) for ms, hits in kept))
    return Step(log, True, moving_end(log, expiry))


def moving_window(record: Record, now: float, limit: int, expiry: float) -> tuple[float, int]:
    """``get_moving_window``: when the oldest hit of the window went, and how many
    hits it has, among the newest ``limit`` (``(now, 0)`` for none)."""
    hits = _newest(_log(record), limit, _milliseconds(now) - math.ceil(expiry * 1000))
    if not hits:
        return now, 0
    return min(ms for ms, _ in hits) / 1000, sum(n for _, n in hits)


def moving_end(record: Record, expiry: float) -> float:
    """When the newest hit of the log leaves the window (0: no hit)."""
    entries = _log(record)
    return max(ms for ms, _ in entries) / 1000 + expiry if entries else 0.0


# -- sliding window counter -----------------------------------------------------------


def _buckets(record: Record, now: float, expiry: float) -> Sliding | None:
    """The buckets as they are at ``now``: moved on once if the current one is over;
    None if both are over."""
    if not isinstance(record, Sliding):
        return None
    elapsed = now - record.start
    if elapsed >= 2 * expiry:
        return None
    if elapsed >= expiry:
        return Sliding(record.start + expiry, record.current, 0)
    return record


def sliding_window(record: Record, now: float, expiry: float) -> tuple[int, float, int, float]:
    """``get_sliding_window``: the previous bucket's hits and the seconds it still
    counts, the current bucket's hits and the seconds until it is over as a
    previous bucket too (all 0 for no buckets)."""
    buckets = _buckets(record, now, expiry)
    if buckets is None:
        return 0, 0.0, 0, 0.0
    previous_ttl = buckets.start + expiry - now if buckets.previous else 0.0
    return buckets.previous, previous_ttl, buckets.current, buckets.start + 2 * expiry - now


def sliding_hit(record: Record, now: float, limit: int, expiry: float, amount: int) -> Step[bool]:
    """``acquire_sliding_window_entry``: count ``amount`` hits in the current bucket if
    the weighted count leaves room for them."""
    buckets = _buckets(record, now, expiry)
    previous, previous_ttl, current, _ = sliding_window(record, now, expiry)
    weighted = math.floor(previous * previous_ttl / expiry) + current
    if amount > limit or weighted + amount > limit:
        return Step(record, False, sliding_end(record, expiry))
    if buckets is None:
        buckets = Sliding(now, 0, amount)
    else:
        buckets = Sliding(buckets.start, buckets.previous, buckets.current + amount)
    return Step(buckets, True, sliding_end(buckets, expiry))


def sliding_end(record: Record, expiry: float) -> float:
    """When the current bucket stops counting (0: no buckets)."""
    return record.start + 2 * expiry if isinstance(record, Sliding) else 0.0


def record_end(record: Record) -> float | None:
    """When a record stops mattering, if it says so itself (a fixed window does; a log
    and buckets need their expiry): None otherwise."""
    return record.expires if isinstance(record, Fixed) else None
