"""``etcd://`` URLs and options: the endpoints, TLS, auth and the key prefix.

See :mod:`tenure.backends.etcd` for what each option means.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final
from urllib.parse import unquote, urlsplit

import grpc

from tenure.backends._options import merged_settings, seconds, withdraw_wait
from tenure.backends.etcd._conn import ConnectionOptions
from tenure.errors import InvalidArgumentError

__all__ = ["DEFAULT_PORT", "DEFAULT_PREFIX", "parse_url"]

DEFAULT_PORT: Final = 2379
DEFAULT_PREFIX: Final = "/tenure/"

_OPTIONS: Final = frozenset(
    {
        "prefix",
        "user",
        "password",
        "ca",
        "cert",
        "key",
        "server_hostname",
        "connect_timeout",
        "request_timeout",
        "withdraw_wait",
    }
)


def _endpoints(netloc: str) -> tuple[str, ...]:
    hosts = tuple(h.strip() for h in netloc.rsplit("@", 1)[-1].split(",") if h.strip())
    if not hosts:
        raise InvalidArgumentError("etcd:// needs at least one host[:port]")
    return tuple(
        h if h.rsplit(":", 1)[-1].isdigit() and ":" in h else f"{h}:{DEFAULT_PORT}" for h in hosts
    )


def _read_file(option: str, path: object) -> bytes:
    try:
        return Path(str(path)).read_bytes()
    except OSError as error:
        raise InvalidArgumentError(f"{option}={path!r}: {error.strerror}") from None


def parse_url(url: str, options: Mapping[str, object]) -> tuple[ConnectionOptions, str]:
    """The connection options and the key prefix of ``etcd://host[:port][,...]?options``
    (``etcds://`` for TLS); ``options`` (keywords) win over the query."""
    parts = urlsplit(url)
    settings = merged_settings("etcd", parts, options, _OPTIONS)
    if parts.path not in ("", "/"):
        raise InvalidArgumentError(f"etcd:// takes no path (use ?prefix=); got {parts.path!r}")
    prefix = str(settings.get("prefix", DEFAULT_PREFIX))
    if not prefix:
        raise InvalidArgumentError("prefix= must not be empty")
    tls = parts.scheme.lower() == "etcds" or "ca" in settings
    credentials = None
    if tls:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_read_file("ca", settings["ca"]) if "ca" in settings else None,
            private_key=_read_file("key", settings["key"]) if "key" in settings else None,
            certificate_chain=_read_file("cert", settings["cert"]) if "cert" in settings else None,
        )
    elif "cert" in settings or "key" in settings:
        raise InvalidArgumentError("cert= and key= need TLS: use etcds:// or give ca=")
    connect_timeout = seconds(settings, "connect_timeout", 5.0)
    request_timeout = seconds(settings, "request_timeout", 5.0)
    user = settings.get("user")
    connection = ConnectionOptions(
        endpoints=_endpoints(parts.netloc),
        credentials=credentials,
        server_hostname=str(settings["server_hostname"]) if "server_hostname" in settings else None,
        user=unquote(str(user)) if user is not None else None,
        password=str(settings.get("password", "")) if user is not None else None,
        connect_timeout=connect_timeout,
        request_timeout=request_timeout,
        withdraw_wait=withdraw_wait(settings),
    )
    return connection, prefix
