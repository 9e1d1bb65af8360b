"""``postgres://`` URLs: libpq's connection string plus tenure's own options.

``postgres://user:password@host:port/dbname?schema=tenure&sslmode=require``
(``postgresql://`` too). tenure's options (in the query, or as keywords of
:func:`tenure.connect`, which win): ``schema`` (default ``tenure``), ``pool_size``
(connections for calls, default 10), ``connect_timeout`` and ``request_timeout``
(seconds, default 5 and 30), ``listen_probe_timeout`` (seconds the LISTEN probe
waits for its own notification, default 2), ``recheck_interval`` (seconds between
re-checks of a waiter when notifications do not arrive, default 1),
``idle_session_timeout`` (seconds an idle connection of ours may stay open on the
server before it closes it, default 60, 0: never; see :mod:`._reclaim`) and
``server_keepalives_idle`` (seconds of silence before the server probes our end
of a connection, default 30), ``withdraw_wait`` (as every backend's:
docs/backends.md, "Cancellation"), ``max_prefix_watches_per_node`` (prefix watches one
node may have armed, default the engine's 1,000). libpq's own
parameters (``sslmode`` and friends) pass through; anything else is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlencode, urlsplit, urlunsplit

from tenure._core.limits import MAX_PREFIX_WATCHES_PER_NODE
from tenure._url_options import merged_settings, seconds
from tenure.backends._options import max_prefix_watches_per_node, shown_url, withdraw_wait
from tenure.errors import InvalidArgumentError

__all__ = ["PgOptions", "parse_url"]

#: libpq parameters a URL may carry through to the database connection.
LIBPQ: Final = frozenset(
    {
        "sslmode",
        "sslrootcert",
        "sslcert",
        "sslkey",
        "sslcrl",
        "sslpassword",
        "sslsni",
        "gssencmode",
        "krbsrvname",
        "channel_binding",
        "target_session_attrs",
        "application_name",
        "keepalives",
        "keepalives_idle",
        "keepalives_interval",
        "keepalives_count",
        "tcp_user_timeout",
        "passfile",
        "service",
        "host",
        "hostaddr",
        "port",
        "user",
        "password",
        "dbname",
    }
)

#: TCP keepalive settings used unless the URL gives its own.
KEEPALIVES: Final = {
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
}

_OWN: Final = frozenset(
    {
        "schema",
        "pool_size",
        "connect_timeout",
        "withdraw_wait",
        "request_timeout",
        "listen_probe_timeout",
        "recheck_interval",
        "idle_session_timeout",
        "server_keepalives_idle",
        "max_prefix_watches_per_node",
    }
)

#: Bounds of ``idle_session_timeout`` (0 turns it off), in seconds.
IDLE_SESSION_TIMEOUT_BOUNDS: Final = (1.0, 86400.0)
#: Bounds of ``server_keepalives_idle``, in seconds.
SERVER_KEEPALIVES_IDLE_BOUNDS: Final = (1.0, 7200.0)

#: A schema name tenure accepts: a plain lower-case identifier (no quoting games).
_SCHEMA: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}")


@dataclass(frozen=True, slots=True)
class PgOptions:
    """Where the database is and how tenure uses it."""

    conninfo: str
    schema: str
    pool_size: int
    connect_timeout: float
    request_timeout: float
    listen_probe_timeout: float
    recheck_interval: float
    #: The sessions' ``withdraw_wait`` (the session core's).
    withdraw_wait: float
    #: Seconds idle before the server closes a connection (0: never).
    idle_session_timeout: float
    #: Seconds of silence before the server probes the peer of a connection.
    server_keepalives_idle: float
    #: How many prefix watches one node may have armed, by all its sessions (each is
    #: compared with every name a change of the node makes): the engine's bound by
    #: default (``tenure serve --max-prefix-watches-per-node``); sent with each arming.
    max_prefix_watches_per_node: int = MAX_PREFIX_WATCHES_PER_NODE


def _bounded(
    settings: Mapping[str, object],
    option: str,
    default: float,
    bounds: tuple[float, float],
    *,
    zero_allowed: bool = False,
) -> float:
    """``option`` in seconds within ``bounds`` (or exactly 0 when ``zero_allowed``)."""
    raw = settings.get(option, default)
    try:
        value = float(str(raw))
    except ValueError:
        raise InvalidArgumentError(f"{option} must be a number of seconds, got {raw!r}") from None
    if zero_allowed and value == 0:
        return 0.0
    low, high = bounds
    if not low <= value <= high:
        zero = " or 0 (off)" if zero_allowed else ""
        raise InvalidArgumentError(
            f"{option} must be in [{low:g}, {high:g}] seconds{zero}, got {value:g}"
        )
    return value


def parse_url(url: str, options: Mapping[str, object]) -> PgOptions:
    """The options of ``postgres://...`` (keywords in ``options`` win over the query)."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("postgres", "postgresql"):
        raise InvalidArgumentError(f"expected a postgres:// URL, got {shown_url(url)}")
    settings = merged_settings("postgres", parts, options, _OWN | LIBPQ)
    if not parts.hostname and "host" not in settings:
        raise InvalidArgumentError(f"postgres:// needs a host: {shown_url(url)}")
    schema = str(settings.get("schema", "tenure"))
    if not _SCHEMA.fullmatch(schema):
        raise InvalidArgumentError(
            f"schema must be a lower-case identifier ([a-z_][a-z0-9_]*, 63 at most), got {schema!r}"
        )
    pool_size = settings.get("pool_size", 10)
    try:
        pool_size = int(str(pool_size))
    except ValueError:
        raise InvalidArgumentError(f"pool_size must be an integer, got {pool_size!r}") from None
    if not 1 <= pool_size <= 1000:
        raise InvalidArgumentError(f"pool_size must be in [1, 1000], got {pool_size}")
    connect_timeout = seconds(settings, "connect_timeout", 5.0)
    passed = {k: str(v) for k, v in settings.items() if k in LIBPQ}
    # A connection that died without a word (a stalled network) is noticed by TCP
    # keepalives, within about 25 s unless the URL says otherwise: the LISTEN
    # connection is idle for long stretches and would otherwise never find out.
    for key, value in KEEPALIVES.items():
        passed.setdefault(key, value)
    # libpq's own connect_timeout is whole seconds, at least 2.
    passed["connect_timeout"] = str(max(2, round(connect_timeout)))
    conninfo = urlunsplit(("postgresql", parts.netloc, parts.path, urlencode(passed), ""))
    return PgOptions(
        conninfo=conninfo,
        schema=schema,
        pool_size=pool_size,
        connect_timeout=connect_timeout,
        request_timeout=seconds(settings, "request_timeout", 30.0),
        listen_probe_timeout=seconds(settings, "listen_probe_timeout", 2.0),
        recheck_interval=seconds(settings, "recheck_interval", 1.0),
        withdraw_wait=withdraw_wait(settings),
        idle_session_timeout=_bounded(
            settings,
            "idle_session_timeout",
            60.0,
            IDLE_SESSION_TIMEOUT_BOUNDS,
            zero_allowed=True,
        ),
        server_keepalives_idle=_bounded(
            settings, "server_keepalives_idle", 30.0, SERVER_KEEPALIVES_IDLE_BOUNDS
        ),
        max_prefix_watches_per_node=max_prefix_watches_per_node(settings),
    )
