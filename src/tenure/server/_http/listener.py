"""The HTTP port's listener: TLS, a connection limit, and idle and header timeouts.

aiohttp's own site (``web.TCPSite``) accepts every connection and, before a request
arrives, keeps it for its keep-alive timeout (an hour in aiohttp 3.14); a client that
sends half a request line is kept as long. So 10,000 idle connections stay open and
about a thousand half-sent requests use up the process's file descriptors, which the
client port needs too. :class:`GuardedSite` listens instead, and puts a
:class:`_Guarded` protocol in front of each connection's aiohttp handler:

* at most ``--http-max-connections`` at once: one more is answered 503 and closed at
  once (so the others, and the native port, keep working); one log line per burst;
* ``--http-header-timeout``: a connection must send a whole request head (up to the
  blank line) that soon after it opened; a TLS handshake must end as soon;
* ``--http-idle-timeout``: a connection with no request in progress is closed after
  this long (aiohttp's keep-alive timeout, which also bounds a later request's head:
  aiohttp closes a keep-alive connection idle, or mid-head, that long after its last
  answer). A request being served (an event stream) is never cut by it.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, cast

from aiohttp import web

from tenure.errors import ConfigError

__all__ = ["BUSY", "Guard", "GuardedSite", "HttpLimits", "http_tls_context"]

log = logging.getLogger("tenure.server")

#: What a connection over the limit is told before it is closed.
BUSY: Final = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
    b"Connection: close\r\nContent-Length: 38\r\n\r\n"
    b"too many HTTP connections: try later\r\n"
)
#: The end of a request's head.
_HEAD_END: Final = b"\r\n\r\n"


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """The listener's settings (their defaults are the settings table's)."""

    max_connections: int = 256
    idle_timeout: float = 60.0
    header_timeout: float = 10.0
    tls: ssl.SSLContext | None = None


def http_tls_context(cert: Path | None, key: Path | None) -> ssl.SSLContext | None:
    """The SSL context of ``--http-tls-cert``/``--http-tls-key``, or None (plain HTTP).

    Raises:
        ConfigError: only one of them given, or a file that cannot be loaded.
    """
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise ConfigError("--http-tls-cert and --http-tls-key go together: give both or neither")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key, password=_no_password)
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(
            f"http_tls_cert {cert} / http_tls_key {key}: cannot load them as a PEM "
            f"certificate chain and its unencrypted private key ({error})"
        ) from None
    return context


def _no_password() -> bytes:
    # An encrypted key fails at start-up instead of prompting on the terminal.
    raise ConfigError("the HTTP TLS key is encrypted: give an unencrypted one")


class Guard:
    """The connections of one listener: how many are open, and the refusals logged."""

    def __init__(self, limits: HttpLimits) -> None:
        self.limits = limits
        self.open = 0
        #: Connections refused since the last one admitted (a burst: logged once).
        self.refused = 0

    def admit(self, peer: object) -> bool:
        """Whether one more connection may be served now (counted if so)."""
        if self.open < self.limits.max_connections:
            self.open += 1
            self.refused = 0
            return True
        if self.refused == 0:
            fields = {"limit": self.limits.max_connections, "peer": str(peer)}
            log.warning(
                "http connections refused: %d are open (--http-max-connections); "
                "more are refused without a log line until one is admitted again",
                self.open,
                extra={"event": "http_connections_refused", "fields": fields},
            )
        self.refused += 1
        return False

    def release(self) -> None:
        """An admitted connection closed."""
        self.open -= 1


class _Guarded(asyncio.Protocol):
    """One connection: counted, its first head timed, then aiohttp's handler's."""

    def __init__(self, make: Callable[[], asyncio.Protocol], guard: Guard) -> None:
        self._make = make
        self._guard = guard
        self._inner: asyncio.Protocol | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._tail = b""  # the last bytes seen, to find a head's end across reads

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports are not asyncio.Transport's subclasses, but are one.)
        transport = cast(asyncio.Transport, transport)
        if not self._guard.admit(transport.get_extra_info("peername")):
            transport.write(BUSY)
            transport.close()
            return
        self._inner = self._make()
        self._timer = asyncio.get_running_loop().call_later(
            self._guard.limits.header_timeout, transport.abort
        )
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._inner is None:
            return  # refused: closing
        if self._timer is not None:
            seen = self._tail + data
            if _HEAD_END in seen:
                self._timer.cancel()
                self._timer = None
                self._tail = b""
            else:
                self._tail = seen[-(len(_HEAD_END) - 1) :]
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return None if self._inner is None else self._inner.eof_received()

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._inner is not None:
            self._guard.release()
            self._inner.connection_lost(exc)
            self._inner = None


class GuardedSite(web.TCPSite):
    """aiohttp's TCP site, its connections through a :class:`Guard`."""

    def __init__(self, runner: web.AppRunner, host: str, port: int, limits: HttpLimits) -> None:
        super().__init__(runner, host, port, ssl_context=limits.tls, reuse_address=True)
        self.guard = Guard(limits)

    async def start(self) -> None:
        """Listen (as ``TCPSite.start``, with the guard's protocol)."""
        await web.BaseSite.start(self)  # registers the site with its runner
        server = self._runner.server
        assert server is not None
        guard = self.guard
        limits = guard.limits
        self._server = await asyncio.get_running_loop().create_server(
            lambda: _Guarded(server, guard),
            self._host,
            self._port,
            ssl=limits.tls,
            ssl_handshake_timeout=limits.header_timeout if limits.tls is not None else None,
            reuse_address=True,
        )
