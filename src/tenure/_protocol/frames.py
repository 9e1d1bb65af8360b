"""Framing: a 4-byte big-endian length, then that many bytes of one msgpack value. [compiled]

::

    +--------+--------+--------+--------+====================================+
    |       length (uint32, big-endian)  |  body: exactly one msgpack value   |
    +--------+--------+--------+--------+====================================+

The body of every tenure frame is an array (see :mod:`tenure._protocol.messages`,
which encodes and decodes it). A receiver rejects a frame as soon as its length
prefix exceeds its ``max_frame_size``: the body is never buffered. Decoding is
strict: every length inside the body is bounded by the body's size, map keys must
be strings, a map must not repeat a key, extension types (msgpack ``ext``,
timestamps included) are refused, and there must be no bytes after the one value.

A peer that speaks another protocol announces a huge frame: four bytes of text (an
HTTP answer's ``HTTP``) read as a length are at least 538,976,288. The error then
says what the peer seems to speak (:func:`foreign_protocol`), not the length.
"""

from __future__ import annotations

import struct
from typing import Final

from tenure._protocol.errors import FrameTooLargeError, LocalProtocolError
from tenure.errors import ProtocolError

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "HEADER_SIZE",
    "MAX_MAX_FRAME_SIZE",
    "MIN_MAX_FRAME_SIZE",
    "FrameReader",
    "encode_frame",
]

_HEADER: Final = struct.Struct(">I")
#: Bytes of the length prefix.
HEADER_SIZE: Final = _HEADER.size
_unpack_head: Final = _HEADER.unpack_from
#: The body size a connection accepts unless configured otherwise (1 MiB).
DEFAULT_MAX_FRAME_SIZE: Final = 1 << 20
#: Every peer accepts bodies of at least this size (64 KiB), so the first message
#: (Hello, or a Refused) can be sent before the peer has said what it accepts.
MIN_MAX_FRAME_SIZE: Final = 1 << 16
#: The largest body the length prefix can describe.
MAX_MAX_FRAME_SIZE: Final = 2**32 - 1


#: How many of a foreign peer's first characters an error quotes.
FOREIGN_QUOTE: Final = 40
#: The bytes of printable ASCII text and its line breaks.
_TEXT: Final = frozenset(b"\t\n\r" + bytes(range(0x20, 0x7F)))


def foreign_protocol(head: bytes) -> str | None:
    """What a peer whose stream starts with ``head`` speaks instead of tenure's protocol,
    as the error to show; None if ``head`` does not tell (it may just be a big frame)."""
    if head[:1] in (b"\x15", b"\x16") and head[1:2] == b"\x03":
        # A TLS record (alert or handshake): one end has TLS, the other plain TCP.
        return (
            "the peer speaks TLS and this end plain TCP, not tenure's protocol: "
            "use TLS on both ends or on neither (tenure serve --tls-cert)"
        )
    if len(head) < HEADER_SIZE or not all(byte in _TEXT for byte in head[:HEADER_SIZE]):
        return None
    line = head.strip().split(b"\n", 1)[0].rstrip(b"\r")[:FOREIGN_QUOTE]
    quote = line.decode("ascii", "backslashreplace")
    if line.startswith(b"HTTP") or b" HTTP/" in line:
        return (
            f"the peer speaks HTTP ({quote!r}), not tenure's protocol: is this the "
            "HTTP port of tenure serve (--http-port)? Its native port is --port"
        )
    return f"the peer sent text ({quote!r}), not tenure's protocol: is this a tenure port?"


def check_max_frame_size(value: object) -> int:
    """``value`` if it is a valid ``max_frame_size``, else LocalProtocolError.

    ``object``: a caller's value, checked here (the compiled build would refuse a
    non-int at the call, with a TypeError instead of this error).
    """
    if type(value) is not int or not MIN_MAX_FRAME_SIZE <= value <= MAX_MAX_FRAME_SIZE:
        raise LocalProtocolError(
            f"max_frame_size must be an int in [{MIN_MAX_FRAME_SIZE}, {MAX_MAX_FRAME_SIZE}],"
            f" got {value!r}"
        )
    return value


