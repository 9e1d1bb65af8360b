"""The dashboard's event stream (``/dashboard/api/events``): a view whenever it
changed, at most ``--dashboard-rate`` times a second, for :data:`STREAM_SECONDS`;
at most ``--dashboard-max-streams`` open at once, and
``--dashboard-max-streams-per-token`` for one token (one address without tokens).
"""

from __future__ import annotations

import asyncio
from typing import Final

from aiohttp import web

from tenure.server._http.application import READINESS
from tenure.server._http.dashboard_answers import HEADERS, error_response, view_message
from tenure.server._http.dashboard_views import DASHBOARD
from tenure.server._http.viewer import Viewer

__all__ = ["KEEPALIVE_SECONDS", "RETRY_MS", "STREAM_SECONDS", "events"]

#: An event stream ends after this many seconds; the page's EventSource reconnects at
#: once (``retry``), so a stream is a bounded loop and a page never sees a gap.
STREAM_SECONDS: Final = 300.0
#: A stream with nothing new sends a comment this often (proxies keep it open, and a
#: page that left is noticed).
KEEPALIVE_SECONDS: Final = 15.0
#: How often the page's EventSource reconnects after a stream ended, in milliseconds.
RETRY_MS: Final = 1000


def _stream_holder(viewer: Viewer, request: web.Request) -> str:
    """Whose share of the event streams a request's counts against: its token's, or
    without tokens its address's."""
    if viewer.token is not None:
        return "token:" + viewer.token.name
    return "address:" + (request.remote or "")


async def events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: a view whenever it changed, for :data:`STREAM_SECONDS`."""
    dashboard = request.app[DASHBOARD]
    viewer = dashboard.viewer(request)
    if not isinstance(viewer, Viewer):
        return viewer
    server = dashboard.server
    most = server.config.dashboard_max_streams if server is not None else 1
    if dashboard.streams >= most:
        # The page's EventSource tries again after ``retry`` (its last one, or its own).
        why = f"dashboard_max_streams ({most}) event streams are open; try again later"
        return error_response(503, why)
    holder = _stream_holder(viewer, request)
    per_holder = server.config.dashboard_max_streams_per_token if server is not None else 1
    if dashboard.streams_of.get(holder, 0) >= per_holder:
        # One token (one address without tokens) must not take every stream.
        who = "this token" if viewer.token is not None else "this address"
        why = (
            f"dashboard_max_streams_per_token ({per_holder}) event streams are open for "
            f"{who}; close a page or try again later"
        )
        return error_response(429, why)
    response = web.StreamResponse(
        headers={**HEADERS, "Content-Type": "text/event-stream", "X-Accel-Buffering": "no"}
    )
    dashboard.streams += 1
    dashboard.streams_of[holder] = dashboard.streams_of.get(holder, 0) + 1
    loop = asyncio.get_running_loop()
    started = last_write = loop.time()
    sent = None
    try:
        await response.prepare(request)
        await response.write(f"retry: {RETRY_MS}\n\n".encode())
        # Bounded: at most STREAM_SECONDS * rate turns (the rate is at most 20).
        while loop.time() - started < STREAM_SECONDS:
            if request.app[READINESS].state == "stopping":
                break
            if request.transport is None or request.transport.is_closing():
                break  # the page left: give its slot back now, not at the next write
            view = await dashboard.view(viewer)
            if view != sent:
                await response.write(f"data: {view_message(view)}\n\n".encode())
                sent, last_write = view, loop.time()
            elif loop.time() - last_write >= KEEPALIVE_SECONDS:
                await response.write(b": keep-alive\n\n")
                last_write = loop.time()
            await asyncio.sleep(dashboard.interval())
    except ConnectionError:
        pass  # the page left
    finally:
        dashboard.streams -= 1
        left = dashboard.streams_of[holder] - 1
        if left:
            dashboard.streams_of[holder] = left
        else:
            del dashboard.streams_of[holder]
    return response
