"""Groups as the store keeps them: the group's mark, a member's record, who is a member.

A group (``tenure.client.Group``) is a persistent semaphore whose data is
:data:`GROUP_DATA` and whose limit is its most members. A member is a hold of one
token whose owner data is a *member record*::

    member STATE LEN:ID WEIGHT DATA

* ``STATE``: ``joining`` from the grant until the joiner has checked that its id is
  free, then ``joined``. Only ``joined`` records are members: a join that loses its
  id to another is never seen as the member.
* ``LEN:ID``: the id's length in UTF-8 bytes (decimal, no leading zero) and the id
  (1 to :data:`MAX_MEMBER_ID_BYTES` bytes; no control characters or surrogates).
* ``WEIGHT``: ``-`` for a plain member, else a partition member's weight above 0, as
  ``str()`` writes an int or ``repr()`` a float (``1``, ``2.5``).
* ``DATA``: the member's own bytes, to the end (any bytes).

The length prefix makes the record unambiguous whatever the id and data hold, and
:func:`parse_record` accepts only what :func:`member_record` writes (one spelling
per record), so what a client wrote reads back the same everywhere.

:func:`members_of` says who the members are: each id's ``joined`` record of the
lowest fencing token (a join wins its id only if no hold with that id came before
it, so there is at most one; the rule makes every reader agree even if not). Holds
whose data is no member record are nobody.

Pure: the client's recipe (``tenure.client._group``) and the classifier
(:mod:`tenure._core.kinds`) both read groups through this module.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from tenure.errors import InvalidArgumentError

__all__ = [
    "DEFAULT_MAX_GROUP_MEMBERS",
    "GROUP_DATA",
    "MAX_MEMBER_ID_BYTES",
    "MAX_WEIGHT",
    "Member",
    "MemberRecord",
    "check_member_id",
    "check_weight",
    "joining_count",
    "member_record",
    "members_of",
    "parse_record",
]

#: A group's semaphore data: what marks a persistent semaphore as a group.
GROUP_DATA: Final = b"group"
#: The most members of a group made without ``max_members`` (its semaphore's limit).
DEFAULT_MAX_GROUP_MEMBERS: Final = 1000
#: The longest member id, in UTF-8 bytes.
MAX_MEMBER_ID_BYTES: Final = 256
#: The largest weight of a partition member (a ratio of weights is what counts).
MAX_WEIGHT: Final = 1e9

_PREFIX: Final = b"member "
_STATES: Final = (b"joining", b"joined")
_NO_WEIGHT: Final = b"-"

State = Literal["joining", "joined"]


class Hold(Protocol):
    """What is read of a hold (an ``OwnerInfo``, or the engine's ``Owner``)."""

    @property
    def token(self) -> int:
        """The hold's fencing token."""

    @property
    def data(self) -> bytes:
        """The owner's data."""


@dataclass(frozen=True, slots=True)
class MemberRecord:
    """A member record's fields (module docstring)."""

    state: State
    id: str
    weight: int | float | None
    data: bytes


@dataclass(frozen=True, slots=True)
class Member:
    """A member of a group: its id, the fencing token of its hold, its data, and its
    weight (None: a plain member, which takes no partition keys)."""

    id: str
    token: int
    data: bytes
    weight: int | float | None


def check_member_id(member_id: object) -> str:
    """A member id, or InvalidArgumentError naming ``member_id``: a non-empty str of at
    most MAX_MEMBER_ID_BYTES UTF-8 bytes, no control characters nor surrogates."""
    if not isinstance(member_id, str) or not member_id:
        raise InvalidArgumentError(f"member_id must be a non-empty string, got {member_id!r}")
    if member_id.isascii() and member_id.isprintable():
        if len(member_id) <= MAX_MEMBER_ID_BYTES:
            return member_id
    elif any(unicodedata.category(ch) in ("Cc", "Cs") for ch in member_id):
        raise InvalidArgumentError(
            f"member_id must not contain control characters or surrogates: {member_id!r}"
        )
    if len(member_id.encode("utf-8")) > MAX_MEMBER_ID_BYTES:
        raise InvalidArgumentError(
            f"member_id is longer than {MAX_MEMBER_ID_BYTES} bytes (MAX_MEMBER_ID_BYTES)"
        )
    return member_id


def check_weight(weight: object) -> int | float:
    """A partition member's weight, or InvalidArgumentError naming ``weight``: an int
    or float above 0 and at most MAX_WEIGHT (not a bool, not NaN)."""
    if (type(weight) is int or type(weight) is float) and 0 < weight <= MAX_WEIGHT:
        return weight  # (NaN is not above 0; a bool is not an int here)
    raise InvalidArgumentError(
        f"weight must be a number above 0 and at most {MAX_WEIGHT:g}, got {weight!r}"
    )


def member_record(
    member_id: str, data: bytes, *, weight: int | float | None, state: State
) -> bytes:
    """The owner data of a member (arguments already checked)."""
    encoded = member_id.encode("utf-8")
    weight_text = _NO_WEIGHT if weight is None else _weight_bytes(weight)
    return b"%s%s %d:%s %s %s" % (
        _PREFIX,
        state.encode("ascii"),
        len(encoded),
        encoded,
        weight_text,
        data,
    )


def _weight_bytes(weight: int | float) -> bytes:
    return (str(weight) if type(weight) is int else repr(float(weight))).encode("ascii")


def parse_record(data: bytes) -> MemberRecord | None:
    """The record in ``data``, or None if ``data`` is not one :func:`member_record`
    writes (never raises)."""
    if not data.startswith(_PREFIX):
        return None
    state_end = data.find(b" ", len(_PREFIX))
    state = data[len(_PREFIX) : state_end]
    if state_end < 0 or state not in _STATES:
        return None
    colon = data.find(b":", state_end + 1, state_end + 5)
    length_text = data[state_end + 1 : colon]
    if colon < 0 or not length_text.isdigit() or length_text.startswith(b"0"):
        return None  # (bytes.isdigit is ASCII-only; at most 3 digits by the find's end)
    id_end = colon + 1 + int(length_text)
    if id_end >= len(data) or data[id_end : id_end + 1] != b" ":
        return None
    try:
        member_id = check_member_id(data[colon + 1 : id_end].decode("utf-8"))
    except (UnicodeDecodeError, InvalidArgumentError):
        return None
    weight_end = data.find(b" ", id_end + 1)
    if weight_end < 0:
        return None
    weight = _parse_weight(data[id_end + 1 : weight_end])
    if weight is False:
        return None
    return MemberRecord(
        "joining" if state == b"joining" else "joined",
        member_id,
        weight,
        data[weight_end + 1 :],
    )


def _parse_weight(text: bytes) -> int | float | Literal[False] | None:
    """The weight ``text`` writes (None: ``-``), or False if it is not one
    :func:`member_record` writes."""
    if text == _NO_WEIGHT:
        return None
    if not text or len(text) > 32:
        return False
    weight: int | float
    try:
        weight = int(text) if text.isdigit() else float(text)
    except ValueError:
        return False
    if not (0 < weight <= MAX_WEIGHT) or not math.isfinite(weight):
        return False
    return weight if _weight_bytes(weight) == text else False


def members_of(owners: Iterable[Hold]) -> dict[str, Member]:
    """The members among a group's holds: each id's ``joined`` record of the lowest
    token, by id, in the order of their tokens (module docstring)."""
    found: dict[str, Member] = {}
    for owner in sorted(owners, key=lambda held: held.token):
        record = parse_record(owner.data)
        if record is not None and record.state == "joined" and record.id not in found:
            found[record.id] = Member(record.id, owner.token, record.data, record.weight)
    return found


def joining_count(owners: Iterable[Hold]) -> int:
    """Holds whose record says ``joining``: joins that have not checked their id yet
    (or lost it and are about to let go)."""
    return sum(
        1
        for owner in owners
        if (record := parse_record(owner.data)) is not None and record.state == "joining"
    )
