"""The dashboard's page, with the first view in it, its scripts and style, and the view
as JSON for scripts (``/dashboard/api/board``).

The page (``static/dashboard.html``) carries the view its viewer sees now, as the API
answers it, in ``<script type="application/json" id="first-view">``: data, never run
(the Content-Security-Policy allows no inline script, and none is needed), with
``<``, ``>`` and ``&`` escaped so that no name can end the element. Its scripts
(``app.js``, and ``recipes.js``: the kind column) are render-blocking
(``blocking="render"``): they draw that view before the browser paints anything, so
the first thing a page shows is the state, never an empty "connecting" page; its
event stream then keeps it current. A viewer refused (no token, or its
address blocked: :meth:`~tenure.server._http.dashboard_views.Dashboard.viewer`) gets
``{"refused": STATUS, "answer": ...}`` instead, and the page opens on its login form
(401) or says why (429).
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Final

from aiohttp import web

from tenure.server._http.dashboard_answers import HEADERS, view_message
from tenure.server._http.dashboard_views import DASHBOARD
from tenure.server._http.viewer import Viewer

__all__ = ["FIRST_VIEW", "STATIC", "board_now", "inline_json", "no_icon", "page", "static"]

#: Where the page's template takes the first view.
FIRST_VIEW: Final = "{{first-view}}"

#: The page's files besides the page itself: path -> (file in ``static/``, content type).
STATIC: Final = {
    "/dashboard/recipes.js": ("dashboard_recipes.js", "text/javascript"),
    "/dashboard/app.js": ("dashboard.js", "text/javascript"),
    "/dashboard/app.css": ("dashboard.css", "text/css"),
    "/dashboard/contention.js": ("dashboard_contention.js", "text/javascript"),
}

#: What JSON inside an HTML element must not contain as itself (``</script>``, an
#: entity): each written as the JSON escape that means the same character.
_HTML_UNSAFE: Final = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


@functools.cache
def _static_text(name: str) -> str:
    """A file of ``static/`` (package data, shipped in the wheel), read once."""
    return resources.files("tenure.server._http").joinpath("static", name).read_text("utf-8")


def inline_json(text: str) -> str:
    """JSON ``text`` as it may stand inside an HTML element (module docstring): the same
    value when parsed, no ``<``, ``>`` or ``&`` in it."""
    return text.translate(_HTML_UNSAFE)


async def page(request: web.Request) -> web.Response:
    """The page, with the view its viewer sees now in it (module docstring)."""
    dashboard = request.app[DASHBOARD]
    viewer = dashboard.viewer(request)
    if isinstance(viewer, Viewer):
        first = view_message(await dashboard.view(viewer))
    else:
        first = f'{{"refused":{viewer.status},"answer":{viewer.text or "{}"}}}'
    html = _static_text("dashboard.html").replace(FIRST_VIEW, inline_json(first), 1)
    return web.Response(text=html, content_type="text/html", headers=HEADERS)


async def static(request: web.Request) -> web.Response:
    """The page's scripts and style."""
    name, content_type = STATIC[request.path]
    return web.Response(text=_static_text(name), content_type=content_type, headers=HEADERS)


async def no_icon(request: web.Request) -> web.Response:
    """No icon (204): a browser asks for one with every page."""
    return web.Response(status=204, headers=HEADERS)


async def board_now(request: web.Request) -> web.Response:
    """One view, as JSON (what the event stream pushes; for scripts and curl)."""
    dashboard = request.app[DASHBOARD]
    viewer = dashboard.viewer(request)
    if not isinstance(viewer, Viewer):
        return viewer
    return web.Response(text=view_message(await dashboard.view(viewer)), headers=HEADERS)
