"""This process's sessions for Celery tasks: one per recovery window, over the default client.

Every Singleton task a process runs holds its key in one session of that process
(per recovery window asked for), opened on first use on the default node, over
``tenure.sync.default_client()``, and kept: a worker process pays one session, not
one per task. The session is the worker's liveness: killed with ``-9``, its
connection closes, and the store frees what it held once the session's recovery
window has passed (``Singleton.recovery_window``; the node's default otherwise).

Fork safety. Celery's prefork pool forks its children from the main process: a
child must never use a session of its parent. The default client is an entry of the
process runtime (``tenure.sync.shared_client``'s): in a child its next call opens
the child's own connection, on a portal of the child's. Each session here is kept
with the portal it was opened on, and one kept with another portal (a parent's, or
a client's closed since) is not this process's: never used, never closed here. The
sessions are chosen on that portal's loop (one thread), so no lock is held that a
fork could leave held in the child: two threads that open one at once keep one and
close the other.

An ended session (lost, or closed with its client) is replaced on the next use. At
a worker's shutdown (``worker_process_shutdown`` in a prefork child,
``worker_shutdown`` in a solo or threads worker) the sessions are closed, so what
they hold is free at once instead of at the end of their window.
"""

from __future__ import annotations

import logging
import os
import socket

from celery import signals

import tenure.sync

__all__ = ["close_sessions", "process_session"]

log = logging.getLogger("tenure.contrib.celery")

Key = tuple[str, float | None]
#: This process's sessions by node and recovery window (None: the node's default),
#: each with the portal it was opened on; changed on that portal's loop only.
_sessions: dict[Key, tuple[tenure.sync.Portal, tenure.sync.Session]] = {}


def process_session(recovery_window: float | None) -> tenure.sync.Session:
    """This process's session on the default node with ``recovery_window``, opened on
    first use (or after the last one ended) and kept.

    Raises:
        ConfigError: no default backend or node (``tenure.configure``, ``TENURE_URL``).
        UnavailableError: the backend cannot be reached.
        NotFoundError: the default node does not exist.
    """
    key = (tenure.sync.configured().node, recovery_window)
    client = tenure.sync.default_client()
    portal = client.portal  # this process's (in a child made by fork: the child's own)
    kept = _current(key, portal)
    if kept is not None:
        return kept
    fresh = client.session(
        key[0],
        recovery_window=recovery_window,
        description=f"celery {socket.gethostname()} pid {os.getpid()}",
    )
    kept = portal.call(_keep, key, portal, fresh)
    if kept is not fresh:  # another thread's came first
        fresh.close()
    return kept


def _current(key: Key, portal: tenure.sync.Portal) -> tenure.sync.Session | None:
    """The session kept for ``key`` on ``portal``, if it has not ended."""
    entry = _sessions.get(key)
    if entry is None or entry[0] is not portal or entry[1].ended:
        return None
    return entry[1]


async def _keep(
    key: Key, portal: tenure.sync.Portal, fresh: tenure.sync.Session
) -> tenure.sync.Session:
    """On the portal's loop (one thread): the session kept for ``key``, ``fresh`` if none."""
    kept = _current(key, portal)
    if kept is None:
        _sessions[key] = (portal, kept := fresh)
    return kept


def close_sessions() -> None:
    """Close this process's sessions: what they hold is free at once. (A parent's,
    kept before this process was forked from it, is the parent's: left alone.)"""
    while _sessions:
        try:
            _, (portal, session) = _sessions.popitem()
        except KeyError:  # emptied meanwhile
            return
        if portal.forked:
            continue
        try:
            session.close()
        except Exception as error:  # the process is ending: say so, do not stop it
            log.warning("tenure: closing %r at shutdown failed: %s", session, error)


def _on_shutdown(**_: object) -> None:
    close_sessions()


signals.worker_process_shutdown.connect(_on_shutdown, weak=False)
signals.worker_shutdown.connect(_on_shutdown, weak=False)
