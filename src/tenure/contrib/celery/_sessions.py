"""This process's sessions for Celery tasks: one per recovery window, over the default client.

Every Singleton task a process runs holds its key in one session of that process
(per recovery window asked for), opened on first use on the default node, over
``tenure.sync.default_client()``, and kept: a worker process pays one session, not
one per task. The session is the worker's liveness: killed with ``-9``, its
connection closes, and the store frees what it held once the session's recovery
window has passed (``Singleton.recovery_window``; the node's default otherwise).

Fork safety. Celery's prefork pool forks its children from the main process: a
child must never use a session (or client) of its parent. The default client is
one per process already (a child's first use opens its own); the sessions here are
forgotten in the child at the fork (``os.register_at_fork``), never closed there:
they are the parent's.

An ended session (lost, or closed with its client) is replaced on the next use. At
a worker's shutdown (``worker_process_shutdown`` in a prefork child,
``worker_shutdown`` in a solo or threads worker) the sessions are closed, so what
they hold is free at once instead of at the end of their window.
"""

from __future__ import annotations

import logging
import os
import socket
import threading

from celery import signals

import tenure.sync

__all__ = ["close_sessions", "process_session"]

log = logging.getLogger("tenure.contrib.celery")

_guard = threading.Lock()
#: This process's sessions by recovery window (None: the node's default), with their node.
_sessions: dict[tuple[str, float | None], tenure.sync.Session] = {}


def process_session(recovery_window: float | None) -> tenure.sync.Session:
    """This process's session on the default node with ``recovery_window``, opened on
    first use (or after the last one ended) and kept.

    Raises:
        ConfigError: no default backend or node (``tenure.configure``, ``TENURE_URL``).
        UnavailableError: the backend cannot be reached.
        NotFoundError: the default node does not exist.
    """
    node = tenure.sync.configured().node
    with _guard:
        session = _sessions.get((node, recovery_window))
        if session is not None and not session.ended:
            return session
        client = tenure.sync.default_client()
        session = client.session(
            node,
            recovery_window=recovery_window,
            description=f"celery {socket.gethostname()} pid {os.getpid()}",
        )
        _sessions[(node, recovery_window)] = session
        return session


def close_sessions() -> None:
    """Close this process's sessions: what they hold is free at once."""
    with _guard:
        sessions = list(_sessions.values())
        _sessions.clear()
    for session in sessions:
        try:
            session.close()
        except Exception as error:  # the process is ending: say so, do not stop it
            log.warning("tenure: closing %r at shutdown failed: %s", session, error)


def _forget_in_child() -> None:
    """In a forked child: the parent's sessions are not ours (nor is the lock's state)."""
    global _guard
    _guard = threading.Lock()
    _sessions.clear()


def _on_shutdown(**_: object) -> None:
    close_sessions()


os.register_at_fork(after_in_child=_forget_in_child)
signals.worker_process_shutdown.connect(_on_shutdown, weak=False)
signals.worker_shutdown.connect(_on_shutdown, weak=False)
