"""The process's default backend and node: what decorators and integrations connect to.

A function decorated with ``@tenure.locked``, a Celery singleton task or a tooz-less
script has no client of its own to hand: it takes the *default*, configured once per
process by :func:`configure`, or else read from the environment (``TENURE_URL``,
``TENURE_NODE``), as psycopg reads ``PG*`` and redis-py ``REDIS_URL`` in their
integrations. The settings are one per process; the clients they make are one per
event loop (an asyncio client belongs to the loop it was opened on), opened on first
use and kept (:func:`default_client`). The sync face keeps one blocking client per
process (``tenure.sync.default_client``), over these same settings.

Each client also keeps a *default session* per node (:func:`default_session`), which
the ``@tenure.locked`` functions of a process share instead of opening a session per
call: opened on first use, replaced once it has ended (lost, closed).

A child made by ``os.fork`` forgets its parent's clients and sessions (its fork
handler): its first use opens its own.

Layer (CONTRIBUTING.md): this module may also import tenure.client._session.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from tenure.backends import shown_url
from tenure.client import _args, _forks
from tenure.client._client import Client, connect
from tenure.client._session import Session
from tenure.errors import ConfigError, InvalidArgumentError

__all__ = [
    "ENV_NODE",
    "ENV_URL",
    "Defaults",
    "close_default_client",
    "configure",
    "configured",
    "default_client",
    "default_session",
    "on_reconfigure",
]

#: The environment variable read for the default backend's URL.
ENV_URL = "TENURE_URL"
#: The environment variable read for the default node.
ENV_NODE = "TENURE_NODE"


@dataclass(frozen=True)
class Defaults:
    """The default backend (``url``, with ``options`` for :func:`tenure.connect`) and node."""

    url: str
    node: str
    options: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))

    def connect_options(self) -> dict[str, Any]:
        """:attr:`options` as keyword arguments of :func:`tenure.connect` (checked there)."""
        return dict(self.options)

    def __repr__(self) -> str:
        # (Integrations log what they run on: the URL's secrets masked, and the options
        # named, not shown, as a token may be one of them.)
        names = sorted(self.options)
        return f"Defaults(url={shown_url(self.url)}, node={self.node!r}, options={names})"


#: Reentrant: default_client() reads configured() while it holds it.
_guard = threading.RLock()
#: What configure() was given, (url, node, options), or None: read from the environment.
_explicit: tuple[str | None, str | None, Mapping[str, object]] | None = None
#: The settings in force, once read.
_configured: Defaults | None = None
#: Each event loop's default client, opening or open (a task, so concurrent first
#: uses share one connection).
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[Client]] = (
    weakref.WeakKeyDictionary()
)
#: Stale clients being closed on their loops.
_closing: set[asyncio.Task[None]] = set()
#: Told when the settings change: the sync face forgets its client there.
_listeners: list[Callable[[], None]] = []
#: Each client's default sessions, by node, opening or open (a task, as _clients).
_sessions: weakref.WeakKeyDictionary[Client, dict[str, asyncio.Task[Session]]] = (
    weakref.WeakKeyDictionary()
)
#: The description of the default sessions (operators see it in listings).
DEFAULT_SESSION_DESCRIPTION = "tenure default session"


def configure(url: str | None = None, *, node: str | None = None, **options: object) -> None:
    """Set the process's default backend ``url`` and ``node`` (``options`` go to ``connect``).

    What is left out is read from ``TENURE_URL`` and ``TENURE_NODE`` when first used;
    ``configure()`` with no argument goes back to the environment alone. Clients
    opened for the previous settings are closed (an asyncio one on its own loop, if
    that loop still runs), so the next use connects by the new ones.

    Raises:
        InvalidArgumentError: ``node`` is not a valid node name, or ``url`` is empty.
    """
    global _configured, _explicit
    if url is not None and not url:
        raise ConfigError("configure(url=...) is empty: give a backend URL, or None")
    if node is not None:
        _args.node_name(node)
    settings = None if url is None and node is None and not options else (url, node, options)
    with _guard:
        _configured = None
        _explicit = settings
        stale = list(_clients.items())
        _clients.clear()
    for loop, opening in stale:
        if not loop.is_closed():
            loop.call_soon_threadsafe(_close_when_open, opening)
    for listener in list(_listeners):
        listener()


def configured() -> Defaults:
    """The default backend and node: :func:`configure`'s, or else the environment's.

    Raises:
        ConfigError: no URL or no node is configured; the message says how to give one.
    """
    global _configured
    with _guard:
        if _configured is not None:
            return _configured
        url, node, options = _explicit or (None, None, {})
        url = url or os.environ.get(ENV_URL, "")
        node = node or os.environ.get(ENV_NODE, "")
        if not url:
            raise ConfigError(
                f"no default tenure backend: call tenure.configure(url=...) or set {ENV_URL}"
            )
        if not node:
            raise ConfigError(
                f"no default tenure node: call tenure.configure(node=...) or set {ENV_NODE}"
            )
        _args.node_name(node)
        _configured = Defaults(url, node, MappingProxyType(dict(options)))
        return _configured


async def default_client() -> Client:
    """This event loop's client of the default backend, connected on first use and kept.

    Concurrent first uses share one connection. A client closed by its user is
    replaced by a new one on the next call.

    Raises:
        ConfigError: nothing is configured (see :func:`configured`).
        UnavailableError: the backend cannot be reached (the next call tries again).
    """
    loop = asyncio.get_running_loop()
    with _guard:
        opening = _clients.get(loop)
        if opening is not None and opening.done():
            failed = opening.cancelled() or opening.exception() is not None
            if failed or opening.result().closed:
                opening = None
        if opening is None:
            opening = loop.create_task(_open(configured()), name="tenure default client")
            _clients[loop] = opening
    return await asyncio.shield(opening)


async def close_default_client() -> None:
    """Close this event loop's default client, if one was opened (for a shutdown hook)."""
    with _guard:
        opening = _clients.pop(asyncio.get_running_loop(), None)
    if opening is None:
        return
    try:
        client = await opening
    except Exception:  # it never opened: nothing to close
        return
    await client.aclose()


