"""The sync face's default client: one per process, over :func:`tenure.configure`'s settings.

A blocking client is not bound to an event loop (it has a loop thread of its own), so
one serves the whole process; so does each of its default sessions
(:func:`default_session`), which the ``@tenure.sync.locked`` functions of all the
process's threads share. The client is an entry of the process runtime
(:mod:`tenure.sync._shared`, under its own key, as :func:`tenure.configure` replaces
it): in a child made by ``fork`` it opens the child's own connection on its next
call, and it is closed at exit. The default sessions are the parent's in a child:
forgotten there, so the child's first use opens its own.

Layer (CONTRIBUTING.md): this module may also import tenure.sync._objects.
"""

from __future__ import annotations

import threading
import weakref

from tenure.client import _args, _forks, configured
from tenure.client._defaults import DEFAULT_SESSION_DESCRIPTION, on_reconfigure
from tenure.errors import InvalidArgumentError
from tenure.sync import _shared
from tenure.sync._client import Client, connect
from tenure.sync._objects import Session

__all__ = ["close_default_client", "default_client", "default_session"]

#: The default client's key in the process runtime (no shared_client() key is a str).
DEFAULT_KEY = "default"
#: Each client's default sessions, by node.
_sessions: weakref.WeakKeyDictionary[Client, dict[str, Session]] = weakref.WeakKeyDictionary()
#: One opening of a default session at a time (concurrent first uses share it).
_opening = threading.Lock()


def default_client() -> Client:
    """This process's blocking client of the default backend, connected on first use.

    A client closed by its user is replaced by a new one. In a child made by fork,
    the same client opens the child's own connection on its next call (never the
    parent's). It is closed at interpreter exit.

    Raises:
        ConfigError: nothing is configured (see :func:`tenure.configured`).
        UnavailableError: the backend cannot be reached (the next call tries again).
    """
    settings = configured()
    return _shared.open_shared(
        DEFAULT_KEY, lambda: connect(settings.url, **settings.connect_options())
    )


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

    In a child made by fork that has not opened its own connection, nothing is sent:
    the connection is the parent's, which keeps it.
    """
    client = _shared.drop(DEFAULT_KEY)
    if client is not None:
        client.close()


def _forget_after_fork() -> None:
    """In a child made by fork: the parent's default sessions are not the child's; its
    first use opens its own. (A new lock: another thread may have held it at the fork.)"""
    global _opening
    _opening = threading.Lock()
    _sessions.clear()


_forks.after_fork_in_child(_forget_after_fork)
# New settings: the next use connects by them.
on_reconfigure(close_default_client)
