"""An operator's acts on ``tenure serve`` itself, at its ``tenure://`` URL: a backup read,
the servers' files reloaded (protocol version 8, :mod:`tenure._protocol.admin`).

``tenure backup`` and ``tenure reload`` take the URL, token and TLS settings every
other command takes (as ``etcdctl snapshot save`` takes etcd's client URL): a
connection of their own, not a client's sessions.

* :func:`read_backup` reads one service's backup (a cluster's: its leader's, found
  through the doors as every request finds it) a part at a time, each as large as
  this end's frames allow, and hands each part to the caller as it comes: a backup of
  any size, never held whole in memory. A connection lost half-way fails it (the next
  connection has no backup under way): take it again.
* :func:`reload_servers` asks each door of the URL (standbys too: each member reloads
  its own files) on a connection of its own, all at once, as ``tenure cluster
  status`` asks them.

An older server (protocol version 7 or before) has neither: UnsupportedError, naming
what to upgrade, before anything is sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from tenure._core import Effect
from tenure._protocol import Welcome
from tenure._protocol.admin import FilesReloaded, ReadBackup, ReloadFiles
from tenure.backends._doors import Door, Doors
from tenure.backends._link import Link, LinkOptions, describe_error
from tenure.backends._link_errors import DisconnectedError
from tenure.backends._remote_url import parse
from tenure.errors import InvalidArgumentError, TenureError, UnavailableError

__all__ = ["RELOAD_ANSWER_WAIT", "DoorReload", "READ_OVERHEAD", "read_backup", "reload_servers"]

#: What a Reply frame adds to a ReadBackup's bytes, at most: each read asks for this
#: end's ``max_frame_size`` less it (the server's rule: tenure._protocol.admin).
READ_OVERHEAD = 64
#: The least ``request_timeout`` a ReloadFiles gets: the server answers it once the
#: files are loaded (in a thread), which takes as long as they take: seconds for an
#: auth file of 100,000 tokens, and more on a busy machine (44.6 s was measured beside
#: a CPU hog), where the default request deadline (30 s) would give it up while the
#: reload goes on. A larger ``request_timeout`` in the URL still counts.
RELOAD_ANSWER_WAIT = 600.0


class _AloneHome:
    """The home of a link that sends only the server's own acts: nothing to route."""

    def push(self, effect: Effect) -> None:
        """No session lives on this link: nothing is pushed to it."""

    async def connected(self, welcome: Welcome) -> None:
        """Nothing to set up."""

    def disconnected(self) -> None:
        """Nothing to freeze."""


async def read_backup(
    url: str, options: Mapping[str, object], write: Callable[[bytes], object]
) -> tuple[str, int]:
    """Read a backup of the service at ``url`` (a cluster's from its leader), handing
    each part to ``write`` in order, the file's digest last; the server that took it
    (``HOST:PORT``) and the bytes read.

    Raises:
        InvalidArgumentError: ``url`` names several independent servers (``sharded``).
        UnsupportedError: the server speaks no ReadBackup (protocol version 7 or before).
        DisconnectedError: the connection was lost half-way: nothing whole was read.
        TenureError: the server refused (not an admin, ``max_backups``) or failed.
    """
    settings = parse(url, options)
    if settings.sharded and len(settings.endpoints) > 1:
        raise InvalidArgumentError(
            "a sharded URL names several independent servers, each with a state of its "
            "own: back up each by its own URL (tenure://HOST:PORT)"
        )
    doors = Doors(settings.endpoints, server_hostname=settings.server_hostname)
    link = Link(doors, settings.link, _AloneHome())
    await link.open()
    size = settings.link.max_frame_size - READ_OVERHEAD
    where, offset, epoch = str(link.endpoint), 0, link.epoch
    try:
        while True:
            if not link.ready or link.epoch != epoch:  # (a new connection has no backup)
                raise DisconnectedError(f"lost the connection to {where}")
            part = await link.call(ReadBackup(offset, size))
            if not part:
                return where, offset
            write(part)
            offset += len(part)
    except DisconnectedError as error:
        raise DisconnectedError(
            f"the backup from {where} was cut short after {offset} bytes ({error}): take it again"
        ) from None
    finally:
        await link.aclose()


@dataclass(frozen=True, slots=True)
class DoorReload:
    """What one door of a URL answered to ReloadFiles (:func:`reload_servers`): its
    address as the URL writes it, and what changed, or why nothing did."""

    door: str
    reloaded: FilesReloaded | None = None
    error: TenureError | None = None


async def reload_servers(url: str, options: Mapping[str, object]) -> list[DoorReload]:
    """Have each door of ``url`` (every member of a cluster, every shard) read its TLS
    and auth files again, all at once; one :class:`DoorReload` per door, in the URL's
    order."""
    settings = parse(url, options)
    waits = max(settings.link.request_timeout, RELOAD_ANSWER_WAIT)
    link_options = replace(settings.link, accept_standby=True, request_timeout=waits)
    return list(await asyncio.gather(*(_reload(door, link_options) for door in settings.endpoints)))


async def _reload(door: Door, options: LinkOptions) -> DoorReload:
    link = Link(door, options, _AloneHome())
    try:
        await link.open()
        return DoorReload(str(door), await link.call(ReloadFiles()))
    except TenureError as error:
        return DoorReload(str(door), error=error)
    except OSError as error:  # (not one of ours: said as a connection's failure)
        said = UnavailableError(f"cannot connect to {door}: {describe_error(error)}")
        return DoorReload(str(door), error=said)
    finally:
        await link.aclose()
