"""``tenure cluster status`` over the native protocol: what each door of a URL says of
its cluster (:func:`cluster_status`), re-exported by :mod:`tenure.backends.remote`."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, replace

from tenure._core import Effect
from tenure._protocol import Welcome
from tenure._protocol.cluster import ClusterStatus, ClusterView
from tenure.backends._link import Door, Link, LinkOptions, describe_error
from tenure.backends._remote_url import parse
from tenure.errors import TenureError, UnavailableError

__all__ = ["DoorStatus", "cluster_status"]


@dataclass(frozen=True, slots=True)
class DoorStatus:
    """What one door of a URL answered to ClusterStatus (:func:`cluster_status`).

    ``door``: its address as the URL writes it; ``role``: what its Welcome said
    (``leader``, ``standby``; ``""`` for a standalone server; None if no handshake
    was completed); ``view``: the cluster as it sees it, or None and ``error``: why
    not (unreachable, refused, not part of a cluster: UnsupportedError).
    """

    door: str
    role: str | None = None
    view: ClusterView | None = None
    error: TenureError | None = None


class _StatusLinkHome:
    """The home of a link that only asks about the cluster: nothing to route or re-attach."""

    def push(self, effect: Effect) -> None:
        """No session lives on this link: nothing is pushed to it."""

    async def connected(self, welcome: Welcome) -> None:
        """Nothing to set up."""

    def disconnected(self) -> None:
        """Nothing to freeze."""


async def cluster_status(url: str, options: Mapping[str, object]) -> list[DoorStatus]:
    """Ask each door of ``url`` (standbys too) about its cluster, all at once; one
    :class:`DoorStatus` per door, in the URL's order (``sharded`` is ignored).

    Each door gets a connection of its own, which a standby's Welcome does not turn
    away, and is sent ClusterStatus once: what one door says is never taken for
    another's.
    """
    settings = parse(url, options)
    link_options = replace(settings.link, accept_standby=True)
    return list(
        await asyncio.gather(*(_ask(endpoint, link_options) for endpoint in settings.endpoints))
    )


async def _ask(endpoint: Door, options: LinkOptions) -> DoorStatus:
    link = Link(endpoint, options, _StatusLinkHome())
    role: str | None = None
    try:
        await link.open()
        role = link.welcome.role if link.welcome is not None else None
        seconds = options.connect_timeout
        try:
            async with asyncio.timeout(seconds):
                view = await link.call(ClusterStatus())
        except TimeoutError:
            why = f"{endpoint} did not answer ClusterStatus within {seconds:g} s"
            return DoorStatus(str(endpoint), role, error=UnavailableError(why))
        return DoorStatus(str(endpoint), role, view)
    except TenureError as error:
        return DoorStatus(str(endpoint), role, error=error)
    except OSError as error:  # (not one of ours: said as a connection's failure)
        said = UnavailableError(f"cannot connect to {endpoint}: {describe_error(error)}")
        return DoorStatus(str(endpoint), role, error=said)
    finally:
        await link.aclose()
