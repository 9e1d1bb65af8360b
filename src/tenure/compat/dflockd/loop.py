"""One dflockd connection's reading: its requests framed, checked, paced and answered.

:class:`LineLoop` runs a connection of :class:`~tenure.compat.dflockd.face.DflockdFace`
from its first byte to its end; what each request means is the face's. Here:

* **Framing** (:class:`tenure.compat.dflockd.codec.LineReader`): a line longer than its
  cap is answered ``error`` and the connection closed as soon as the cap is passed,
  without waiting for its newline (a client streaming a line without one would be
  read for ever). A request that stalls halfway is answered ``error`` and closed
  after ``frame_timeout``; between requests there is no timeout (docs/dflockd.md).
* **The handshake**: with an auth file, the first request must be ``auth`` with a
  read-write secret allowed on both dflockd nodes. Anything else (another command,
  a wrong secret, a malformed or over-long request, a stall) is answered
  ``error_auth`` after a short pause (brute-force damping) and closed, as dflockd
  does.
* **Fair share** (as native connections, :mod:`tenure.server._net.accept`): after
  ``turn`` requests in a row the other connections go first, and while
  ``pause_unread`` bytes of answers wait unsent (the client does not read) nothing
  more is read or served; a client that leaves them unread for ``frame_timeout``
  is dropped. These three are the server's settings (:class:`Pace`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from tenure.compat.dflockd import codec as wire
from tenure.compat.dflockd.holds import DflockdConn, node_of
from tenure.compat.dflockd.metrics import DflockdCounts
from tenure.server.plug import Access, ServeConfig, Token, Tokens, peer_host, reset

log = logging.getLogger("tenure.server")

READ_SIZE: Final = 65536
#: How long a failed ``auth`` waits before the close (brute-force damping, as dflockd).
AUTH_PAUSE: Final = 0.1


@dataclass(frozen=True, slots=True)
class Pace:
    """The server's settings a dflockd connection is read by (the module docstring)."""

    frame_timeout: float = 15.0  # a request must arrive whole within this (0: no limit)
    turn: int = 64  # requests served in a row before the other connections' turn
    pause_unread: int = 65536  # bytes of answers unsent before reading stops

    @classmethod
    def from_config(cls, config: ServeConfig) -> Pace:
        """``--idle-timeout``, ``--max-requests-per-turn`` and ``--pause-unread``."""
        return cls(config.idle_timeout, config.max_requests_per_turn, config.pause_unread)


