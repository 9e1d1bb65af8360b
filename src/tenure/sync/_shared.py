"""The process runtime: one blocking client per process and (URL, options), closed at exit.

An integration (tooz's driver, limits' storage, Celery's tasks) or a library has no
client of its own to hand, and must not open one per call: :func:`shared_client`
gives every caller of the process that asks for the same URL with the same options
the same :class:`~tenure.sync.Client`, opened on first use and kept. The process's
default client (:func:`tenure.sync.default_client`) is an entry of the same registry.

The rules, written here once:

* One per process and key. The key is the URL and the options, normalised
  (:func:`key_of`): their order does not matter, a ``require=`` list is a set,
  values compare by value, objects (observers, a clock) by identity.
* Forks. The registry keeps its entries in a child made by ``fork`` (a new lock:
  another thread may have held the old one at the fork); each client opens the
  child's own connection on its next call (:class:`~tenure.sync.Client` says how),
  so a client that a module made at import (gunicorn's ``--preload``) serves each
  worker on a connection of its own, never the parent's.
* Closing by hand. ``client.close()`` closes it for every holder in the process (its
  sessions end); the next :func:`shared_client` call for its key opens a new one.
* Exit. Every client of the registry still open in this process is closed by an
  ``atexit`` hook, its sessions with it, so what they hold is free at once rather
  than at the end of their recovery window. In a child that never used an inherited
  client, that close only marks it closed there (nothing is sent: the connection is
  the parent's). The hook waits :data:`EXIT_WAIT` seconds at most: a server that
  does not answer (stopped, cut off) took 20 s of a process's exit; past the wait the
  process exits, and the server ends its sessions when their window has passed.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from tenure.client import _forks
from tenure.errors import TenureError
from tenure.sync._client import Client, connect

__all__ = [
    "EXIT_WAIT",
    "Key",
    "close_all",
    "drop",
    "key_of",
    "keys",
    "open_shared",
    "shared_client",
]

#: The longest the exit hook waits for the shared clients to close, in seconds.
EXIT_WAIT = 5.0

#: A registry key: what :func:`key_of` makes (or a name of the library's own, such as
#: the default client's).
Key = Hashable


class _Registry:
    """This process's shared clients by key (the module docstring's rules)."""

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.clients: dict[Key, Client] = {}
        #: One opening per key at a time (concurrent first uses share it); apart from
        #: ``guard``, which is never held while a connection opens.
        self.openings: dict[Key, threading.Lock] = {}

    def new_locks(self) -> None:
        """In a child made by fork: another thread may have held a lock at the fork.
        (The clients stay: each opens the child's connection on its next call.)"""
        self.guard = threading.Lock()
        self.openings = {}


_registry = _Registry()
_forks.after_fork_in_child(_registry.new_locks)


def open_shared(key: Key, open_client: Callable[[], Client]) -> Client:
    """The registry's client for ``key``: the open one, or ``open_client()``'s, kept.

    For the library's own entries (the default client); :func:`shared_client` is the
    public door.
    """
    with _registry.guard:
        client = _registry.clients.get(key)
        if client is not None and not client.closed:
            return client
        opening = _registry.openings.setdefault(key, threading.Lock())
    with opening:
        with _registry.guard:
            client = _registry.clients.get(key)
            if client is not None and not client.closed:
                return client  # opened by a concurrent first use
        client = open_client()
        with _registry.guard:
            _registry.clients[key] = client
        return client


def keys() -> list[Key]:
    """The keys of the registry's clients now (what a test's teardown compares)."""
    with _registry.guard:
        return list(_registry.clients)


def drop(key: Key) -> Client | None:
    """Take ``key``'s client out of the registry (the caller closes it); None if none."""
    with _registry.guard:
        return _registry.clients.pop(key, None)


def shared_client(url: str, **options: Any) -> Client:
    """This process's blocking client of ``url`` with ``options``: opened on first use, kept.

    Every caller in the process that asks for the same URL with the same options
    (keyword options of :func:`tenure.sync.connect`: ``client_name=``, ``require=``,
    ``observers=``, a URL's own options such as ``token=``) gets the same client, and
    so one connection: for integrations and libraries that need a client but must not
    open one per call. Options are part of the identity, compared after
    normalising (their order does not matter, ``require=`` is a set, objects such as
    observers by identity): other options are another client. Thread-safe:
    concurrent first uses share one opening.

    Forks: in a child made by ``os.fork`` the same object is returned, and its next
    call opens the child's own connection (never the parent's), as redis-py's pool
    does after a fork. Closing it by hand (``close()``) closes it for every holder in
    the process, its sessions with it; the next ``shared_client()`` call for the same
    URL and options opens a new one. At interpreter exit (``atexit``) every shared
    client still open is closed, so its sessions' holds are freed at once.

    Raises:
        InvalidArgumentError: a bad URL or option (as :func:`tenure.sync.connect`).
        UnavailableError: the backend cannot be reached (the next call tries again).
    """
    key = ("shared", url, key_of(options))
    return open_shared(key, lambda: connect(url, **options))


def key_of(options: Mapping[str, object]) -> Key:
    """``options`` as part of a registry key: sorted by name, each value normalised."""
    return tuple(sorted((name, _normal(name, value)) for name, value in options.items()))


def _normal(name: str, value: object) -> Hashable:
    """A value of an option, as the key holds it: equal values give equal keys."""
    if name == "require" and isinstance(value, Iterable) and not isinstance(value, str):
        return ("set", frozenset(_normal("", item) for item in value))
    if isinstance(value, (list, tuple)):
        return ("seq", tuple(_normal("", item) for item in value))
    if isinstance(value, (set, frozenset)):
        return ("set", frozenset(_normal("", item) for item in value))
    if isinstance(value, Mapping):
        return ("map", key_of(value))
    try:
        hash(value)
    except TypeError:  # an unhashable object: the same one is the same option
        return ("object", id(value))
    return value  # (hashable, checked just now)


def close_all() -> None:
    """Close every client of the registry (the ``atexit`` hook; errors are the backend's
    to report at exit, not the process's: they are swallowed)."""
    with _registry.guard:
        clients = list(_registry.clients.values())
        _registry.clients.clear()
    for client in clients:
        with contextlib.suppress(TenureError, RuntimeError):
            client.close()


def _close_at_exit() -> None:
    """The ``atexit`` hook: :func:`close_all`, waited for :data:`EXIT_WAIT` seconds."""
    closing = threading.Thread(target=close_all, name="tenure shared clients at exit")
    closing.daemon = True  # (past the wait, the interpreter exits without it)
    closing.start()
    closing.join(EXIT_WAIT)


atexit.register(_close_at_exit)
