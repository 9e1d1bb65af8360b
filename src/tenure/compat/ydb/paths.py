"""YDB paths and tenure node names.

A YDB coordination node lives at a path in a database: ``/local/my-app``, or
``/local/team/jobs`` in a directory. The YDB face answers for one database
(``--ydb-database``, default ``/local``), and a node's tenure name is its path
inside that database: ``/local/my-app`` is node ``my-app``, ``/local/team/jobs`` is
``team/jobs``. A path without the leading slash is taken inside the database, as
YDB does (``my-app`` is ``/local/my-app``). So a node made through YDB is the same
node to ``tenure://`` clients, and the other way round.
"""

from __future__ import annotations

from dataclasses import dataclass


class OutsideDatabaseError(ValueError):
    """A path that names no node of the database (another database, or malformed)."""


@dataclass(frozen=True, slots=True)
class Database:
    """The database the YDB face answers for (an absolute path such as ``/local``)."""

    path: str

    def node_of(self, path: str) -> str:
        """The tenure node name of a YDB path.

        Raises:
            OutsideDatabaseError: the path is outside this database, or has an empty part.
        """
        if path.startswith("/"):
            prefix = self.path + "/"
            if not path.startswith(prefix):
                raise OutsideDatabaseError(f"path {path!r} is not in database {self.path!r}")
            path = path[len(prefix) :]
        if not path or any(part == "" for part in path.split("/")):
            raise OutsideDatabaseError(f"path {path!r} names no node (empty part)")
        return path

    def path_of(self, node: str) -> str:
        """The YDB path of a tenure node."""
        return f"{self.path}/{node}"


def split_advertised(given: str) -> tuple[str, int]:
    """``HOST``, ``HOST:PORT`` or ``[V6]:PORT`` as (host, port) (port 0: not given).

    Raises:
        ValueError: a port that is not 1 to 65535, or an empty host.
    """
    host, port = given, ""
    if given.startswith("["):  # [v6] or [v6]:port
        host, _, rest = given[1:].partition("]")
        port = rest.removeprefix(":")
    elif given.count(":") == 1:  # host:port (a bare IPv6 address has more colons)
        host, _, port = given.partition(":")
    if not host or (port and not (port.isdigit() and 1 <= int(port) <= 65535)):
        raise ValueError(f"{given!r} is not HOST, HOST:PORT or [IPV6]:PORT")
    return host, int(port or 0)