class LineLoop:
    """Reads the requests of dflockd connections and has them answered (module docstring).

    ``answer(conn, request)`` is the face's answer to an authenticated request;
    ``send(conn, line)`` queues a line for the connection; ``disconnected(conn)``
    is called once its loop is over; ``observer`` hears of every request answered.
    """

    def __init__(
        self,
        pace: Pace,
        tokens: Tokens | None,
        *,
        answer: Callable[[DflockdConn, wire.Request], Awaitable[bytes]],
        send: Callable[[DflockdConn, bytes], None],
        disconnected: Callable[[DflockdConn], None],
        observer: DflockdCounts | None = None,
    ) -> None:
        self.pace = pace
        self.observer = observer  # told of each answered request (None: not measured)
        self.tokens = tokens
        self._answer = answer
        self._send = send
        self._disconnected = disconnected

    async def serve(self, conn: DflockdConn, first: bytes) -> None:
        """Answer requests until the peer leaves or the stream cannot be trusted."""
        if first:  # (feeding b"" would mean the end of the stream)
            conn.codec.feed(first)
        served = 0
        try:
            while not conn.closing:
                item = conn.codec.next_frame()
                if item is None:
                    if conn.codec.eof:
                        return
                    conn.codec.feed(await self._read_more(conn))
                    continue
                served += 1
                if served >= self.pace.turn:
                    served = 0
                    await asyncio.sleep(0)  # every other connection's turn first
                if not await self._answers_taken(conn):
                    return
                if isinstance(item, wire.FrameError):
                    await self._frame_error(conn, item)
                else:
                    await self._request(conn, item)
        finally:
            self._disconnected(conn)

    async def _answers_taken(self, conn: DflockdConn) -> bool:
        """Wait while the answers to ``conn`` pile up unsent; False if it never reads them.

        Within ``frame_timeout`` (dflockd's write timeout: a client that does not read
        is dropped), or for ever without one.
        """
        if conn.writer.transport.get_write_buffer_size() <= self.pace.pause_unread:
            return True
        limit = self.pace.frame_timeout
        try:
            async with asyncio.timeout(limit if limit > 0 else None):
                await conn.writer.drain()
        except TimeoutError:
            log.info("dflockd: answers unread; closing", extra={"fields": {"peer": conn.peer}})
            reset(conn.writer.transport)
            return False
        return True

    async def _read_more(self, conn: DflockdConn) -> bytes:
        """The next bytes; between requests no limit, within one ``frame_timeout``."""
        limit = self.pace.frame_timeout
        if not conn.codec.in_frame or limit <= 0:
            return await conn.reader.read(READ_SIZE)
        try:
            async with asyncio.timeout(limit):
                return await conn.reader.read(READ_SIZE)
        except TimeoutError:
            log.info("dflockd: request stalled; closing", extra={"fields": {"peer": conn.peer}})
            if conn.authenticated:
                self._send(conn, wire.ERROR)
            else:
                await self._refuse_auth(conn)
            conn.closing = True
            return b""

    async def _frame_error(self, conn: DflockdConn, error: wire.FrameError) -> None:
        log.debug("dflockd: bad request from %s: %s", conn.peer, error.reason)
        if not conn.authenticated:
            await self._refuse_auth(conn)
            return
        self._answered(conn, "", wire.ERROR)
        conn.closing = error.fatal

    async def _request(self, conn: DflockdConn, frame: wire.Frame) -> None:
        try:
            request = wire.parse(frame)
        except wire.RequestError as error:
            if not conn.authenticated:
                await self._refuse_auth(conn)
                return
            log.debug("dflockd: bad request from %s: %s", conn.peer, error)
            self._answered(conn, frame.command, wire.ERROR)
            return
        if not conn.authenticated:
            if isinstance(request, wire.Auth) and self.tokens is not None:
                # Throttled per address (issue 28): a blocked one is refused unheard,
                # and silently (the throttle logs the block once).
                throttle, addr = self.tokens.throttle, peer_host(conn.peer)
                now = time.monotonic()  # (the throttle is shared: every listener's clock)
                if not throttle.check(addr, now):
                    conn.closing = True
                    await asyncio.sleep(AUTH_PAUSE)
                    self._answered(conn, frame.command, wire.ERROR_AUTH)
                    return
                token = self._authorized(request.secret)
                if token is not None:  # (forgets no failure: see the throttle)
                    conn.authenticated = True
                    conn.token = token.name
                    self._answered(conn, frame.command, wire.OK)
                    return
                throttle.failed(addr, now)
            await self._refuse_auth(conn, frame.command)
            return
        self._answered(conn, frame.command, await self._answer(conn, request))

    def _answered(self, conn: DflockdConn, command: str, answer: bytes) -> None:
        """Send ``answer`` to a request whose command line was ``command`` (and count it)."""
        self._send(conn, answer)
        if self.observer is not None:
            self.observer.request(command, answer)

    def _authorized(self, secret: str) -> Token | None:
        """The token of ``secret`` if it may use dflockd's nodes, else None."""
        token = None if self.tokens is None else self.tokens.authenticate(secret)
        if (
            token is not None
            and token.access is Access.READ_WRITE
            and all(token.may_touch(node_of(kind)) for kind in (False, True))
        ):
            return token
        return None

    async def _refuse_auth(self, conn: DflockdConn, command: str = "") -> None:
        fields = {"peer": conn.peer, "protocol": "dflockd"}
        log.warning(
            "dflockd authentication failed", extra={"event": "auth_failed", "fields": fields}
        )
        conn.closing = True
        await asyncio.sleep(AUTH_PAUSE)
        self._answered(conn, command, wire.ERROR_AUTH)
