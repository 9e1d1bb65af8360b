"""``redis://`` URLs and options: the server, the database, auth, TLS and the key prefix.

See :mod:`tenure.backends.redis` for what each option means.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from tenure._core.limits import MAX_PREFIX_WATCHES_PER_NODE
from tenure._core.values import DEADLOCK_SEARCH_LIMIT
from tenure._url_options import merged_settings, seconds
from tenure.backends._options import max_prefix_watches_per_node, withdraw_wait
from tenure.errors import InvalidArgumentError

__all__ = ["DEFAULT_PORT", "DEFAULT_PREFIX", "RedisOptions", "parse_url"]

DEFAULT_PORT: Final = 6379
DEFAULT_PREFIX: Final = "tenure:"
#: The largest ``deadlock_search_limit`` (a search runs inside one function call, which
#: blocks the Redis server while it runs).
MAX_SEARCH_LIMIT: Final = 1_000_000

_OPTIONS: Final = frozenset(
    {
        "prefix",
        "db",
        "username",
        "password",
        "ca",
        "cert",
        "key",
        "connect_timeout",
        "withdraw_wait",
        "request_timeout",
        "deadlock_search_limit",
        "max_prefix_watches_per_node",
    }
)


@dataclass(frozen=True, slots=True)
class RedisOptions:
    """Everything needed to reach the server, and where tenure's keys live."""

    host: str
    port: int
    db: int
    username: str | None
    password: str | None
    tls: bool
    ca: str | None
    cert: str | None
    key: str | None
    prefix: str
    connect_timeout: float
    request_timeout: float
    #: The sessions' ``withdraw_wait`` (the session core's, not the connection's).
    withdraw_wait: float
    #: How much one deadlock check may look at (0: none is made); sent with each acquire.
    deadlock_search_limit: int = DEADLOCK_SEARCH_LIMIT
    #: How many prefix watches one node may have armed, by all its sessions (each is
    #: compared with every name a call of the node changes, inside Redis): the engine's
    #: bound (``tenure serve --max-prefix-watches-per-node``); sent with each arming.
    max_prefix_watches_per_node: int = MAX_PREFIX_WATCHES_PER_NODE

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``redis.asyncio.Redis`` (no retries: tenure retries
        itself, with request ids that make a retry safe)."""
        kwargs: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "db": self.db,
            "username": self.username,
            "password": self.password,
            "socket_connect_timeout": self.connect_timeout,
            "socket_timeout": self.request_timeout,
            "decode_responses": False,
        }
        if self.tls:
            kwargs.update(
                ssl=True, ssl_ca_certs=self.ca, ssl_certfile=self.cert, ssl_keyfile=self.key
            )
        return kwargs


def _file(option: str, value: object) -> str:
    path = Path(str(value))
    if not path.is_file():
        raise InvalidArgumentError(f"{option}={value!r}: no such file")
    return str(path)


def parse_url(url: str, options: Mapping[str, object]) -> RedisOptions:
    """The options of ``redis://[user:password@]host[:port][/db][?options]``
    (``rediss://`` for TLS); ``options`` (keywords) win over the query and the URL."""
    parts = urlsplit(url)
    settings = merged_settings("redis", parts, options, _OPTIONS)
    if "," in parts.netloc:
        raise InvalidArgumentError(
            "redis:// takes one host[:port] (Redis Cluster is not supported)"
        )
    try:
        host, port = parts.hostname, parts.port or DEFAULT_PORT
    except ValueError as error:
        raise InvalidArgumentError(f"bad redis:// address {parts.netloc!r}: {error}") from None
    if not host:
        raise InvalidArgumentError("redis:// needs a host: redis://host[:port][/db]")
    path = parts.path.strip("/")
    db_text = str(settings.get("db", path or "0"))
    if not db_text.isdigit():
        raise InvalidArgumentError(f"the redis:// database must be a number, got {db_text!r}")
    prefix = str(settings.get("prefix", DEFAULT_PREFIX))
    if not prefix or "{" in prefix or "}" in prefix:
        raise InvalidArgumentError(
            f"prefix= must be non-empty, without braces (they make the hash tag), got {prefix!r}"
        )
    tls = parts.scheme.lower() == "rediss" or "ca" in settings
    if not tls and ("cert" in settings or "key" in settings):
        raise InvalidArgumentError("cert= and key= need TLS: use rediss:// or give ca=")
    username = settings.get("username", unquote(parts.username) if parts.username else None)
    password = settings.get("password", unquote(parts.password) if parts.password else None)
    return RedisOptions(
        host=host,
        port=port,
        db=int(db_text),
        username=None if username is None else str(username),
        password=None if password is None else str(password),
        tls=tls,
        ca=_file("ca", settings["ca"]) if "ca" in settings else None,
        cert=_file("cert", settings["cert"]) if "cert" in settings else None,
        key=_file("key", settings["key"]) if "key" in settings else None,
        prefix=prefix,
        connect_timeout=seconds(settings, "connect_timeout", 5.0),
        request_timeout=seconds(settings, "request_timeout", 5.0),
        withdraw_wait=withdraw_wait(settings),
        deadlock_search_limit=_search_limit(settings.get("deadlock_search_limit")),
        max_prefix_watches_per_node=max_prefix_watches_per_node(settings),
    )


def _search_limit(value: object) -> int:
    """``deadlock_search_limit``: an int of 0 or more (default DEADLOCK_SEARCH_LIMIT)."""
    if value is None:
        return DEADLOCK_SEARCH_LIMIT
    text = str(value)
    if isinstance(value, bool) or not text.isdigit() or int(text) > MAX_SEARCH_LIMIT:
        raise InvalidArgumentError(
            f"deadlock_search_limit must be an integer in [0, {MAX_SEARCH_LIMIT}], got {value!r}"
        )
    return int(text)
