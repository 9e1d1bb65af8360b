"""``tenure backup``, ``tenure backup verify`` and ``tenure restore`` (docs/operations.md,
"Backup and restore").

``tenure backup [--url URL] FILE`` asks a running server for a backup (a cluster's
leader, found from any member) at the URL every command takes (``tenure://``,
``TENURE_URL``: the native protocol's ReadBackup), or at its HTTP endpoint
(``http(s)://HOST:HTTP_PORT``, ``--http-port``: :mod:`tenure.cli._server_calls`), with
an admin token (as every command takes one: ``--token-file``, ``TENURE_AUTH_TOKEN``)
or, of a server without an auth file, from the server's own host; it writes it to
``FILE.partial`` and renames it to ``FILE`` once its checksum is checked. ``tenure
backup verify FILE`` prints what a backup holds and exits non-zero on a bad checksum
or an unknown version. ``tenure restore FILE --data-dir DIR`` makes a new data
directory of it (``--cluster URL``: a new cluster) whose tokens are all greater than
any the old server handed out (docs/fencing.md, "Across a restore"), its sessions
ended.

Layer (CONTRIBUTING.md): this module may also import tenure.server._durability
(lazily) and tenure.server._cluster.restore (lazily).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import urlsplit, urlunsplit

import click

from tenure.cli._auth_token import auth_token
from tenure.cli._common import CommandFailedError, permission_words
from tenure.cli._server_calls import (
    HTTP_SCHEMES,
    ca_option,
    http_context,
    native_backup,
    scheme_of,
    server_url_option,
)
from tenure.cli._status import Status
from tenure.errors import AuthenticationError, PermissionDeniedError

if TYPE_CHECKING:
    from tenure.server._durability.backup import Backup
    from tenure.server._durability.restore import Restored

__all__ = ["backup", "restore"]

#: Bytes read from the server per write to the file.
_CHUNK: Final = 1 << 20
#: The header in which a cluster's standby names the leader's HTTP address.
_LEADER_HEADER: Final = "Tenure-Leader"


class _BackupGroup(click.Group):
    """``tenure backup [--url URL] FILE`` is ``tenure backup save ...``: the group's
    only other command is ``verify``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Route anything but ``verify`` (and the group's own help) to ``save``."""
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["save", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_BackupGroup)
def backup() -> None:
    """Back up a running server: `tenure backup [--url URL] FILE` (as `save`); or check
    one: `tenure backup verify FILE`."""


def _endpoint(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/admin/backup", "", ""))


def _download(
    endpoint: str,
    token: str,
    write: Callable[[bytes], object],
    context: ssl.SSLContext | None,
    *,
    follow: bool = True,
) -> None:
    request = urllib.request.Request(
        endpoint, method="POST", data=b"", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, context=context) as response:
            while chunk := response.read(_CHUNK):
                write(chunk)
    except urllib.error.HTTPError as error:
        with error:  # (its connection closed: a 421's is not the one the leader gets)
            words = error.read().decode(errors="replace").strip()
        leader = error.headers.get(_LEADER_HEADER)
        if error.code == 421 and leader and follow:  # a standby: ask the leader
            scheme = urlsplit(endpoint).scheme
            _download(f"{scheme}://{leader}/admin/backup", token, write, context, follow=False)
            return
        status = Status.USAGE if error.code in (401, 403) else Status.FAILED
        message = f"the server refused the backup ({error.code}): {words}"
        raise CommandFailedError(message, status) from None
    except http.client.HTTPException as error:  # (cut short: the server failed mid-way)
        message = f"the backup from {endpoint} was cut short ({error!r}): see the server's log"
        raise CommandFailedError(message, Status.FAILED) from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise CommandFailedError(f"cannot reach {endpoint}: {reason}", Status.FAILED) from None


@backup.command()
@server_url_option
@ca_option
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
def save(url: str, ca: Path | None, file: Path) -> int:
    """Write a backup of the server at --url to FILE (FILE.partial until it is whole).

    --url is the URL every command takes (tenure://HOST:PORT, or TENURE_URL; of a
    cluster any member: the leader takes it), or the server's HTTP endpoint
    (http(s)://HOST:HTTP_PORT). It needs an admin token (read-write, every node:
    --token-file FILE or TENURE_AUTH_TOKEN); a server without an auth file gives a
    backup over tenure:// to a client on its own host only.
    """
    from tenure.server._durability.backup import BadBackupError, read_backup, summary
    from tenure.server._durability.storage import private_file

    scheme = scheme_of(url, "backup")
    partial = file.with_name(file.name + ".partial")
    if not file.parent.is_dir():  # (said before the server is asked to take it)
        why = "is not a directory" if file.parent.exists() else "does not exist"
        raise CommandFailedError(
            f"cannot write the backup to {file}: its directory {file.parent} {why}",
            Status.USAGE,
        )
    token = auth_token(url)
    if scheme in HTTP_SCHEMES and token is None:
        raise CommandFailedError(
            "a backup over the HTTP endpoint needs an admin token: --token-file FILE or "
            "TENURE_AUTH_TOKEN",
            Status.USAGE,
        )
    try:
        with _written(lambda: os.fdopen(private_file(partial), "wb"), file, partial) as out:
            write = _writing(out, file, partial)
            if scheme in HTTP_SCHEMES:
                assert token is not None
                _download(_endpoint(url), token, write, http_context(ca))
            else:
                _native(url, ca, write)
            _written(lambda: _synced(out), file, partial)
        try:
            facts = summary(read_backup(partial))
        except BadBackupError as error:
            raise CommandFailedError(
                f"the backup received is bad: {error}", Status.FAILED
            ) from None
        _written(lambda: os.replace(partial, file), file, partial)
    finally:
        partial.unlink(missing_ok=True)
    click.echo(f"{file}: {_line(facts)}")
    return Status.OK


T = TypeVar("T")


def _written(act: Callable[[], T], file: Path, partial: Path) -> T:
    """``act()``, a step of writing the backup's file: its OSError said as the file's."""
    try:
        return act()
    except OSError as error:
        where = error.filename or partial
        raise CommandFailedError(
            f"cannot write the backup to {file}: {where}: {error.strerror or error}",
            Status.FAILED,
        ) from None


def _synced(out: IO[bytes]) -> None:
    """``out``'s bytes on the disk (flushed, then fsync)."""
    out.flush()
    os.fsync(out.fileno())


def _writing(out: IO[bytes], file: Path, partial: Path) -> Callable[[bytes], object]:
    """What writes each part of the backup to ``out`` (its OSError said as the file's)."""
    return lambda part: _written(lambda: out.write(part), file, partial)


def _native(url: str, ca: Path | None, write: Callable[[bytes], object]) -> None:
    """The backup over the native protocol, handed to ``write`` (a refusal said as the
    HTTP endpoint's is: exit 2 for a token that may not, or none)."""
    try:
        native_backup(url, ca, write)
    except (PermissionDeniedError, AuthenticationError) as error:
        said = f"{type(error).__name__}: {permission_words(str(error))}"
        raise CommandFailedError(f"the server refused the backup: {said}", Status.USAGE) from None


def _line(facts: dict[str, Any]) -> str:
    when = datetime.fromtimestamp(facts["created_at"], UTC).isoformat(timespec="seconds")
    return (
        f"{facts['nodes']} nodes, {facts['sessions']} sessions, {facts['semaphores']} "
        f"semaphores, {facts['holds']} holds, highest token {facts['highest_token']}, "
        f"taken {when}"
    )


@backup.command()
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--json", "as_json", is_flag=True, help="one JSON document")
def verify(file: Path, as_json: bool) -> int:
    """Check FILE's checksum and version, and say what it holds."""
    from tenure.server._durability.backup import BadBackupError, read_backup, summary

    try:
        facts = summary(read_backup(file))
    except BadBackupError as error:
        raise CommandFailedError(str(error), Status.FAILED) from None
    if as_json:
        click.echo(json.dumps(facts, sort_keys=True))
        return Status.OK
    click.echo(f"{file}: a good backup (format {facts['format']})")
    for key in ("nodes", "sessions", "semaphores", "holds", "waiters", "claims"):
        click.echo(f"  {key}: {facts[key]}")
    click.echo(f"  highest token: {facts['highest_token']}")
    when = datetime.fromtimestamp(facts["created_at"], UTC).isoformat(timespec="seconds")
    click.echo(f"  taken: {when} of {facts['role']} server {facts['instance_id']}")
    return Status.OK


@click.command()
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="the data directory to make (empty, or --force)",
)
@click.option(
    "--cluster",
    metavar="URL",
    help="or a new cluster: etcd://HOST:PORT[,...]/NAME (a name not in use)",
)
@click.option("--force", is_flag=True, help="replace what DIR holds (a tenure data directory)")
@click.option(
    "--token-floor",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="start the tokens above N too, not only above this machine's clock in nanoseconds "
    "(docs/fencing.md, 'Across a restore')",
)
def restore(
    file: Path, data_dir: Path | None, cluster: str | None, force: bool, token_floor: int | None
) -> int:
    """Make DIR (or a new cluster) hold FILE's state; every token greater than the old."""
    from tenure.server._durability.backup import BadBackupError, read_backup
    from tenure.server._durability.dirlock import DataDirLockedError
    from tenure.server._durability.restore import (
        BadTokenFloorError,
        NotADataDirError,
        NotEmptyError,
    )
    from tenure.server._durability.restore import restore as restore_into

    if (data_dir is None) == (cluster is None):
        raise CommandFailedError("give --data-dir DIR or --cluster URL (one)", Status.USAGE)
    try:
        backup = read_backup(file)
        if cluster is not None:
            return _restore_cluster(file, backup, cluster, token_floor or 0)
        assert data_dir is not None
        done = restore_into(backup, data_dir, force=force, token_floor_at_least=token_floor or 0)
    except BadBackupError as error:
        raise CommandFailedError(str(error), Status.FAILED) from None
    except BadTokenFloorError as error:
        raise CommandFailedError(str(error), Status.USAGE) from None
    except (NotEmptyError, NotADataDirError) as error:
        raise CommandFailedError(str(error), Status.USAGE) from None
    except DataDirLockedError:
        raise CommandFailedError(
            f"{data_dir} is in use by a running tenure server: stop it first", Status.BUSY
        ) from None
    click.echo(f"{data_dir}: restored from {file}; {_restored(done)}")
    return Status.OK


def _restored(done: Restored) -> str:
    return (
        f"{done.sessions_ended} sessions ended (their clients are told); every token "
        f"handed out is greater than {done.token_floor} (the backup's highest: "
        f"{done.backup_token})"
    )


def _restore_cluster(file: Path, backup: Backup, url: str, token_floor: int) -> int:
    from tenure.server._durability.restore import restored_engine

    try:
        from tenure.server._cluster.restore import ClusterInUseError, restore_cluster
    except ImportError as error:
        missing = (error.name or "grpc").split(".")[0]
        raise CommandFailedError(
            f"a cluster needs the etcd extra ({missing} is missing): "
            "pip install 'tenure[server,etcd]'",
            Status.USAGE,
        ) from None
    engine, done = restored_engine(backup, token_floor_at_least=token_floor)
    try:
        name = asyncio.run(restore_cluster(url, engine))
    except ValueError as error:
        raise CommandFailedError(f"--cluster: {error}", Status.USAGE) from None
    except ClusterInUseError as error:
        raise CommandFailedError(str(error), Status.USAGE) from None
    click.echo(f"cluster {name}: restored from {file}; {_restored(done)}")
    return Status.OK
