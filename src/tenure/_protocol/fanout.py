"""One change, many watchers: the pushes of its watch firings encoded once. [compiled]

A change of a semaphore that a thousand sessions watch fires a thousand watches.
Their pushes differ only in the session and watch ids; the rest (the name and the
state the change left, shared by every watch that asked for the same shape, see
:func:`tenure._core.shared_steps.fire_watches`) is the same bytes in each.
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

from typing import Annotated, Final, TypeAlias

import msgspec

from tenure._core.effects import WatchFired
from tenure._protocol.messages import (
    PROTOCOL_VERSION,
    Message,
    Push,
    decode_message,
    encode_message,
)
from tenure._protocol.older_peers import for_version

#: Push is ``[15, effect]`` and WatchFired ``[4, session_id, watch_id, name, ...]``
#: (wire tags, see messages.py and payloads.py): a push's body starts with these
#: four bytes (two msgpack array headers, two tags), then the two ids.
_HEAD_SIZE: Final = 4
_PUSH_START: Final = b"\x92\x0f"
_UINT_END: Final = 1 << 64
#: A msgpack array header of two: what a push's two ids are read as (msgpack holds
#: no integer above 2**64 - 1, so ``ge=0`` makes them the wire's uints).
_PAIR: Final = b"\x92"
_ID: TypeAlias = Annotated[int, msgspec.Meta(ge=0)]
_decode_ids: Final = msgspec.msgpack.Decoder(tuple[_ID, _ID]).decode
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
            return encode_message(_push(effect, version))  # it names the field
        ids = _pack((sid, wid))[1:]  # (one call: the pair, less its array header)
        key = (effect.name, id(description), version == 1)
        known = self._tails.get(key)
        if known is not None and known[0] is description:
            return known[1] + ids + known[2]
        body = encode_message(_push(effect, version))
        after = _HEAD_SIZE + len(ids)
        # (Always so, by the layout above; checked, not assumed.)
        if body.startswith(_PUSH_START) and body[_HEAD_SIZE:after] == ids:
            self._tails[key] = (description, body[:_HEAD_SIZE], body[after:])
        return body


def _push(effect: WatchFired, version: int | None) -> Message:
    """``Push(effect)`` as a peer of ``version`` may receive it (an older one's layouts:
    :func:`~tenure._protocol.older_peers.for_version`, called for older peers alone)."""
    push = Push(effect)
    if version is None or version >= PROTOCOL_VERSION:
        return push
    return for_version(push, version)


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
        last, tail = self._last, self._tail
        if last is not None and body.endswith(tail) and body.startswith(self._head):
            # msgpack is prefix-free: head, exactly two unsigned ints, then the tail
            # is the same push with other ids (anything else fails here: decoded in full).
            try:
                sid, wid = _decode_ids(_PAIR + body[_HEAD_SIZE : len(body) - len(tail)])
            except (msgspec.DecodeError, msgspec.ValidationError):
                pass
            else:
                return Push(WatchFired(sid, wid, last.name, last.description))
        message = decode_message(body)
        if type(message) is Push and type(message.effect) is WatchFired:
            effect = message.effect
            ids = _pack((effect.session_id, effect.watch_id))[1:]
            after = _HEAD_SIZE + len(ids)
            # Remembered only if laid out as this server lays it out (one-byte heads,
            # the ids packed as msgpack packs them): else the bytes after would not be.
            if body.startswith(_PUSH_START) and body[_HEAD_SIZE:after] == ids:
                self._last, self._head, self._tail = effect, body[:_HEAD_SIZE], body[after:]
        return message
