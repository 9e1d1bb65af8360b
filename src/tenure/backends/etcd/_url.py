"""``etcd://`` URLs: the etcd client's options and the prefix, and the backend's own.

The endpoints, TLS, auth, the timeouts and the prefix are what every etcd URL takes
(:mod:`tenure._etcd.url`); the backend adds ``withdraw_wait`` (as every backend's).
See :mod:`tenure.backends.etcd` for what each option means.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from tenure._etcd.client import EtcdClientOptions
from tenure._etcd.url import OPTIONS, read_settings
from tenure._url_options import merged_settings
from tenure.backends._options import withdraw_wait

__all__ = ["BackendUrl", "parse_url"]

#: The options of an ``etcd://`` URL: every etcd URL's, and the backend's own.
_OPTIONS: Final = OPTIONS | {"withdraw_wait"}


@dataclass(frozen=True, slots=True)
class BackendUrl:
    """A parsed ``etcd://`` URL: how to reach etcd, where the keys live, and the
    sessions' ``withdraw_wait`` (the session core's, not the client's)."""

    client: EtcdClientOptions
    prefix: str
    withdraw_wait: float


def parse_url(url: str, options: Mapping[str, object]) -> BackendUrl:
    """The parts of ``etcd://host[:port][,...]?options`` (``etcds://`` for TLS);
    ``options`` (keywords) win over the query."""
    parts = urlsplit(url)
    settings = merged_settings("etcd", parts, options, _OPTIONS)
    client, prefix = read_settings(parts, settings)
    return BackendUrl(client, prefix, withdraw_wait(settings))
