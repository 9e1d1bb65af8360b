"""The dashboard's contention view: the most contended names, and who blocks one.

``GET /dashboard/api/top?window=60&sort=wait&limit=20`` answers what ``tenure top``
does (:mod:`tenure._core.contention`) over the nodes the viewer may see: the names
of the others are never in it (the engine's answer is read whole, every kept name,
then cut to the viewer's). ``GET /dashboard/api/why?node=N&name=M`` answers what
``tenure why`` does (:mod:`tenure._core.blocking`) for a name of a node the viewer
may see (403 otherwise, naming nothing of it): the page draws its chain as a graph.
Both read the engine on the server's loop, as the wire's TopNames and WhyName do (a
bounded step: the sketch's capacity, the why look limit); a standby answers from
its replica.

**Read at most once per interval.** Every open page asks for the top table at each
update, and one read looks at every kept name (up to ``--contention-names``, 10,000:
about 10 ms). So the engine's answer for a window and a sort is kept for one update
interval (``1 / --dashboard-rate``) and cut to each viewer's nodes from there: however
many pages and viewers, the engine is read at most once per interval for each of the
ten (window, sort) pairs. A page sees its names at most one interval late, as it
sees the rest of the dashboard.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Final

from aiohttp import web

from tenure._core.blocking import why
from tenure._core.contention import top
from tenure._core.top_report import SORTS, TOP_PAGE
from tenure._core.values import MAX_PAGE
from tenure._core.why_report import hidden
from tenure.errors import ErrorCode, TenureError, code_of
from tenure.server._http.dashboard_answers import HEADERS, error_response
from tenure.server._http.dashboard_views import DASHBOARD
from tenure.server._http.viewer import Viewer

__all__ = ["WHY_SHOWN", "top_answer", "why_answer"]

#: The holders, waiters and chain links the page's graph shows of one name at most.
WHY_SHOWN: Final = 20


def _int(request: web.Request, name: str, default: int, low: int, high: int) -> int | None:
    """Query parameter ``name`` as an int in [low, high] (``default`` if absent)."""
    text = request.query.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        return None
    return value if low <= value <= high else None


async def top_answer(request: web.Request) -> web.Response:
    """The most contended names the viewer may see (module docstring)."""
    dashboard = request.app[DASHBOARD]
    viewer = dashboard.viewer(request)
    if not isinstance(viewer, Viewer):
        return viewer
    window = _int(request, "window", 60, 60, 300)
    limit = _int(request, "limit", TOP_PAGE, 1, MAX_PAGE)
    sort = request.query.get("sort", "wait")
    if window not in (60, 300) or limit is None or sort not in SORTS:
        return error_response(
            400, f"window is 60 or 300, sort one of {', '.join(SORTS)}, limit 1 to {MAX_PAGE}"
        )
    server = dashboard.server
    if server is None:
        return error_response(503, "the server is not serving")
    now = time.monotonic()
    cached = dashboard.tops.get((window, sort))
    if cached is not None and now - cached[0] < dashboard.interval():
        every = cached[1]
    else:
        every = top(server.host.engine, "", float(window), sort, MAX_PAGE, server.host.clock.now())
        dashboard.tops[window, sort] = (now, every)
    names = [stat for stat in every.names if viewer.may_see(stat.node)][:limit]
    answer = {
        "window": every.window,
        "sort": every.sort,
        "names": [dataclasses.asdict(stat) for stat in names],
        "kept": every.kept if viewer.prefixes is None else None,  # (others' names: not said)
        "capacity": every.capacity,
    }
    return web.json_response(answer, headers=HEADERS)


async def why_answer(request: web.Request) -> web.Response:
    """Who blocks ``name`` of ``node``, for the page's graph (module docstring)."""
    dashboard = request.app[DASHBOARD]
    viewer = dashboard.viewer(request)
    if not isinstance(viewer, Viewer):
        return viewer
    node, name = request.query.get("node", ""), request.query.get("name", "")
    if not node or not name:
        return error_response(400, "name a node and a name (?node=...&name=...)")
    if not viewer.may_see(node):
        return error_response(403, "this token may not see that node")
    server = dashboard.server
    if server is None:
        return error_response(503, "the server is not serving")
    try:
        report = why(server.host.engine, node, name, 0, WHY_SHOWN, server.host.clock.now())
        report = hidden(report, viewer.may_see)  # (a chain may lead into others' nodes)
    except TenureError as error:
        return error_response(404 if code_of(error) is ErrorCode.NOT_FOUND else 400, str(error))
    return web.json_response(dataclasses.asdict(report), headers=HEADERS)
