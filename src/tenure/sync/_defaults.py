"""The sync face's default client: one per process, over :func:`tenure.configure`'s settings.

A blocking client is not bound to an event loop (it has a loop thread of its own), so
one serves the whole process. A child process made by ``fork`` never uses its
parent's (that client's loop thread did not survive the fork, and its session is the
parent's): the child's first use opens one of its own.
"""

from __future__ import annotations

import os
import threading

from tenure.client import configured
from tenure.client._defaults import on_reconfigure
from tenure.sync._client import Client, connect

__all__ = ["close_default_client", "default_client"]

_guard = threading.Lock()
#: The default client, and the process that opened it.
_current: tuple[Client, int] | None = None


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


def close_default_client() -> None:
    """Close this process's default client, if one was opened (for a shutdown hook)."""
    global _current
    with _guard:
        current, _current = _current, None
    if current is not None and current[1] == os.getpid():
        current[0].close()


# New settings: the next use connects by them.
on_reconfigure(close_default_client)
