"""What a ``tenure://`` URL and its options say (:mod:`tenure.backends.remote`)."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qsl, urlsplit

from tenure._url_options import MAX_SECONDS, seconds
from tenure.backends._link import Door, LinkOptions
from tenure.backends._link_deadline import REQUEST_TIMEOUT
from tenure.backends._options import shown_url, withdraw_wait
from tenure.errors import InvalidArgumentError

__all__ = [
    "CLOSE_WAIT",
    "DEFAULT_PORT",
    "OPTIONS",
    "RemoteOptions",
    "flag",
    "parse",
    "servers_of",
    "staleness_of",
    "tls_context",
]

DEFAULT_PORT: Final = 6388
#: The default of ``close_wait``: the most seconds a client's close waits for a
#: connection, and for the server's answers, to close the sessions it gave up (or
#: whose close a lost connection cut off); those left are dropped, to expire on the
#: server (:meth:`tenure.backends._remote_session.Shard.aclose`).
CLOSE_WAIT: Final = 5.0

#: Every option of tenure:// URLs.
OPTIONS: Final = frozenset(
    {
        "token",
        "ca",
        "cert",
        "key",
        "server_hostname",
        "ssl",
        "connect_timeout",
        "request_timeout",
        "client_name",
        "sharded",
        "withdraw_wait",
        "close_wait",
        "max_staleness",
    }
)
#: How ``sharded`` may be spelt, and what each spelling means.
FLAGS: Final = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def servers_of(url: str, context: ssl.SSLContext | None, hostname: str | None) -> list[Door]:
    """The servers ``url`` lists, in its order, reached with ``context`` (TLS, or None)."""
    parts = urlsplit(url)
    if parts.path not in ("", "/") or parts.fragment or "@" in parts.netloc:
        raise InvalidArgumentError(
            f"expected tenure://host:port[,host:port...][?options], got {shown_url(url)}"
        )
    found: list[Door] = []
    for item in parts.netloc.split(","):
        try:
            one = urlsplit(f"//{item.strip()}")
            host, port = one.hostname, one.port or DEFAULT_PORT
        except ValueError as error:
            raise InvalidArgumentError(
                f"bad server address {item!r} in {shown_url(url)}: {error}"
            ) from None
        if not host:
            raise InvalidArgumentError(f"a server address in {shown_url(url)} has no host")
        found.append(Door(host, port, context, hostname or host if context else None))
    if len({str(e) for e in found}) != len(found):
        raise InvalidArgumentError(f"a server is listed twice in {shown_url(url)}")
    return found


def tls_context(scheme: str, options: Mapping[str, object]) -> ssl.SSLContext | None:
    """The TLS context the options ask for (``tenures://`` always has one); None: TCP."""
    given = options.get("ssl")
    if given is not None:
        if not isinstance(given, ssl.SSLContext):
            raise InvalidArgumentError("ssl= must be an ssl.SSLContext")
        return given
    ca, cert, key = (options.get(name) for name in ("ca", "cert", "key"))
    if scheme == "tenure" and ca is None and cert is None:
        return None
    try:
        context = ssl.create_default_context(cafile=str(ca) if ca else None)
        if cert is not None:
            context.load_cert_chain(str(cert), str(key) if key else None)
    except (OSError, ssl.SSLError) as error:
        raise InvalidArgumentError(f"cannot load the TLS files: {error}") from None
    return context


@dataclass(frozen=True, slots=True)
class RemoteOptions:
    """What a ``tenure://`` URL and its options say."""

    endpoints: list[Door]
    server_hostname: str | None
    link: LinkOptions
    sharded: bool
    withdraw_wait: float
    close_wait: float = CLOSE_WAIT
    #: Seconds a read may be stale, answered by a standby (None: the leader answers).
    max_staleness: float | None = None


def flag(settings: Mapping[str, object], option: str) -> bool:
    """A true/false option (a bool, or its words in the URL)."""
    value = settings.get(option, False)
    if isinstance(value, bool):
        return value
    found = FLAGS.get(str(value).strip().lower())
    if found is None:
        raise InvalidArgumentError(
            f"{option} must be true or false (1/0, yes/no), got {str(value)!r}"
        )
    return found


def parse(url: str, options: Mapping[str, object]) -> RemoteOptions:
    """What ``url`` and ``options`` (keywords, over the URL's query) say; an
    InvalidArgumentError naming what is wrong."""
    try:
        parts = urlsplit(url)
    except ValueError as error:  # e.g. tenure://[bad: "Invalid IPv6 URL"
        raise InvalidArgumentError(f"malformed URL {shown_url(url)}: {error}") from None
    scheme = parts.scheme.lower()
    merged: dict[str, object] = dict(parse_qsl(parts.query, keep_blank_values=True))
    merged.update(options)
    unknown = sorted(set(merged) - OPTIONS)
    if unknown:
        raise InvalidArgumentError(
            f"{scheme}:// does not know the options {unknown}; known: {sorted(OPTIONS)}"
        )
    try:
        timeout = float(str(merged.get("connect_timeout", 5.0)))
    except ValueError:
        raise InvalidArgumentError("connect_timeout must be a number of seconds") from None
    if not 0 < timeout < float("inf"):
        raise InvalidArgumentError("connect_timeout must be a positive number of seconds")
    request_timeout = seconds(merged, "request_timeout", REQUEST_TIMEOUT)
    wait = withdraw_wait(merged)
    close_wait = seconds(merged, "close_wait", CLOSE_WAIT)
    sharded = flag(merged, "sharded")
    staleness = staleness_of(merged)
    token = merged.get("token")
    link_options = LinkOptions(
        token=None if token is None else str(token),
        client_name=str(merged.get("client_name", "tenure-python")),
        connect_timeout=timeout,
        request_timeout=request_timeout,
    )
    given = merged.get("server_hostname")
    hostname = None if given is None else str(given)
    context = tls_context(scheme, merged)
    endpoints = servers_of(url, context, hostname)
    return RemoteOptions(endpoints, hostname, link_options, sharded, wait, close_wait, staleness)


def staleness_of(settings: Mapping[str, object]) -> float | None:
    """``max_staleness``: seconds, 0 (fresh: what etcd committed before the read was
    sent) up to :data:`MAX_SECONDS`; None if not given."""
    given = settings.get("max_staleness")
    if given is None:
        return None
    try:
        value = float(given)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidArgumentError("max_staleness must be a number of seconds") from None
    if not 0 <= value <= MAX_SECONDS:
        raise InvalidArgumentError(
            f"max_staleness must be in [0, {MAX_SECONDS:g}] seconds, got {value:g}"
        )
    return value
