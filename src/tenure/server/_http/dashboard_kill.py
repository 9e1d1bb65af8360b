"""The dashboard's "end session" (``POST /dashboard/api/kill``): KillSession as an
operator, allowed where the wire protocol would allow it
(:meth:`~tenure.server._http.viewer.Viewer.kill_denial`), never on a standby,
answered once committed, audited and logged.
"""

from __future__ import annotations

import functools
import logging
from typing import Final

from aiohttp import web

from tenure._core import KillSession
from tenure.errors import ErrorCode, TenureError, code_of
from tenure.server._http.cluster_view import dashboard_url
from tenure.server._http.dashboard_answers import HEADERS, error_response, json_body
from tenure.server._http.dashboard_views import DASHBOARD
from tenure.server._http.viewer import Viewer
from tenure.server._net.throttle import peer_host

__all__ = ["kill"]

log = logging.getLogger("tenure.server")


async def kill(request: web.Request) -> web.Response:
    """End a session (KillSession) as an operator: ``{"node": ..., "session_id": ...}``.

    Answered only once the kill is committed to the journal, as the wire would.
    """
    dashboard = request.app[DASHBOARD]
    viewer = dashboard.viewer(request)
    if not isinstance(viewer, Viewer):
        return viewer
    body = await json_body(request)
    if isinstance(body, web.Response):
        return body
    node, session_id = body.get("node"), body.get("session_id")
    if not isinstance(node, str) or type(session_id) is not int or session_id <= 0:
        return error_response(400, "send a node (a string) and a session_id (a positive integer)")
    server = dashboard.server
    if server is None or server.stopping:
        return error_response(503, "the server is not serving")
    if not server.role.leading:
        url = dashboard_url(server.role.leader("http"))
        where = f"on the leader's dashboard, {url}" if url else "on the leader (none known now)"
        return error_response(503, f"this server is a standby: end sessions {where}", leader=url)
    token = viewer.token.name if viewer.token is not None else None
    audited = functools.partial(
        server.audit.record,
        "kill_session",
        token=token,
        address=peer_host(request.remote or ""),
        command="KillSession",
        node=node,
        session_id=session_id,
        via="dashboard",
    )
    why = viewer.kill_denial(node, session_id)
    if why is not None:
        audited(outcome="permission_denied", why=why)
        return error_response(403, why)
    try:
        if token is not None:  # (a request of its token's, as on the wire: its rate)
            server.host.admit_request(token)
        server.host.execute(KillSession(node, session_id))
        await server.host.committed()  # durable before it is acknowledged
    except TenureError as error:
        audited(outcome=code_of(error).name.lower(), why=str(error))
        return error_response(_STATUS.get(code_of(error), 409), str(error))
    if server.host.dead:
        audited(outcome="unavailable", why="the server failed to log the change")
        return error_response(503, "the server failed to log the change")
    audited(outcome="ok")
    fields = {
        "node": node,
        "session_id": session_id,
        "token": viewer.token.name if viewer.token is not None else None,
        "peer": request.remote,
    }
    log.info("session ended by an operator", extra={"event": "session_killed", "fields": fields})
    return web.json_response({"ended": session_id}, headers=HEADERS)


_STATUS: Final = {
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.INVALID_ARGUMENT: 400,
    ErrorCode.PERMISSION_DENIED: 403,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.NOT_LEADER: 503,  # (it stopped leading since the check above)
    ErrorCode.LIMIT_EXCEEDED: 429,  # (its token's requests_per_second)
}
