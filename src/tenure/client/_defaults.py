"""The process's default backend and node: what decorators and integrations connect to.

A function decorated with ``@tenure.locked``, a Celery singleton task or a tooz-less
script has no client of its own to hand: it takes the *default*, configured once per
process by :func:`configure`, or else read from the environment (``TENURE_URL``,
``TENURE_NODE``), as psycopg reads ``PG*`` and redis-py ``REDIS_URL`` in their
integrations. The settings are one per process; the clients they make are one per
event loop (an asyncio client belongs to the loop it was opened on), opened on first
use and kept (:func:`default_client`). The sync face keeps one blocking client per
process (``tenure.sync.default_client``), over these same settings.
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

from tenure.client import _args
from tenure.client._client import Client, connect
from tenure.errors import ConfigError

__all__ = [
    "ENV_NODE",
    "ENV_URL",
    "Defaults",
    "close_default_client",
    "configure",
    "configured",
    "default_client",
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
