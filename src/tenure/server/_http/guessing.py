"""Guessing a token's secret over HTTP, throttled per peer address.

The dashboard's login and every ``Authorization: Bearer`` secret (the dashboard's API,
``/metrics`` with ``--metrics-auth``) go through the auth file's
:class:`~tenure.server._net.throttle.Throttle` (``--auth-failures-per-minute``,
``--auth-block-time``), the one every listener shares: an address that fails that
often within a minute, on any listener, is answered 429 here, with ``Retry-After``,
for the block time, a good secret included (so a correct guess cannot be told from
a wrong one while blocked). Login tickets are not counted: a forged one cannot be
guessed (it is signed), and an expired cookie is no attack.
"""

from __future__ import annotations

import math
import time

from aiohttp import web

from tenure.server._net.auth import Tokens
from tenure.server._net.throttle import peer_host

__all__ = ["attempt", "blocked"]


def _address(request: web.Request) -> str:
    return peer_host(request.remote or "")


def blocked(request: web.Request, tokens: Tokens) -> web.Response | None:
    """The 429 for a request from a blocked address, or None: it may go on."""
    throttle = tokens.throttle
    # (time.monotonic: the clock of the shared throttle, whatever the listener.)
    if throttle.check(_address(request), time.monotonic()):
        return None
    retry = max(1, math.ceil(throttle.block_time))
    return web.json_response(
        {"error": "too many failed authentications from this address: try again later"},
        status=429,
        headers={"Retry-After": str(retry), "Cache-Control": "no-store"},
    )


def attempt(request: web.Request, tokens: Tokens, good: bool) -> None:
    """Count one checked secret: a wrong one is a failure of its address (a good one
    forgets nothing: the throttle's docstring says why)."""
    if not good:
        tokens.throttle.failed(_address(request), time.monotonic())