def encode_frame(body: bytes, *, limit: int = MAX_MAX_FRAME_SIZE) -> bytes:
    """``body`` (one packed msgpack value) with its length in front.

    Raises:
        FrameTooLargeError: ``body`` is longer than ``limit`` bytes.
    """
    if len(body) > limit:
        raise FrameTooLargeError(
            f"the frame body is {len(body)} bytes; the peer accepts at most {limit}"
        )
    return _HEADER.pack(len(body)) + body


class FrameReader:
    """Collects received bytes and cuts them into frame bodies.

    ``feed`` never fails; the errors come out of ``next_body``, in order, after the
    bodies that came before them.
    """

    def __init__(self, max_frame_size: object = DEFAULT_MAX_FRAME_SIZE) -> None:
        # object: checked here, whatever the caller passed (see check_max_frame_size).
        self.max_frame_size = check_max_frame_size(max_frame_size)
        self._buffer = bytearray()
        self._start = 0  # bytes before this are consumed; compacted lazily
        #: Whether the peer closed its end (``feed(b"")`` was called). Read-only for
        #: callers (an attribute: it is read after every frame).
        self.eof = False
        self._error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as part of a frame."""
        return len(self._buffer) - self._start

    def feed(self, data: bytes) -> None:
        """Add received bytes; ``b""`` means the peer closed its end."""
        if not data:
            self.eof = True
            return
        if self._error is not None:
            return  # the stream is broken already: keep nothing more
        self._buffer += data
        self._check_head()

    def _check_head(self) -> None:
        # Refuse an oversized frame as soon as its prefix is in, and drop what we
        # hold of it, so that no caller can make us buffer the body.
        buffer, start = self._buffer, self._start
        if len(buffer) - start >= HEADER_SIZE and self._error is None:
            (length,) = _unpack_head(buffer, start)
            if length > self.max_frame_size:
                why = foreign_protocol(bytes(buffer[start : start + 4 * FOREIGN_QUOTE]))
                self._error = ProtocolError(
                    why
                    or f"frame of {length} bytes announced; max_frame_size is {self.max_frame_size}"
                )
                buffer.clear()
                self._start = 0

    def next_body_if(self, head: bytes) -> bytes | None:
        """The next whole frame body if it starts with ``head`` (taken as
        :meth:`next_body` takes it); else None, and nothing is taken."""
        if self._error is not None:
            return None
        buffer, start = self._buffer, self._start
        if len(buffer) - start < HEADER_SIZE:
            return None
        (length,) = _unpack_head(buffer, start)
        body_start = start + HEADER_SIZE
        if len(buffer) < body_start + length or not buffer.startswith(head, body_start):
            return None
        return self.next_body()

    def next_body(self) -> bytes | None:
        """The next whole frame body, or None if more bytes are needed.

        Raises:
            ProtocolError: the next frame is oversized, or the peer closed its end
                in the middle of a frame.
        """
        if self._error is not None:
            raise ProtocolError(*self._error.args)  # a fresh one: tracebacks do not pile up
        # (Called once or twice per message on both ends: inlined, as few calls as can be.)
        buffer, start = self._buffer, self._start
        available = len(buffer) - start
        if available >= HEADER_SIZE:
            (length,) = _unpack_head(buffer, start)
            end = start + HEADER_SIZE + length
            if len(buffer) >= end:
                body = bytes(buffer[start + HEADER_SIZE : end])
                if end * 2 >= len(buffer):  # compact: most often, nothing is left
                    del buffer[:end]
                    self._start = 0
                else:
                    self._start = end
                if len(buffer) - self._start >= HEADER_SIZE:
                    self._check_head()
                return body
        if self.eof and available:
            self._error = ProtocolError(
                f"the connection closed in the middle of a frame ({available} bytes left)"
            )
            raise ProtocolError(*self._error.args)
        return None
