"""A peer's malformed HTTP request, as the endpoint logs it: one info line, no traceback.

aiohttp logs every request it cannot parse (a bad request line, header, length,
chunk, an over-long URL or header...) as an error with a traceback, and answers it
400. Anyone who can reach the port can send one, authenticated or not: that is noise
an operator must not be paged for, and a header that does not parse may carry a
secret (an ``Authorization`` or ``Cookie`` line). :class:`PeerFaultLog` is the
logger aiohttp's request handler gets instead (``AppRunner(logger=...)``): a parse
error is one ``info`` line naming the peer, the answer's status and the error's
kind, never its text; anything else (a fault of ours) is logged as aiohttp would.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from aiohttp.http_exceptions import HttpProcessingError

__all__ = ["PeerFaultLog"]

#: The event of the one line a malformed request is logged as.
EVENT: Final = "http_bad_request"

#: Where that line goes: the server's log, at info (aiohttp's loggers show warnings only).
log = logging.getLogger("tenure.server")


class PeerFaultLog(logging.LoggerAdapter[logging.Logger]):
    """aiohttp's server logger, where a peer's malformed request is one info line."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        super().__init__(logger or logging.getLogger("aiohttp.server"), {})

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        """Log as the wrapped logger would, unless ``exc_info`` is a peer's parse error."""
        fault = kwargs.get("exc_info")
        if isinstance(fault, HttpProcessingError):
            # aiohttp's message is "Error handling request from %s" with the peer.
            peer = args[0] if args else None
            fields: Mapping[str, object] = {
                "peer": peer,
                "status": fault.code or 400,
                "error": type(fault).__name__,  # not its text: it may quote a header
            }
            log.info(
                "malformed HTTP request answered %s",
                fault.code or 400,
                extra={"event": EVENT, "fields": fields},
            )
            return
        super().log(level, msg, *args, **kwargs)
