"""One change, many watchers: the pushes of its watch firings encoded once.

A change of a semaphore that a thousand sessions watch fires a thousand watches.
Their pushes differ only in the session and watch ids; the rest (the name and the
state the change left, shared by every watch that asked for the same shape, see
:meth:`tenure._core.state.EngineState.fire_watches`) is the same bytes in each.
:class:`FiredPushes` encodes the first push of each shared description in full
(checked as :func:`~tenure._protocol.messages.encode_message` checks every
message), keeps the bytes after the two ids, and makes each further push from a
header, the two ids packed as msgpack integers, and those bytes. The result is
byte for byte what ``encode_message`` gives (the tests compare them).

It lives for one delivery (the effects of one step of the engine): the
descriptions it keeps are compared by identity, which is only meaningful while
they are alive, and it holds them so.
"""

from __future__ import annotations

from typing import Final

import msgspec

from tenure._core.effects import WatchFired
from tenure._protocol.messages import Message, Push, decode_message, encode_message, for_version

#: Push is ``[15, effect]`` and WatchFired ``[4, session_id, watch_id, name, ...]``
#: (wire tags, see messages.py and payloads.py): a push's body starts with these
#: four bytes (two msgpack array headers, two tags), then the two ids.
_HEAD_SIZE: Final = 4
_PUSH_START: Final = b"\x92\x0f"
_FIRED_TAG: Final = 0x04
#: msgpack's uint 8, 16, 32 and 64 markers, and how many bytes follow each.
_UINT_SIZES: Final = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}
_UINT_END: Final = 1 << 64
_pack: Final = msgspec.msgpack.Encoder().encode


class FiredPushes:
    """The bodies of Push(WatchFired) messages, sharing the encoding of their common part."""

    __slots__ = ("_tails",)

    def __init__(self) -> None:
        # (name, id of the description, the peer speaks version 1) -> (the
        # description, kept alive so that its id stays its own; the bytes before the
        # ids; the bytes after them)
        self._tails: dict[tuple[str, int, bool], tuple[object, bytes, bytes]] = {}

    def body(self, effect: WatchFired, version: int | None) -> bytes:
        """The body of ``Push(effect)`` for a peer of protocol ``version``.

        Raises what :func:`~tenure._protocol.messages.encode_message` raises.
        """
        sid, wid, description = effect.session_id, effect.watch_id, effect.description
        if not (0 <= sid < _UINT_END and 0 <= wid < _UINT_END):
            return encode_message(for_version(Push(effect), version))  # it names the field
        ids = _pack((sid, wid))[1:]  # (one call: the pair, less its array header)
        key = (effect.name, id(description), version == 1)
        known = self._tails.get(key)
        if known is not None and known[0] is description:
            return known[1] + ids + known[2]
        body = encode_message(for_version(Push(effect), version))
        after = _HEAD_SIZE + len(ids)
        # (Always so, by the layout above; checked, not assumed.)
        if body.startswith(_PUSH_START) and body[_HEAD_SIZE:after] == ids:
            self._tails[key] = (description, body[:_HEAD_SIZE], body[after:])
        return body


class FiredPushReader:
    """The receiving side: a run of watch pushes that differ only in their ids.

    A client whose sessions watch one semaphore receives, per change, one push per
    watch, alike after their two ids. This decoder remembers the last such push it
    decoded in full; a body whose bytes after the ids are the same gives the same
    name and description (immutable values, shared) with the new ids, without
    decoding them again. Anything else goes to
    :func:`~tenure._protocol.messages.decode_message`.
    """

    __slots__ = ("_head", "_last", "_tail")

    def __init__(self) -> None:
        self._head = b""
        self._tail = b""  # the last full push's bytes after its ids (head included)
        self._last: WatchFired | None = None

    def decode(self, body: bytes) -> Message:
        """The message ``body`` stands for (see :func:`decode_message`)."""
        ids = _fired_ids(body)
        if ids is not None:
            sid, wid, after = ids
            last = self._last
            if (
                last is not None
                and body[after:] == self._tail
                and body[:_HEAD_SIZE] == (self._head)
            ):
                return Push(WatchFired(sid, wid, last.name, last.description))
        message = decode_message(body)
        if ids is not None and type(message) is Push and type(message.effect) is WatchFired:
            self._last, self._head, self._tail = message.effect, body[:_HEAD_SIZE], body[ids[2] :]
        return message


def _fired_ids(body: bytes) -> tuple[int, int, int] | None:
    """A Push(WatchFired) body's session and watch ids and where they end, else None."""
    if body[:2] != _PUSH_START or len(body) < _HEAD_SIZE or body[3] != _FIRED_TAG:
        return None
    if not 0x90 <= body[2] <= 0x9F:  # a fixarray: the effect's fields
        return None
    sid = _uint(body, _HEAD_SIZE)
    if sid is None:
        return None
    wid = _uint(body, sid[1])
    if wid is None:
        return None
    return sid[0], wid[0], wid[1]


def _uint(body: bytes, at: int) -> tuple[int, int] | None:
    """The msgpack unsigned integer at ``at`` and where it ends, or None if there is none."""
    if at >= len(body):
        return None
    first = body[at]
    if first <= 0x7F:  # positive fixint
        return first, at + 1
    size = _UINT_SIZES.get(first)
    if size is None or at + 1 + size > len(body):
        return None
    return int.from_bytes(body[at + 1 : at + 1 + size], "big"), at + 1 + size
