"""The sans-I/O codec of the dflockd line protocol (newest single-node generation).

dflockd clients (Python ``dflockd-client``, the TypeScript and Go clients) speak it;
the server side lives in ``tenure.compat.dflockd.face``. The user-facing page is
docs/dflockd.md (to come); the compatibility spec we follow is
shared/reference/dflockd-protocol.md. Like the rest of :mod:`tenure._protocol`,
nothing here does I/O, reads a clock or draws a random number: a driver feeds bytes
to a :class:`LineReader`, :func:`parse`\\ s each :class:`Frame` and writes the bytes
that the response helpers return.

Lexical rules:

* A request is exactly three LF-terminated lines: command, key, argument. Each line
  is at most :data:`MAX_LINE` bytes before its LF, a CR before the LF included; the
  argument line of ``auth`` may be :data:`MAX_AUTH_LINE`. Trailing CRs are then
  stripped, so CRLF works. A longer line is fatal: ``error``, then close, as soon
  as its cap is passed (a line that never ends must not be read for ever).
* Lines are UTF-8. Commands are case-sensitive. A key is non-empty and holds no
  space, tab, CR or LF; ``stats``, ``ping``, ``barrier`` and ``auth`` ignore it.
* The argument splits into fields like Go's ``strings.Fields`` (runs of Unicode
  white space as Go defines it). Integers read like Go's ``strconv``: an optional
  sign and ASCII digits, within int64.
* Every response is one lower-case LF-terminated line with no trailing space.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from tenure._core.values import check_name
from tenure._protocol.errors import LocalProtocolError
from tenure.errors import InvalidArgumentError

#: Payload bytes per line, the LF not counted (a CR before it counts).
MAX_LINE: Final = 256
#: The cap of the argument line of ``auth`` (a shared secret may be long).
MAX_AUTH_LINE: Final = 65536
#: The largest timeout or lease in seconds: (2**63 - 1) ns in whole seconds, as in Go.
MAX_SECONDS: Final = 9_223_372_036
#: The largest semaphore limit.
MAX_LIMIT: Final = 1_048_576

# RequestError.code: the internal codes of spec §8, for logs (the wire says ``error``).
UNKNOWN_COMMAND: Final = 3
NOT_AN_INTEGER: Final = 4  # or it does not fit an int64
BAD_KEY: Final = 5  # empty, or with white space
BAD_TIMEOUT: Final = 6  # out of 0..MAX_SECONDS
EMPTY_TOKEN: Final = 7  # r/sr with an empty argument
BAD_FIELDS: Final = 8  # a wrong number of argument fields; a bad stable-ref
BAD_LEASE: Final = 9  # out of 1..MAX_SECONDS
BAD_LIMIT: Final = 13  # out of 1..MAX_LIMIT

# Go's unicode.IsSpace, which strings.Fields and strings.TrimSpace use. Python's
# str.split() would also split on U+001C..U+001F, which Go keeps inside a field.
_GO_SPACE: Final = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
_FIELD: Final = re.compile(f"[^{_GO_SPACE}]+")
_INTEGER: Final = re.compile(r"[+-]?[0-9]+")  # [0-9], not \d: Go takes ASCII digits only
_TOKEN: Final = re.compile(r"[0-9a-f]{32}")
_INT64: Final = 2**63


# -- framing ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Frame:
    """The three lines of one request, trailing CRs stripped, decoded as UTF-8."""

    command: str
    key: str
    argument: str


@dataclass(frozen=True, slots=True)
class FrameError:
    """A request that could not even be framed; the answer is ``error``.

    ``fatal``: a line was too long, so close after answering (the reader stops).
    Otherwise (a line is not UTF-8) the three lines were consumed and the
    connection goes on.
    """

    reason: str
    fatal: bool


class LineReader:
    """Cuts a byte stream into requests: :class:`Frame` or :class:`FrameError`.

    Bytes are split into lines as they arrive, so no line is ever buffered beyond
    its cap: the byte that passes it yields a fatal FrameError at once (without
    waiting for the line's LF, which may never come); after that nothing more is
    read. At most the request being read is held (two short lines and one up to
    ``max_auth_line``), plus whole requests fed but not yet taken with
    :meth:`next_frame`.
    """

    def __init__(self, *, max_line: int = MAX_LINE, max_auth_line: int = MAX_AUTH_LINE) -> None:
        for name, value in (("max_line", max_line), ("max_auth_line", max_auth_line)):
            if type(value) is not int or value < 1:
                raise LocalProtocolError(f"{name} must be a positive int, got {value!r}")
        self._max_line = max_line
        self._max_auth_line = max_auth_line
        self._ready: deque[Frame | FrameError] = deque()
        self._lines: list[bytes] = []  # the finished lines of the request being read
        self._line = bytearray()  # the line being read, never longer than its cap
        self._broken = False  # a fatal FrameError is out: ignore everything after it
        self._eof = False

    @property
    def eof(self) -> bool:
        """Whether the stream ended (``feed(b"")`` was called)."""
        return self._eof

    @property
    def in_frame(self) -> bool:
        """Whether bytes of a not-yet-complete request were received.

        A server applies its per-line read timeout only then, never between requests.
        """
        return not self._broken and bool(self._lines or self._line)

    @property
    def buffered(self) -> int:
        """Bytes held for the request being read (whole requests not counted)."""
        return sum(map(len, self._lines)) + len(self._line)

    def feed(self, data: bytes) -> None:
        """Add received bytes; ``b""`` means the stream ended.

        Raises:
            LocalProtocolError: (a ValueError) bytes after the end of the stream.
        """
        if self._eof:
            if data:
                raise LocalProtocolError("bytes fed after the end of the stream")
            return
        if not data:
            self._eof = True
            return
        start, size = 0, len(data)
        while start < size and not self._broken:
            newline = data.find(b"\n", start)
            stop = size if newline < 0 else newline
            if stop - start > self._cap() - len(self._line):
                self._fail()  # now: its LF may never come
                return
            self._line += data[start:stop]
            if newline < 0:
                return
            start = newline + 1
            self._end_line()

    def next_frame(self) -> Frame | FrameError | None:
        """The next request, or None if more bytes are needed (or the stream ended,
        or a fatal FrameError was returned already)."""
        return self._ready.popleft() if self._ready else None

    def _cap(self) -> int:
        if len(self._lines) == 2 and self._lines[0] == b"auth":
            return self._max_auth_line
        return self._max_line

    def _end_line(self) -> None:
        # Go strips every trailing CR (strings.TrimRight), not just one.
        self._lines.append(bytes(self._line).rstrip(b"\r"))
        self._line.clear()
        if len(self._lines) == 3:
            self._ready.append(_decode(self._lines))
            self._lines = []

    def _fail(self) -> None:
        self._ready.append(FrameError("line too long", fatal=True))
        self._broken = True
        self._lines, self._line = [], bytearray()


def _decode(lines: list[bytes]) -> Frame | FrameError:
    try:
        command, key, argument = (line.decode("utf-8") for line in lines)
    except UnicodeDecodeError as error:
        return FrameError(f"a line is not valid UTF-8 ({error.reason})", fatal=False)
    return Frame(command, key, argument)


# -- requests ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Acquire:
    """``l`` (limit 1, not a semaphore) or ``sl``: wait up to ``timeout`` s for a slot."""

    key: str
    timeout: int  # 0..MAX_SECONDS; 0 is a try-lock
    limit: int  # 1..MAX_LIMIT; always 1 when not semaphore
    lease: int | None  # 1..MAX_SECONDS; None: the server's default
    semaphore: bool


@dataclass(frozen=True, slots=True)
class Release:
    """``r`` or ``sr``: give up the slot ``token`` holds."""

    key: str
    token: str  # non-empty, no white space; its validity is the server's business
    semaphore: bool


@dataclass(frozen=True, slots=True)
class Renew:
    """``n`` or ``sn``: reset the lease of ``token`` to now + ``lease``."""

    key: str
    token: str
    lease: int | None  # None: the server's default, not the lease first asked for
    semaphore: bool


@dataclass(frozen=True, slots=True)
class Enqueue:
    """``e`` (limit 1) or ``se``: join the queue without blocking (two-phase, step 1)."""

    key: str
    limit: int
    lease: int | None
    semaphore: bool


@dataclass(frozen=True, slots=True)
class Wait:
    """``w`` or ``sw``: block up to ``timeout`` s for the slot enqueued on this connection."""

    key: str
    timeout: int
    semaphore: bool


@dataclass(frozen=True, slots=True)
class Stats:
    """``stats``: the server's state as one JSON line."""


@dataclass(frozen=True, slots=True)
class Ping:
    """``ping``: answered ``ok``."""


@dataclass(frozen=True, slots=True)
class ReplicationBarrier:
    """``barrier``: answered ``ok`` at once by a single node."""


@dataclass(frozen=True, slots=True)
class Auth:
    """``auth``: the handshake; the key line is ignored."""

    secret: str  # the argument with surrounding white space trimmed


@dataclass(frozen=True, slots=True)
class StableRef:
    """``stable-ref``: a client's identifier for re-attaching after fail-over."""

    ref: str  # 1..64 printable ASCII (space included), trimmed, from the key line


Request = (
    Acquire
    | Release
    | Renew
    | Enqueue
    | Wait
    | Stats
    | Ping
    | ReplicationBarrier
    | Auth
    | StableRef
)


class RequestError(Exception):
    """A malformed request: answer ``error`` and keep the connection.

    ``code`` is the internal code of spec §8 (the module's code constants);
    ``str(error)`` names the problem.
    """

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def parse(frame: Frame) -> Request:
    """The request ``frame`` carries, validated as the newest Go server does.

    Raises:
        RequestError: the request is malformed.
    """
    command = frame.command
    if command in _IGNORING:
        return _IGNORING[command]
    if command == "auth":
        return Auth(frame.argument.strip(_GO_SPACE))
    if command == "stable-ref":
        ref = frame.key.strip(_GO_SPACE)
        if not ref or len(ref) > 64 or not all(" " <= c <= "~" for c in ref):
            raise RequestError(BAD_FIELDS, "a stable ref is 1 to 64 printable ASCII characters")
        return StableRef(ref)
    shape = _SHAPES.get(command)
    if shape is None:
        raise RequestError(UNKNOWN_COMMAND, f"unknown command {command[:32]!r}")
    key = frame.key
    if not key:
        raise RequestError(BAD_KEY, "empty key")
    if any(c in key for c in " \t\r\n"):
        raise RequestError(BAD_KEY, "the key contains white space")
    if not (key.isascii() and key.isprintable()) and not _keepable(key):
        # A key is a semaphore's name: one tenure could not keep is refused here, before
        # it takes a key slot or reaches the engine (which would refuse it as a fault).
        raise RequestError(BAD_KEY, "the key contains control characters")
    usage, counts = shape
    fields = _FIELD.findall(frame.argument)
    if not fields and command in ("r", "sr"):
        raise RequestError(EMPTY_TOKEN, "empty token")
    if len(fields) not in counts:
        raise RequestError(BAD_FIELDS, f"{command} takes {usage!r}, got {len(fields)} fields")
    return _build(command, key, fields)


def _keepable(key: str) -> bool:
    """Whether ``key`` is a name tenure keeps (no control characters, see check_name)."""
    try:
        check_name("key", key)
    except InvalidArgumentError:
        return False
    return True


def _integer(text: str, what: str) -> int:
    # Go's strconv.ParseInt(text, 10, 64): int() alone would take "1_0", " 1", "٣".
    digits = text.lstrip("+-").lstrip("0")  # int() refuses over 4300 digits, zeros too
    if not _INTEGER.fullmatch(text) or len(digits) > 19:
        raise RequestError(NOT_AN_INTEGER, f"{what} {text[:32]!r} is not an integer")
    value = -int(digits or "0") if text[0] == "-" else int(digits or "0")
    if not -_INT64 <= value < _INT64:
        raise RequestError(NOT_AN_INTEGER, f"{what} {text!r} does not fit an int64")
    return value


def _ranged(text: str, what: str, low: int, high: int, code: int) -> int:
    value = _integer(text, what)
    if not low <= value <= high:
        raise RequestError(code, f"{what} {value} is out of range {low}..{high}")
    return value


def _timeout(text: str) -> int:
    return _ranged(text, "timeout", 0, MAX_SECONDS, BAD_TIMEOUT)


def _lease(fields: list[str], index: int) -> int | None:
    if index >= len(fields):
        return None
    return _ranged(fields[index], "lease", 1, MAX_SECONDS, BAD_LEASE)


def _limit(text: str) -> int:
    return _ranged(text, "limit", 1, MAX_LIMIT, BAD_LIMIT)


# The commands that ignore their key and argument lines entirely.
_IGNORING: Final[Mapping[str, Request]] = {
    "stats": Stats(),
    "ping": Ping(),
    "barrier": ReplicationBarrier(),
}
# command: (the argument it takes, the numbers of fields accepted).
_SHAPES: Final[Mapping[str, tuple[str, tuple[int, ...]]]] = {
    "l": ("<timeout> [<lease>]", (1, 2)),
    "sl": ("<timeout> <limit> [<lease>]", (2, 3)),
    "r": ("<token>", (1,)),
    "sr": ("<token>", (1,)),
    "n": ("<token> [<lease>]", (1, 2)),
    "sn": ("<token> [<lease>]", (1, 2)),
    "e": ("[<lease>]", (0, 1)),
    "se": ("<limit> [<lease>]", (1, 2)),
    "w": ("<timeout>", (1,)),
    "sw": ("<timeout>", (1,)),
}


def _build(command: str, key: str, fields: list[str]) -> Request:
    # Fields are checked left to right, so the first bad one names the error, as in Go.
    semaphore = command.startswith("s")
    kind = command[-1]
    if kind == "l":
        timeout = _timeout(fields[0])
        limit = _limit(fields[1]) if semaphore else 1
        return Acquire(key, timeout, limit, _lease(fields, 2 if semaphore else 1), semaphore)
    if kind == "e":
        limit = _limit(fields[0]) if semaphore else 1
        return Enqueue(key, limit, _lease(fields, 1 if semaphore else 0), semaphore)
    if kind == "r":
        return Release(key, fields[0], semaphore)
    if kind == "n":
        return Renew(key, fields[0], _lease(fields, 1), semaphore)
    return Wait(key, _timeout(fields[0]), semaphore)


# -- responses --------------------------------------------------------------------------

# The fixed answers (spec §5 says which command gets which).
OK: Final = b"ok\n"
QUEUED: Final = b"queued\n"  # e/se: in the queue; w/sw on this connection next
TIMEOUT: Final = b"timeout\n"
ERROR: Final = b"error\n"  # malformed request, unknown or stale token, unknown command
ERROR_AUTH: Final = b"error_auth\n"  # then close
ERROR_MAX_LOCKS: Final = b"error_max_locks\n"  # creating the key would pass the key cap
ERROR_MAX_WAITERS: Final = b"error_max_waiters\n"
ERROR_LIMIT_MISMATCH: Final = b"error_limit_mismatch\n"  # the semaphore has another limit
ERROR_NOT_ENQUEUED: Final = b"error_not_enqueued\n"  # w/sw without e/se on this connection
ERROR_ALREADY_ENQUEUED: Final = b"error_already_enqueued\n"
ERROR_LEASE_EXPIRED: Final = b"error_lease_expired\n"  # granted, expired before it was seen
ERROR_DRAINING: Final = b"error_draining\n"  # shutting down


def _grant(status: str, token: str, lease: int) -> bytes:
    # Clients split the line on white space (Python's, a superset of Go's).
    if not token or any(c.isspace() for c in token):
        raise LocalProtocolError(f"a token must be one word, got {token!r}")
    if type(lease) is not int or not 1 <= lease <= MAX_SECONDS:
        raise LocalProtocolError(f"a lease must be an int in 1..{MAX_SECONDS}, got {lease!r}")
    return f"{status} {token} {lease}\n".encode()


def granted(token: str, lease: int) -> bytes:
    """``ok <token> <lease>``: ``l``/``sl``/``w``/``sw`` got the slot."""
    return _grant("ok", token, lease)


def acquired(token: str, lease: int) -> bytes:
    """``acquired <token> <lease>``: ``e``/``se`` got the slot at once."""
    return _grant("acquired", token, lease)


def renewed(seconds: int) -> bytes:
    """``ok <seconds>``: a renew succeeded; ``seconds`` is the lease applied."""
    if type(seconds) is not int or seconds < 0:
        raise LocalProtocolError(f"renewed seconds must be an int >= 0, got {seconds!r}")
    return b"ok %d\n" % seconds


def stats(document: Mapping[str, object]) -> bytes:
    """``ok <json>``: the document as compact JSON on one line (JSON escapes every LF)."""
    try:
        text = json.dumps(document, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return b"ok " + text.encode("utf-8") + b"\n"
    except (TypeError, ValueError) as error:
        raise LocalProtocolError(f"cannot render the stats document: {error}") from None


def make_token(fence: int, salt: bytes) -> str:
    """The newest server's token: 16 lower-case hex of ``fence`` (a uint64,
    big-endian) then 16 hex of the 8-byte ``salt``.

    Fixed width and lower case, so string order is fence order.
    """
    if type(fence) is not int or not 0 <= fence < 2**64:
        raise LocalProtocolError(f"a fence must be a uint64, got {fence!r}")
    if len(salt) != 8:
        raise LocalProtocolError(f"a salt is 8 bytes, got {len(salt)}")
    return f"{fence:016x}{bytes(salt).hex()}"


def parse_token(token: str) -> tuple[int, bytes] | None:
    """``(fence, salt)`` of a :func:`make_token` token; None unless ``token`` is
    exactly 32 lower-case hex characters."""
    if _TOKEN.fullmatch(token) is None:
        return None
    return int(token[:16], 16), bytes.fromhex(token[16:])


def frame(command: str, key: str, argument: str) -> bytes:
    """A request's bytes, as a client sends it (for tests and tools; no caps checked).

    Raises:
        LocalProtocolError: a part contains LF, which would break the framing.
    """
    if any("\n" in part for part in (command, key, argument)):
        raise LocalProtocolError("a request line cannot contain LF")
    return f"{command}\n{key}\n{argument}\n".encode()
