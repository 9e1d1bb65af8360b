"""What an operator asks a server to do to itself: ReadBackup and ReloadFiles (version 8).

``tenure backup`` and ``tenure reload`` reach a server at the URL every other
command takes (``tenure://``, its token and TLS settings), as ``etcdctl snapshot
save`` uses etcd's client URL: before version 8 they needed its HTTP endpoint
(issue 57). Neither is an engine command: each travels in a Request like one (its
answer matched by request id), and the server answers it itself, never journaling
it. Both need an admin token (read-write, every node), or, from a server without an
auth file, a client on the server's own host (docs/operations.md, "Backup and
restore").

:class:`ReadBackup` reads a backup file of the server's state a part at a time, so
that a backup of any size goes through frames of any size, at the pace the client
reads it: ``offset`` 0 begins a backup (one per connection: a connection's earlier
one is given up), and each later read goes on where the last one ended. Its answer is
a bin of at most ``max_bytes`` bytes (fewer when the peer's frames are smaller): the
file's bytes in order, its digest last, then an empty bin once all of it was read. A
cluster's standby answers it NOT_LEADER (the client goes to the leader, as for any
request); :class:`ReloadFiles` is answered by any member, each of its own files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tenure._core.commands import Command
from tenure._protocol.wire import STR, UINT, ArrayOf, Record

__all__ = [
    "FILES_RELOADED",
    "READ_BACKUP",
    "RELOAD_FILES",
    "FilesReloaded",
    "ReadBackup",
    "ReloadFiles",
]


@dataclass(frozen=True, slots=True)
class ReadBackup(Command[bytes]):
    """Read the next part of a backup of the server's state (module docstring).

    ``offset``: the bytes read of it so far (0: begin one); ``max_bytes``: the most
    this answer may carry (1 or more; the server sends fewer where the connection's
    frames are smaller). The answer: the next bytes, or an empty bin at the end.
    """

    offset: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FilesReloaded:
    """What a reload changed (as ``POST /admin/reload`` answers it): ``tls`` (``off``,
    ``tls`` or ``mtls``), the tokens' names added, removed, rotated (a new secret) and
    changed (access, nodes or quotas), the connections closed, and the other files
    read again (``http_tls``, ``ydb_tls``)."""

    tls: str
    tokens_added: tuple[str, ...] = ()
    tokens_removed: tuple[str, ...] = ()
    tokens_rotated: tuple[str, ...] = ()
    tokens_changed: tuple[str, ...] = ()
    connections_closed: int = 0
    others: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ReloadFiles(Command[FilesReloaded]):
    """Have the server read its TLS files and auth file again, as on SIGHUP: all of
    them taken, or (FAILED_PRECONDITION, naming the file) none."""


_NAMES: Final = ArrayOf(STR)

READ_BACKUP: Final = Record(ReadBackup, [("offset", UINT), ("max_bytes", UINT)], tag=43)
RELOAD_FILES: Final = Record(ReloadFiles, [], tag=44)
FILES_RELOADED: Final = Record(
    FilesReloaded,
    [
        ("tls", STR),
        ("tokens_added", _NAMES),
        ("tokens_removed", _NAMES),
        ("tokens_rotated", _NAMES),
        ("tokens_changed", _NAMES),
        ("connections_closed", UINT),
        ("others", _NAMES),
    ],
    tag=17,
)
