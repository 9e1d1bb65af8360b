"""etcd URLs: ``etcd://host[:port][,...]?options`` (``etcds://`` for TLS), read.

What every user of the etcd client reads from its URL: the endpoints, TLS, auth, the
timeouts (:class:`~tenure._etcd.client.EtcdClientOptions`) and the prefix its keys
live under. The ``etcd://`` backend adds options of its own
(:mod:`tenure.backends.etcd._url`; what each option means: :mod:`tenure.backends.etcd`),
and a cluster's ``--cluster`` names the cluster in the path
(:mod:`tenure.server._config.cluster_url`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final
from urllib.parse import SplitResult, unquote, urlsplit

import grpc

from tenure._etcd.client import EtcdClientOptions
from tenure._url_options import merged_settings, seconds
from tenure.errors import InvalidArgumentError

__all__ = ["DEFAULT_PORT", "DEFAULT_PREFIX", "OPTIONS", "parse_url", "read_settings"]

DEFAULT_PORT: Final = 2379
DEFAULT_PREFIX: Final = "/tenure/"

#: The options every etcd URL takes: the prefix, and how the client reaches the cluster.
OPTIONS: Final = frozenset(
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


def parse_url(url: str, options: Mapping[str, object]) -> tuple[EtcdClientOptions, str]:
    """The client's options and the key prefix of ``etcd://host[:port][,...]?options``
    (``etcds://`` for TLS); ``options`` (keywords) win over the query, and an option
    not in :data:`OPTIONS` is refused."""
    parts = urlsplit(url)
    return read_settings(parts, merged_settings("etcd", parts, options, OPTIONS))


def read_settings(
    parts: SplitResult, settings: Mapping[str, object]
) -> tuple[EtcdClientOptions, str]:
    """The client's options and the key prefix of the URL split into ``parts``, whose
    ``settings`` (its query with the keywords over it) the caller merged and checked:
    a caller with options of its own reads them from ``settings`` too."""
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
    client = EtcdClientOptions(
        endpoints=_endpoints(parts.netloc),
        credentials=credentials,
        server_hostname=str(settings["server_hostname"]) if "server_hostname" in settings else None,
        user=unquote(str(user)) if user is not None else None,
        password=str(settings.get("password", "")) if user is not None else None,
        connect_timeout=connect_timeout,
        request_timeout=request_timeout,
    )
    return client, prefix
