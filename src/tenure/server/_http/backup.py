"""``POST /admin/backup``: a backup of the running server's state, streamed (``tenure backup``).

An admin act: it needs ``--auth-file`` and, as ``Authorization: Bearer``, the secret of
a read-write token limited to no nodes (a backup reads every node); guesses count
against the address as every bearer secret does (:mod:`tenure.server._http.guessing`).
A cluster's standby answers 421 with the leader's HTTP address in ``Tenure-Leader``
(the CLI asks it there).

The body is a backup file (:mod:`tenure.server._durability.backup`), read from a
:class:`~tenure.server._backups.BackupStream` (the loop walks none of the state: a
forked child or, on a cluster's leader, a process of its own does), as the native
protocol's ReadBackup reads it (:mod:`tenure.server._server_acts`); the backups of
both count against ``--max-backups`` together. Each backup is logged (event
``backup``: ``loop_items``, the engine's items walked on the loop, always 0;
``chunks``; ``last_token``) and audited.

A backup that moves less than 256 KiB in ``--backup-timeout`` seconds (its client
stopped reading, or trickles; :mod:`tenure.server._backups`) is given up: its
connection is reset (the status, 200, is long sent: a body cut short is how its client
learns), its child killed and reaped, its place freed; logged (event
``backup_timeout``) and audited (``outcome``: ``timeout``).
"""

from __future__ import annotations

import asyncio
from typing import Final

from aiohttp import web

from tenure.server._backups import BackupStream, log_backup, log_stalled
from tenure.server._http.admin import admin_token
from tenure.server._http.application import SERVING
from tenure.server._net.outbox import reset
from tenure.server._serve import Server
from tenure.server._server_acts import backup_source

__all__ = ["LEADER_HEADER", "add_backup_routes"]

#: The response header a standby names the leader's HTTP address in.
LEADER_HEADER: Final = "Tenure-Leader"
#: The server's version as a backup's header states it (the endpoint's metrics know it).
_VERSION_KEY: Final = web.AppKey("backup_version", str)


def _text(status: int, why: str) -> web.Response:
    return web.Response(status=status, text=f"{why}\n")


async def backup(request: web.Request) -> web.StreamResponse:
    """Stream a backup of the state (module docstring)."""
    server = request.app[SERVING].server
    if server is None:
        return web.Response(status=503, text="not serving yet\n")
    without = (
        "this server has no auth file, so no admin token: take the backup over its native "
        "port from the server's own host (tenure backup --url tenure://127.0.0.1:PORT FILE), "
        "or start it with --auth-file and use an admin token"
    )
    admin = admin_token(request, server.gate.tokens, "take a backup", _text, without)
    if isinstance(admin, web.Response):
        return admin
    if not server.role.leading:
        leader = server.role.leader("http")
        headers = {LEADER_HEADER: leader} if leader else {}
        where = f"; the leader is at {leader}" if leader else "; no leader is known"
        return web.Response(status=421, text=f"not the leader{where}\n", headers=headers)
    full = server.backup_slots.take()
    if full is not None:
        server.audit.record(
            "backup", token=admin.name, address=request.remote, outcome="limit_exceeded", why=full
        )
        return _text(429, full)
    try:
        return await _stream(request, server, admin.name)
    finally:
        server.backup_slots.give_back()


async def _stream(request: web.Request, server: Server, admin: str) -> web.StreamResponse:
    """Take the backup and stream it (the caller counted it in)."""
    # (Made before any await: a single server's child is forked now.)
    stream = BackupStream(backup_source(server, request.app.get(_VERSION_KEY, "")))
    task = asyncio.current_task()
    assert task is not None
    # Stalled, the handler is stopped wherever it waits: on a write its client does
    # not take, or on a child or process that gives nothing.
    stream.watch(server.config.backup_timeout, task.cancel)
    response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
    sent = 0  # the bytes written (the last write's, once it returned)
    try:
        await response.prepare(request)
        while (part := await stream.next()) is not None:
            await response.write(part)
            sent += len(part)
        await response.write_eof()
    except asyncio.CancelledError:
        if not stream.stalled or task.uncancel() > 0:
            raise  # (stopped by someone else too: the server going away)
        await stream.close()
        _stalled(request, server, admin, stream, sent)
        return response
    finally:
        await stream.close()
    fields = log_backup(stream)
    server.audit.record("backup", token=admin, address=request.remote, outcome="ok", **fields)
    return response


def _stalled(
    request: web.Request, server: Server, admin: str, stream: BackupStream, sent: int
) -> None:
    """The backup stalled (module docstring): its connection reset, logged, audited."""
    if request.transport is not None:
        # A reset, not a close: a client that does not read would keep what the
        # kernel holds for it (and its connection) for as long as it likes.
        reset(request.transport)
    why = log_stalled(stream, str(request.remote), "http", sent)
    server.audit.record("backup", token=admin, address=request.remote, outcome="timeout", why=why)


def add_backup_routes(app: web.Application, version: str = "") -> None:
    """``POST /admin/backup``; ``version``: the server's, stated in each backup."""
    app[_VERSION_KEY] = version
    app.router.add_post("/admin/backup", backup)
