"""A barrier's data, ``ROUND LAST``, and its arrivals' owner data, ``parties N``.

The barrier ``name`` (:class:`tenure.Barrier`) is a persistent semaphore of limit
``MAX_COUNT`` whose data says where the last round ended: the rounds passed and the
fencing token of the last party let through, two decimal numbers (:data:`START`
before any round). An arrival holds one token, its owner data ``parties N`` (the
parties it waits for: only for people, ``tenure describe`` and the dashboard). This
module is the format's one home: the recipe writes with :func:`progress_data` and
:func:`parties_data` and reads with :func:`barrier_progress`; :mod:`tenure._core.kinds`
reads a barrier's facts with :func:`read_progress` and :func:`read_parties`.
"""

from __future__ import annotations

from typing import Final

from tenure._core.counter_data import read_decimal
from tenure.errors import PreconditionFailedError

__all__ = [
    "PARTIES_WORD",
    "START",
    "barrier_progress",
    "parties_data",
    "progress_data",
    "read_parties",
    "read_progress",
]

#: The data of a barrier no round has passed yet.
START: Final = b"0 0"

#: The first word of a barrier arrival's owner data: ``parties N``.
PARTIES_WORD: Final = b"parties"


def progress_data(rounds: int, last: int) -> bytes:
    """The data of a barrier ``rounds`` rounds on, the last party let through ``last``."""
    return b"%d %d" % (rounds, last)


def read_progress(data: bytes) -> tuple[int, int] | None:
    """(rounds passed, the token of the last party let through), or None if ``data``
    is not a barrier's (two decimal numbers as :func:`progress_data` writes them)."""
    words = data.split(b" ")
    if len(words) != 2:
        return None
    rounds, last = read_decimal(words[0], signed=False), read_decimal(words[1], signed=False)
    if rounds is None or last is None:
        return None
    return rounds, last


def barrier_progress(name: str, data: bytes) -> tuple[int, int]:
    """:func:`read_progress` of semaphore ``name``'s data; PreconditionFailedError if it
    is not a barrier's."""
    progress = read_progress(data)
    if progress is None:
        raise PreconditionFailedError(
            f"semaphore {name!r} holds data that is not a barrier's: {data[:40]!r}"
        )
    return progress


def parties_data(parties: int) -> bytes:
    """A barrier arrival's owner data: ``parties N``."""
    return b"%s %d" % (PARTIES_WORD, parties)


def read_parties(data: bytes) -> int | None:
    """The parties an arrival's owner data says (None: it says none, as an older
    client's ``waiting`` does)."""
    words = data.split(b" ")
    if len(words) != 2 or words[0] != PARTIES_WORD:
        return None
    parties = read_decimal(words[1], signed=False)
    return parties if parties is not None and parties >= 1 else None
