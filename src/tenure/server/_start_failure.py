"""Why ``tenure serve`` could not start, in one line an operator can act on.

A start fails on its data directory (another server holds it, the server's user may
not use it, its log is damaged) or on a port (taken, privileged, on an address that
is not this machine's). Each is logged once, at ``critical``, as the event
``start_failed``: the message says the reason and what to do about it (for a port in
use, the flag and the variable that pick another), the field ``reason`` names it for
machines (``port_in_use``, ``data_dir_locked``...), and there is no traceback: the
reason is all there is to say. The server then exits 1.
"""

from __future__ import annotations

import errno
import logging
import os
import pwd
import socket
from dataclasses import dataclass
from pathlib import Path

from tenure.errors import CorruptLogError
from tenure.server._config.serve_config import env_name
from tenure.server._durability.dirlock import DataDirLockedError

#: The errors that say the server's user may not do what it tried.
_DENIED = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


@dataclass(frozen=True, slots=True)
class StartFailure:
    """A failed start: ``reason`` names it for machines, ``message`` says it for people."""

    reason: str
    message: str
    holder: int | None = None  # data_dir_locked: the pid of the server holding it

    def log(self, log: logging.Logger) -> None:
        """Log it: one ``critical`` line, event ``start_failed``."""
        fields: dict[str, object] = {"reason": self.reason}
        if self.holder is not None:
            fields["holder_pid"] = self.holder
        log.critical(self.message, extra={"event": "start_failed", "fields": fields})


def _pick(setting: str) -> str:
    """How an operator sets ``setting`` otherwise: its flag or its variable."""
    return f"{'--' + setting.replace('_', '-')} or {env_name(setting)}"


def listen_failure(
    error: OSError, host: str, port: int, *, setting: str, host_setting: str = "host"
) -> StartFailure:
    """Why a listener could not be bound on ``host``:``port``, the value of ``setting``.

    An error without an errno (a listening face's library's, such as gRPC's) is told
    by binding a socket there once more, to find out.
    """
    code = error.errno if error.errno is not None else _bind_errno(host, port)
    where = f"port {port} on {host}"
    if code == errno.EADDRINUSE:
        free = " (--port 0 lets the system pick a free one)" if setting == "port" else ""
        return StartFailure(
            "port_in_use",
            f"{where} is in use: pick another with {_pick(setting)}{free}, "
            "or stop what listens there",
        )
    if code in _DENIED:
        privileged = " (ports below 1024 need privileges)" if 0 < port < 1024 else ""
        return StartFailure(
            "port_denied",
            f"{where}: permission denied{privileged}: pick another with {_pick(setting)}",
        )
    if code == errno.EADDRNOTAVAIL or isinstance(error, socket.gaierror):
        return StartFailure(
            "address_unavailable",
            f"{host!r} is not an address of this machine ({error.strerror or error}): "
            f"pick another with {_pick(host_setting)}",
        )
    return StartFailure(
        "cannot_listen",
        f"cannot listen on {where} ({_pick(setting)}): {error.strerror or error}",
    )


def data_dir_failure(data_dir: Path, error: OSError | CorruptLogError) -> StartFailure:
    """Why the data directory ``data_dir`` could not be locked, read or written."""
    elsewhere = f"pick another with {_pick('data_dir')}"
    if isinstance(error, CorruptLogError):
        return StartFailure(
            "corrupt_log",
            f"data directory {data_dir} cannot be trusted: {error}; the server does not "
            f"start on damaged data: `tenure repair {data_dir}` explains the damage and can "
            "cut the log there; or restore it from a backup, or move it aside to start "
            "empty (docs/operations.md, 'The data directory')",
        )
    pid = error.pids[0] if isinstance(error, DataDirLockedError) and error.pids else None
    if isinstance(error, DataDirLockedError) and not error.lock_file:
        # Its lock file was deleted: name the server by its pid (from /proc/locks).
        who = f"pid {pid}" if pid is not None else "a process"
        return StartFailure(
            "data_dir_locked",
            f"data directory {data_dir} is in use by another tenure server ({who} holds "
            f"the directory itself; its lock file {data_dir / 'lock'} was deleted): stop "
            f"that server, or {elsewhere}",
            pid,
        )
    if isinstance(error, BlockingIOError):
        who = f"pid {pid}; " if pid is not None else ""
        return StartFailure(
            "data_dir_locked",
            f"data directory {data_dir} is in use by another tenure server ({who}it holds "
            f"{data_dir / 'lock'}): stop that server, or {elsewhere}",
            pid,
        )
    what = f" ({error.filename})" if error.filename else ""
    if error.errno in _DENIED:
        why = (error.strerror or "permission denied").lower()
        return StartFailure(
            "data_dir_denied",
            f"data directory {data_dir}: {why}{what}: the server runs as {_user()}, which "
            f"must be able to create, read and write it: change its owner or mode, or "
            f"{elsewhere}",
        )
    return StartFailure(
        "data_dir_unusable",
        f"data directory {data_dir}: {error.strerror or error}{what}: {elsewhere}",
    )


def _user() -> str:
    uid = os.geteuid()
    try:
        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:  # a uid without a name (a container's)
        return f"uid {uid}"


def _bind_errno(host: str, port: int) -> int | None:
    """The errno of binding ``host``:``port`` now (None: it binds)."""
    try:
        addresses = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return errno.EADDRNOTAVAIL
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as listeners do
            try:
                probe.bind(address)
            except OSError as error:
                return error.errno
    return None
