"""What every answer of the dashboard carries, and the request body its changing
requests send (:mod:`tenure.server._http.dashboard` says why they must be JSON).

Every answer has :data:`HEADERS`: a Content-Security-Policy that allows no inline
script and nothing from elsewhere, and no framing (clickjacking of "end session"),
``nosniff``, no referrer and no caching. An error is ``{"error": MESSAGE, ...}``.
"""

from __future__ import annotations

import json
import time
from typing import Final

from aiohttp import web

__all__ = [
    "HEADERS",
    "MAX_BODY",
    "error_response",
    "json_body",
    "unauthorized",
    "view_message",
]

#: Largest request body accepted by the dashboard's POSTs, in bytes.
MAX_BODY: Final = 4096

HEADERS: Final = {
    # No inline script, nothing from elsewhere, no framing (clickjacking of "end session").
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def error_response(status: int, message: str, **more: object) -> web.Response:
    """A JSON error: ``{"error": message, **more}`` with ``status``."""
    return web.json_response({"error": message, **more}, status=status, headers=HEADERS)


def unauthorized() -> web.Response:
    """401: a token is needed (the page shows its login form)."""
    return error_response(
        401, "a token is needed: log in, or send Authorization: Bearer", login=True
    )


def view_message(view: str) -> str:
    """A view (JSON text) with the server's time now, as the page and the API get it
    (the time is kept out of the view: it would always change)."""
    return f'{{"now":{time.time()!r},"view":{view}}}'


async def json_body(request: web.Request) -> dict[str, object] | web.Response:
    """The JSON object a changing request sends (see the module docstring), or the 4xx."""
    if request.content_type != "application/json":
        return error_response(415, "send application/json")
    if request.content_length is None or request.content_length > MAX_BODY:
        return error_response(413, f"the body must be given and at most {MAX_BODY} bytes")
    try:
        body = json.loads(await request.read())
    except (ValueError, UnicodeError):
        return error_response(400, "the body is not JSON")
    except RecursionError:  # e.g. 4,000 "[": deeper than Python's JSON reader goes
        return error_response(400, "the body is JSON nested too deeply")
    if not isinstance(body, dict):
        return error_response(400, "the body must be a JSON object")
    return body
