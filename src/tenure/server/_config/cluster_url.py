"""``--cluster etcd://h1:2379,h2:2379/NAME?options``: where a cluster's log lives.

The hosts and options are every etcd URL's (:mod:`tenure._etcd.url`, as ``etcd://``:
``etcds://`` and ``ca``, ``cert``, ``key`` for TLS, ``user`` and ``password``,
``prefix``, ``connect_timeout``, ``request_timeout``); the path names the cluster,
so that several clusters share one etcd. The etcd client (grpc, the ``etcd``
extra) is imported only when a URL is parsed, never by :func:`without_secrets`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from urllib.parse import unquote, urlsplit, urlunsplit

if TYPE_CHECKING:
    from tenure._etcd.client import EtcdClientOptions

__all__ = ["ClusterUrl", "check_cell", "parse_cell_etcd", "parse_cluster_url", "without_secrets"]

#: A cluster's name: what its keys are made of (the URL's path).
_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_PASSWORD: Final = re.compile(r"(?i)(password=)[^&]*")
#: The largest answer the cluster's etcd channel accepts: its servers read the log in
#: pages of many entries (gRPC's default is 4 MiB).
MAX_RECEIVE: Final = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ClusterUrl:
    """A parsed ``--cluster``: how to reach etcd, under which prefix, which cluster."""

    connection: EtcdClientOptions
    prefix: str
    name: str


def parse_cluster_url(url: str) -> ClusterUrl:
    """The parts of ``url`` (see the module docstring).

    Raises:
        ValueError: what is wrong with it (a missing name, an unknown option, the
            ``etcd`` extra not installed...).
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("etcd", "etcds"):
        raise ValueError("expected etcd://HOST:PORT[,HOST:PORT...]/NAME (or etcds://)")
    name = unquote(parts.path.strip("/"))
    if not name:
        raise ValueError("the path names the cluster: etcd://HOST:PORT/NAME")
    if not _NAME.match(name):
        raise ValueError(
            f"cluster name {name!r}: 1 to 64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    try:
        from tenure._etcd.url import parse_url
    except ImportError as error:
        raise ValueError(
            f"a cluster needs the etcd extra ({(error.name or 'grpc').split('.')[0]} is "
            "missing): pip install 'tenure[server,etcd]'"
        ) from None
    from tenure.errors import InvalidArgumentError

    try:
        options, prefix = parse_url(urlunsplit(parts._replace(path="")), {})
    except InvalidArgumentError as error:
        raise ValueError(str(error)) from None
    connection = dataclasses.replace(options, max_receive=MAX_RECEIVE)
    return ClusterUrl(connection, prefix, name)


def check_cell(cell: str) -> None:
    """A cell's name is as a cluster's.

    Raises:
        ValueError: what is wrong with it.
    """
    if not _NAME.match(cell):
        raise ValueError(
            f"cell name {cell!r}: 1 to 64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )


def parse_cell_etcd(url: str, cluster: ClusterUrl) -> ClusterUrl:
    """``--cell-etcd etcd://HOST:PORT[,...][?options]``: the etcd a cell's log lives in,
    its keys named as ``cluster``'s (the same name; the prefix the URL's, if it says).

    Raises:
        ValueError: what is wrong with it (a path, an unknown option...).
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("etcd", "etcds"):
        raise ValueError("expected etcd://HOST:PORT[,HOST:PORT...] (or etcds://)")
    if parts.path.strip("/"):
        raise ValueError("no path: the cell's keys are named after --cluster's")
    from tenure._etcd.url import parse_url
    from tenure.errors import InvalidArgumentError

    try:
        options, prefix = parse_url(urlunsplit(parts._replace(path="")), {})
    except InvalidArgumentError as error:
        raise ValueError(str(error)) from None
    connection = dataclasses.replace(options, max_receive=MAX_RECEIVE)
    return ClusterUrl(connection, prefix, cluster.name)


def without_secrets(url: str) -> str:
    """``url`` with any ``password=`` value hidden (for the log and error messages)."""
    return _PASSWORD.sub(r"\1***", url)
