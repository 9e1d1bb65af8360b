"""The sync face's default client: one per process, over :func:`tenure.configure`'s settings.

A blocking client is not bound to an event loop (it has a loop thread of its own), so
one serves the whole process; so does each of its default sessions
(:func:`default_session`), which the ``@tenure.sync.locked`` functions of all the
process's threads share. A child process made by ``fork`` never uses its parent's
(that client's loop thread did not survive the fork, and its sessions are the
parent's): the child's first use opens one of its own.

Layer (CONTRIBUTING.md): this module may also import tenure.sync._objects.
"""

from __future__ import annotations

import os
import threading
import weakref

from tenure.client import _args, _forks, configured
from tenure.client._defaults import DEFAULT_SESSION_DESCRIPTION, on_reconfigure
from tenure.errors import InvalidArgumentError
from tenure.sync._client import Client, connect
from tenure.sync._objects import Session

__all__ = ["close_default_client", "default_client", "default_session"]

_guard = threading.Lock()
#: The default client, and the process that opened it.
_current: tuple[Client, int] | None = None
#: Each client's default sessions, by node.
_sessions: weakref.WeakKeyDictionary[Client, dict[str, Session]] = weakref.WeakKeyDictionary()
#: One opening at a time (concurrent first uses share it); apart from _guard, which
#: default_client() takes meanwhile.
_opening = threading.Lock()


def default_client() -> Client:
    """This process's blocking client of the default backend, connected on first use.

    A client closed by its user, or opened by the parent of a forked process, is
    replaced by a new one.

    Raises:
        ConfigError: nothing is configured (see :func:`tenure.configured`).
        UnavailableError: the backend cannot be reached (the next call tries again).
    """
    global _current
    with _guard:
        if _current is not None:
            client, pid = _current
            if pid == os.getpid() and not client.closed:
                return client
        settings = configured()
        client = connect(settings.url, **settings.connect_options())
        _current = (client, os.getpid())
        return client


def default_session(node: str | None = None, *, client: Client | None = None) -> Session:
    """The default session on ``node`` of ``client``: opened on first use and kept.

    As :func:`tenure.default_session`: ``node`` defaults to the configured node,
    ``client`` to this process's default client (:func:`default_client`); every
    thread of the process shares the one session per client and node (a thread is
    a caller of its own in it, as a task is in async code); one that has ended
    (lost, closed, or its client closed) is replaced on the next call.

    Raises:
        ConfigError: ``node`` or ``client`` is left out and nothing is configured.
        InvalidArgumentError: a bad node name, or ``client`` is not a tenure.sync.Client.
        NotFoundError: the node does not exist.
        ClientClosedError: ``client`` is closed (ForkedClientError: it is a parent's).
    """
    if node is not None:
        node = _args.node_name(node)
    if client is not None and not isinstance(client, Client):
        raise InvalidArgumentError(
            f"client must be a tenure.sync.Client, got {type(client).__name__}"
        )
    if node is None:
        node = configured().node
    if client is None:
        client = default_client()
    with _opening:
        session = _sessions.get(client, {}).get(node)
        if session is None or session.ended:
            session = client.session(node, description=DEFAULT_SESSION_DESCRIPTION)
            _sessions.setdefault(client, {})[node] = session
        return session


def close_default_client() -> None:
    """Close this process's default client, if one was opened (for a shutdown hook).

    In a child made by fork that has not opened its own, it does nothing: the
    default client is then the parent's.
    """
    global _current
    with _guard:
        current, _current = _current, None
    if current is not None and current[1] == os.getpid():
        current[0].close()


def _forget_after_fork() -> None:
    """In a child made by fork: the parent's client is not the child's (its loop thread
    is gone); the child's first use opens its own. (New locks: another thread may have
    held the old ones at the fork.)"""
    global _guard, _opening
    _guard = threading.Lock()
    _opening = threading.Lock()
    _sessions.clear()


_forks.after_fork_in_child(_forget_after_fork)
# New settings: the next use connects by them.
on_reconfigure(close_default_client)
