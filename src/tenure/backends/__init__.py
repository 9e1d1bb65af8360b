"""Backends, chosen by URL scheme and imported only when used.

==============================  ==============================================
URL                             where the state lives
==============================  ==============================================
``memory://`` / ``memory://N``  this process (private, or shared by name ``N``)
``tenure://host:port[,...]``    ``tenure serve`` processes (``tenures://``: TLS)
``etcd://host:port[,...]``      an etcd cluster, no tenure server (``etcds://``: TLS)
``redis://host:port[/db]``      a Redis server, functions in it (``rediss://``: TLS)
``postgres://user@host/db``     PostgreSQL tables and PL/pgSQL (``postgresql://`` too)
==============================  ==============================================

The contract every backend keeps is :mod:`tenure.backends._base` (re-exported here:
:class:`Backend`, made of its nodes, :class:`BackendNodes`, and what operators
list, :class:`BackendListing`; a session's core, :class:`CoreSession`, with its writes
(:data:`SemaphoreWrite`: :class:`CreateWrite`, :class:`UpdateWrite`,
:class:`SwapWrite`, :class:`DeleteWrite`), and its optional abilities, each a
protocol tied to a :class:`Capability` by :data:`ABILITIES` (:class:`AllOrNone`,
:class:`LeaseRenewal`, :class:`SessionRecovery`, :class:`RateReservations`,
:class:`Claiming`, :class:`PrefixWatch`, :class:`TaskNumbers`, :class:`Handoffs`,
:class:`MaxHolds`;
:func:`abilities_of`
a session); the full set :class:`BackendSession`, :class:`SessionListener`,
:class:`WatchStream`, :class:`PrefixWatchStream` with :class:`PrefixChange` and
:class:`PrefixReset`, :class:`Grant`, :class:`HeldGrant`, :class:`SessionTicket`, :class:`Handoff`,
:class:`Capability`), in prose in
``docs/backends.md``. Third-party backends register a module under the
``tenure.backends`` entry-point group; the module must define
``async def open_backend(url, options) -> Backend``. What a URL may show, in an error,
a log line or a repr, is :func:`masked_url`'s (:func:`shown_url`: quoted): its
secrets as ``***``, one rule for tenure's backends, clients and integrations.

Layer (CONTRIBUTING.md): its modules may import each other, tenure._core,
tenure._runtime, tenure._protocol, tenure._url_options and tenure.errors.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib.metadata import entry_points
from types import ModuleType
from typing import Final
from urllib.parse import urlsplit

from tenure.backends._base import (
    ABILITIES,
    AllOrNone,
    Backend,
    BackendListing,
    BackendNodes,
    BackendSession,
    Capability,
    Claiming,
    CoreSession,
    CreateWrite,
    DeleteWrite,
    Grant,
    Handoff,
    Handoffs,
    HeldGrant,
    LeaseRenewal,
    MaxHolds,
    NameStatistics,
    PrefixChange,
    PrefixNews,
    PrefixReset,
    PrefixWatch,
    PrefixWatchStream,
    RateReservations,
    SemaphoreWrite,
    SessionListener,
    SessionRecovery,
    SessionTicket,
    StaleDescribing,
    StaleReading,
    StaleWatching,
    SwapWrite,
    TaskNumbers,
    UpdateWrite,
    WaitChains,
    WatchStream,
    abilities_of,
)
from tenure.backends._options import masked_url, shown_url
from tenure.backends._url_hint import url_refusal
from tenure.errors import InvalidArgumentError, UnsupportedError

#: Built-in schemes and the modules that implement them.
BUILTIN: Final = {
    "memory": "tenure.backends.memory",
    "tenure": "tenure.backends.remote",
    "tenures": "tenure.backends.remote",
    "etcd": "tenure.backends.etcd",
    "etcds": "tenure.backends.etcd",
    "redis": "tenure.backends.redis",
    "rediss": "tenure.backends.redis",
    "postgres": "tenure.backends.postgres",
    "postgresql": "tenure.backends.postgres",
}

#: Built-in backends whose libraries come with an extra: ``pip install 'tenure[X]'``.
EXTRAS: Final = {
    "etcd": "etcd",
    "etcds": "etcd",
    "redis": "redis",
    "rediss": "redis",
    "postgres": "postgres",
    "postgresql": "postgres",
}


def _module_for(scheme: str, url: str) -> ModuleType:
    if scheme in BUILTIN:
        try:
            return importlib.import_module(BUILTIN[scheme])
        except ImportError as error:
            if scheme not in EXTRAS or (error.name or "").startswith("tenure"):
                raise
            extra = EXTRAS[scheme]
            raise UnsupportedError(
                f"the {scheme}:// backend needs the {extra!r} extra, not installed here "
                f"(missing {error.name!r}): pip install 'tenure[{extra}]'"
            ) from error
    plugged = entry_points(group="tenure.backends")
    for entry in plugged:
        if entry.name == scheme:
            module = entry.load()
            if not isinstance(module, ModuleType):
                raise InvalidArgumentError(f"entry point {entry.value!r} is not a module")
            return module
    raise InvalidArgumentError(url_refusal(url, [*BUILTIN, *plugged.names]))


async def open_backend(
    url: str,
    options: Mapping[str, object] | None = None,
    *,
    require: frozenset[Capability] = frozenset(),
) -> Backend:
    """Open the backend ``url`` names, refusing it if it lacks a ``require``-d capability."""
    if not isinstance(url, str):
        raise InvalidArgumentError(f"expected a URL like 'memory://', got {shown_url(url)}")
    if "://" not in url:  # a typo's nearest scheme, and its form (tenure:/host)
        schemes = [*BUILTIN, *entry_points(group="tenure.backends").names]
        raise InvalidArgumentError(url_refusal(url, schemes))
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError as error:  # e.g. tenure://[bad: "Invalid IPv6 URL"
        raise InvalidArgumentError(f"malformed URL {shown_url(url)}: {error}") from None
    backend: Backend = await _module_for(scheme, url).open_backend(url, dict(options or {}))
    missing = require - backend.capabilities
    if missing:
        await backend.aclose()
        names = ", ".join(sorted(c.value for c in missing))
        raise UnsupportedError(f"{scheme}:// cannot provide: {names}")
    return backend


__all__ = [
    "ABILITIES",
    "AllOrNone",
    "Backend",
    "BackendListing",
    "NameStatistics",
    "StaleDescribing",
    "StaleWatching",
    "StaleReading",
    "WaitChains",
    "BackendNodes",
    "BackendSession",
    "Capability",
    "Claiming",
    "CoreSession",
    "CreateWrite",
    "DeleteWrite",
    "Grant",
    "Handoff",
    "Handoffs",
    "HeldGrant",
    "LeaseRenewal",
    "MaxHolds",
    "PrefixChange",
    "PrefixNews",
    "PrefixReset",
    "PrefixWatch",
    "PrefixWatchStream",
    "RateReservations",
    "SemaphoreWrite",
    "SessionListener",
    "SessionRecovery",
    "SessionTicket",
    "SwapWrite",
    "TaskNumbers",
    "UpdateWrite",
    "WatchStream",
    "abilities_of",
    "masked_url",
    "open_backend",
    "shown_url",
]
