"""Claims: a name taken once per slot, for at least and at most a time, on the store's clock.

A claim of ``name`` lives in the persistent semaphore ``name`` (limit 1, held by
nobody), whose data is the claim's *record*, eight words after ``claim``::

    claim ID TOKEN GRANTED AT_LEAST AT_MOST RELEASED SESSION DATA

* ``ID``: the claim's id, 32 lowercase hex digits (128 random bits), made by the
  client before it asks, so that a call whose answer was lost is sent again with
  the same id and answered with the same claim;
* ``TOKEN``: the fencing token of the grant, from the store's counter of every
  grant's token (decimal);
* ``GRANTED``: when it was granted, UNIX seconds of the store's clock (display:
  what decides the claim's end is the store's own timer, see below);
* ``AT_LEAST``, ``AT_MOST``: seconds, as asked;
* ``RELEASED``: ``-``, or when it was released (UNIX seconds of the store's clock);
* ``SESSION``: the id of the session that took it (decimal; the claim does not end
  with it);
* ``DATA``: the owner data the claimer passed, in lowercase hex, ``-`` if empty.

The rule, which every store keeps in its own language (the engine with
:mod:`tenure._core.handlers.claims`, Redis in a function, PostgreSQL in PL/pgSQL,
etcd with leases) and the conformance kit checks (``test_claim``):

* a name is *free* if its semaphore is missing, or holds a claim that has ended; a
  claim of a free name is granted (the semaphore made, limit 1, the record its data);
* a live claim holds the name: another claim of it is refused (the store answers
  the live record, whose id is not the caller's); a claim with the live one's id is
  a retry and is answered with it;
* a semaphore that holds anything else (other data, holders, waiters, or an
  ephemeral semaphore) refuses a claim with PreconditionFailedError;
* a claim ends ``AT_MOST`` seconds after its grant, live holder or not; released
  (by anyone who knows its id), it ends at the later of the release and ``AT_LEAST``
  seconds after its grant. The store deletes the semaphore when it ends, so that
  watchers see the end and claims of per-slot names do not pile up;
* ``max_claims`` bounds the live claims of a node (LimitExceededError naming it).

This module is the record's codec and the checks of a claim's arguments: pure, no
clock (time is an argument).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Final

from tenure.errors import InvalidArgumentError, PreconditionFailedError

__all__ = [
    "CLAIM_WORD",
    "MAX_CLAIM_SECONDS",
    "ClaimRecord",
    "ClaimTimer",
    "check_claim_id",
    "check_claim_times",
    "claim_data",
    "parse_claim",
]

#: The first word of a claim's record.
CLAIM_WORD: Final = b"claim"

#: The longest ``at_least`` or ``at_most`` a claim accepts, in seconds: 366 days, a
#: yearly job's slot. Longer is taken for a mistake (a timestamp passed for a
#: duration, milliseconds for seconds), refused before anything is sent.
MAX_CLAIM_SECONDS: Final = 366 * 24 * 3600.0

#: A claim id: 128 bits in 32 lowercase hex digits (``secrets.token_hex(16)``).
_ID: Final = re.compile(r"[0-9a-f]{32}")
_HEX: Final = re.compile(rb"(?:[0-9a-f]{2})+")
_UNSIGNED: Final = re.compile(rb"0|[1-9][0-9]{0,19}")
_MAX_UINT: Final = 2**64 - 1


@dataclass(frozen=True, slots=True)
class ClaimRecord:
    """A claim as its semaphore's data records it (module docstring).

    Attributes:
        id: the claim's id (32 lowercase hex digits).
        token: the grant's fencing token.
        granted_at: when it was granted, UNIX seconds of the store's clock.
        at_least: seconds it holds the name after its grant, even if released.
        at_most: seconds after its grant that it ends, released or not.
        released_at: when it was released (UNIX seconds of the store's clock), or None.
        session_id: the session that took it.
        data: the owner data it was taken with.
    """

    id: str
    token: int
    granted_at: float
    at_least: float
    at_most: float
    released_at: float | None
    session_id: int
    data: bytes

    def ends_at(self) -> float:
        """When it ends (UNIX seconds of the store's clock, as the record says it):
        ``at_most`` after the grant, or once released the later of the release and
        ``at_least`` after the grant."""
        if self.released_at is None:
            return self.granted_at + self.at_most
        return max(self.released_at, self.granted_at + self.at_least)


@dataclass(slots=True)
class ClaimTimer:
    """What the engine keeps of a live claim besides its record: when it ends, on the
    engine's clock (``Node.claims``; the record's times are UNIX seconds, for display).

    ``least_until`` is ``at_least`` after the grant: a release ends the claim then
    (or at once, if that has passed); ``ends_at`` is when it ends now.
    """

    claim_id: str
    token: int
    least_until: float
    ends_at: float


def check_claim_id(claim_id: object) -> str:
    """A claim id: 32 lowercase hex digits, or InvalidArgumentError."""
    if not isinstance(claim_id, str) or not _ID.fullmatch(claim_id):
        raise InvalidArgumentError(
            f"claim_id must be 32 lowercase hex digits (a claim's id), got {claim_id!r}"
        )
    return claim_id


def check_claim_times(at_least: object, at_most: object) -> tuple[float, float]:
    """``(at_least, at_most)`` as floats, or InvalidArgumentError naming the argument.

    Both finite numbers of seconds, at most MAX_CLAIM_SECONDS; ``at_least`` 0 or more
    (0: a release ends the claim at once), ``at_most`` above 0 and not below
    ``at_least``.
    """
    values: list[float] = []
    for what, value in (("at_least", at_least), ("at_most", at_most)):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidArgumentError(f"{what} must be a number of seconds, got {value!r}")
        number = float(value)
        if not math.isfinite(number) or number < 0:
            raise InvalidArgumentError(f"{what} must be a finite number of seconds, got {value!r}")
        if number > MAX_CLAIM_SECONDS:
            raise InvalidArgumentError(
                f"{what} must be at most {MAX_CLAIM_SECONDS:g} seconds (366 days, "
                f"MAX_CLAIM_SECONDS), got {value!r}"
            )
        values.append(number)
    least, most = values
    if most == 0:
        raise InvalidArgumentError("at_most must be above 0 seconds, got 0")
    if least > most:
        raise InvalidArgumentError(f"at_least ({least:g} s) must not exceed at_most ({most:g} s)")
    return least, most


def claim_data(record: ClaimRecord) -> bytes:
    """The semaphore data that records ``record`` (floats written to round-trip)."""
    released = b"-" if record.released_at is None else repr(record.released_at).encode()
    return b"%s %s %d %s %s %s %s %d %s" % (
        CLAIM_WORD,
        record.id.encode(),
        record.token,
        repr(record.granted_at).encode(),
        repr(record.at_least).encode(),
        repr(record.at_most).encode(),
        released,
        record.session_id,
        record.data.hex().encode() or b"-",
    )


def parse_claim(name: str, data: bytes) -> ClaimRecord:
    """The claim recorded in semaphore ``name``'s data, or PreconditionFailedError if
    it records none (every word checked: a store's record of any tenure reads back)."""
    try:
        return _parse(data)
    except (ValueError, InvalidArgumentError):
        raise PreconditionFailedError(
            f"semaphore {name!r} is not a claim (its data is not 'claim ID TOKEN GRANTED "
            f"AT_LEAST AT_MOST RELEASED SESSION DATA': {data[:60]!r})"
        ) from None


def _parse(data: bytes) -> ClaimRecord:
    words = data.split(b" ")
    if len(words) != 9 or words[0] != CLAIM_WORD:
        raise ValueError("not nine words starting with 'claim'")
    _, claim_id, token, granted, least, most, released, session, owner_data = words
    if not _UNSIGNED.fullmatch(token) or not _UNSIGNED.fullmatch(session):
        raise ValueError("token and session must be decimal integers")
    if int(token) > _MAX_UINT or int(session) > _MAX_UINT:
        raise ValueError("token and session must fit 64 bits")
    at_least, at_most = check_claim_times(_number(least), _number(most))
    return ClaimRecord(
        id=check_claim_id(claim_id.decode("ascii")),
        token=int(token),
        granted_at=_number(granted),
        at_least=at_least,
        at_most=at_most,
        released_at=None if released == b"-" else _number(released),
        session_id=int(session),
        data=b"" if owner_data == b"-" else _hex(owner_data),
    )


def _number(word: bytes) -> float:
    """A finite float written in decimal (Python's repr, Lua's %.17g, PostgreSQL's text)."""
    if not word or not word.isascii() or word.strip() != word or b"_" in word:
        raise ValueError(f"not a number: {word!r}")
    value = float(word)
    if not math.isfinite(value):
        raise ValueError(f"not finite: {word!r}")
    return value


def _hex(word: bytes) -> bytes:
    if not _HEX.fullmatch(word):
        raise ValueError("owner data must be lowercase hex")
    return bytes.fromhex(word.decode("ascii"))