async def default_session(node: str | None = None, *, client: Client | None = None) -> Session:
    """The default session on ``node`` of ``client``: opened on first use and kept.

    ``node`` defaults to the configured node (:func:`configured`), ``client`` to this
    event loop's default client (:func:`default_client`). Every caller of this loop
    with the same client and node shares the one session (what ``@tenure.locked``
    holds its locks in): concurrent first uses share one opening; a session that has
    ended (lost, closed, or its client closed) is replaced by a new one on the next
    call, so a loss never leaves later calls failing. It has the node's default
    recovery window and the description ``"tenure default session"``.

    Raises:
        ConfigError: ``node`` or ``client`` is left out and nothing is configured.
        InvalidArgumentError: a bad node name, or ``client`` is not a tenure.Client.
        NotFoundError: the node does not exist.
        ClientClosedError: ``client`` is closed (ForkedClientError: it is a parent's).
    """
    if node is not None:
        node = _args.node_name(node)
    if client is not None and not isinstance(client, Client):
        raise InvalidArgumentError(f"client must be a tenure.Client, got {type(client).__name__}")
    if node is None:
        node = configured().node
    if client is None:
        client = await default_client()
    loop = asyncio.get_running_loop()
    with _guard:
        of_client = _sessions.setdefault(client, {})
        opening = of_client.get(node)
        if opening is not None and opening.done():
            failed = opening.cancelled() or opening.exception() is not None
            if failed or opening.result().closed:
                opening = None
        if opening is None:
            # (The sessions of closed clients go: a session keeps its client alive.)
            for closed in [other for other in _sessions if other.closed]:
                del _sessions[closed]
            session = client.session(node, description=DEFAULT_SESSION_DESCRIPTION)
            opening = loop.create_task(session, name=f"tenure default session {node}")
            of_client[node] = opening
    return await asyncio.shield(opening)


def on_reconfigure(listener: Callable[[], None]) -> None:
    """Call ``listener()`` after each :func:`configure` (the sync face's default uses it)."""
    _listeners.append(listener)


async def _open(settings: Defaults) -> Client:
    return await connect(settings.url, **settings.connect_options())


def _close_when_open(opening: asyncio.Task[Client]) -> None:
    """On the client's own loop: close it once it has opened (if it does)."""

    def close(done: asyncio.Task[Client]) -> None:
        if not done.cancelled() and done.exception() is None:
            closing = done.get_loop().create_task(done.result().aclose())
            _closing.add(closing)  # held until it ends: the loop keeps weak references only
            closing.add_done_callback(_closing.discard)

    opening.add_done_callback(close)


def _forget_after_fork() -> None:
    """In a child made by fork: the parent's clients and sessions are not the child's
    (their loops do not run here), so its first use opens its own. Nothing is closed:
    closing would act on the parent's connections."""
    global _guard
    _guard = threading.RLock()  # another thread may have held the old one at the fork
    _clients.clear()
    _closing.clear()
    _sessions.clear()


_forks.after_fork_in_child(_forget_after_fork)
