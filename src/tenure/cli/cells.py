"""``tenure cells``: the cells of a service and the moves of its nodes between them
(docs/cluster.md, "Cells").

Every command is given the service's ``--cluster etcd://HOSTS/NAME`` (as its members
were) and speaks to the directory there (:mod:`tenure.server._cluster.cell_admin`,
imported when the command runs, with the ``etcd`` extra): ``ls`` reads it, ``move``
begins a node's move and waits until the cells' leaders have carried it out,
``rebalance`` moves each node that is not where a client would create it now.

Layer (CONTRIBUTING.md): this module may also import tenure.server._cluster (lazily),
tenure.server._config (lazily) and tenure._etcd (lazily).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from tenure.cli import _render
from tenure.cli._common import CommandFailedError, json_option, print_json, run
from tenure.cli._status import Status
from tenure.errors import NotFoundError, PreconditionFailedError, TenureError

if TYPE_CHECKING:
    from tenure._etcd.client import EtcdClient
    from tenure.server._cluster.cell_admin import MoveOutcome, ServiceView
    from tenure.server._cluster.directory import DirectoryKeys

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

#: How long ``tenure cells move`` waits for one move by default, in seconds.
MOVE_TIMEOUT = 60.0

cluster_option = click.option(
    "--cluster",
    "cluster_url",
    required=True,
    envvar="TENURE_CLUSTER",
    help="the service's etcd://HOST:PORT[,...]/NAME, as its members were given it",
)


def wait_option(help_text: str) -> Callable[[F], F]:
    """``--timeout``: how long a command waits for a move (:data:`MOVE_TIMEOUT`)."""
    return click.option(
        "--timeout",
        type=click.FloatRange(min=0.1),
        default=MOVE_TIMEOUT,
        show_default=True,
        help=help_text,
    )


@click.group()
def cells() -> None:
    """The cells of a service (tenure serve --cluster ... --cell CELL)."""


@cells.command("ls")
@cluster_option
@json_option
def list_cells(cluster_url: str, as_json: bool) -> int:
    """List the cells: each one's number, members (the leader marked), nodes, and the
    moves under way."""
    view = run(_with_directory(cluster_url, _read))
    if as_json:
        print_json(_view_json(view))
        return Status.OK
    rows = []
    for name in sorted(view.cells):
        cell = view.cells[name]
        leaders = [m.name for m in cell.members if m.role == "leader"]
        number = "" if cell.number is None else str(cell.number)
        members = str(len(cell.members))
        rows.append((name, number, members, ", ".join(leaders) or "-", str(len(cell.nodes))))
    out = _render.console()
    out.print(_render.table(None, ("cell", "number", "members", "leader", "nodes"), rows))
    for node, place in sorted(view.places.items()):
        if place.to:
            out.print(f"moving: node {node!r} from cell {place.cell!r} to cell {place.to!r}")
    for node, copy in sorted(view.copies.items()):
        if copy.error:
            out.print(f"last move of node {node!r} to cell {copy.target!r} failed: {copy.error}")
    return Status.OK


@cells.command()
@click.argument("node")
@click.option("--to", "target", required=True, help="the cell to move the node to")
@wait_option("seconds to wait for the move to end (it goes on past them)")
@cluster_option
def move(node: str, target: str, timeout: float, cluster_url: str) -> int:
    """Move NODE to cell --to, under load: its holders keep their holds, its waiters
    their places, every token after it above every token before. Run again, it waits
    for the same move (a node on --to already is left there). Exit status 0 moved (or
    there), 3 refused or failed (why), 1 not ended within --timeout (it goes on)."""

    async def moving(conn: EtcdClient, keys: DirectoryKeys) -> MoveOutcome:
        from tenure.server._cluster.cell_admin import move_node

        return await move_node(conn, keys, node, target, timeout, click.echo)

    outcome = _moved(run(_with_directory(cluster_url, moving)))
    done = "is on" if outcome.source == outcome.target else "moved to"
    click.echo(f"node {outcome.node!r} {done} cell {outcome.target!r} (epoch {outcome.epoch})")
    return Status.OK


@cells.command()
@click.option("--dry-run", is_flag=True, help="only list the moves it would make")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="the most nodes moved by one run",
)
@wait_option("seconds to wait for each move (it goes on past them)")
@cluster_option
def rebalance(dry_run: bool, limit: int, timeout: float, cluster_url: str) -> int:
    """Move each node that is not on the cell a client would create it on now
    (rendezvous hashing of its name over the cells that have members), one at a
    time, at most --limit of them: after cells are added, their share of the nodes."""

    async def balance(conn: EtcdClient, keys: DirectoryKeys) -> list[tuple[str, str, str]]:
        from tenure.server._cluster.cell_admin import move_node, read_service, rebalancing

        plan = rebalancing(await read_service(conn, keys))[:limit]
        for node, source, target in plan:
            click.echo(
                f"{'would move' if dry_run else 'moving'} node {node!r}: {source} -> {target}"
            )
            if not dry_run:
                _moved(await move_node(conn, keys, node, target, timeout))
        return plan

    plan = run(_with_directory(cluster_url, balance))
    click.echo(f"{len(plan)} node(s) {'to move' if dry_run else 'moved'}")
    return Status.OK


async def _read(conn: EtcdClient, keys: DirectoryKeys) -> ServiceView:
    from tenure.server._cluster.cell_admin import read_service

    return await read_service(conn, keys)


def _moved(outcome: MoveOutcome) -> MoveOutcome:
    """``outcome``, if the node moved.

    Raises:
        CommandFailedError: it did not (why).
    """
    if not outcome.moved:
        raise CommandFailedError(
            f"node {outcome.node!r} stays on cell {outcome.source!r}: {outcome.error}",
            Status.FAILED,
        )
    return outcome


async def _with_directory(url: str, work: Callable[[EtcdClient, DirectoryKeys], Awaitable[T]]) -> T:
    """``work`` given a connection to the directory of the service ``url`` names.

    Raises:
        CommandFailedError: the URL is wrong (USAGE), the etcd extra is missing, etcd
            did not answer, a move was refused (FAILED), or one did not end in time.
    """
    try:
        from tenure._etcd.client import EtcdClient
        from tenure.server._cluster.directory import DirectoryKeys
        from tenure.server._config.cluster_url import parse_cluster_url
    except ImportError as error:
        missing = error.name or "a package"
        raise CommandFailedError(
            f"tenure cells needs the etcd extra ({missing} is missing): "
            "pip install 'tenure[server,etcd]'",
            Status.FAILED,
        ) from None
    try:
        parsed = parse_cluster_url(url)
    except ValueError as error:
        raise CommandFailedError(f"--cluster: {error}", Status.USAGE) from None
    conn = EtcdClient(parsed.connection)
    try:
        await conn.authenticate()
        return await work(conn, DirectoryKeys.of(parsed.prefix, parsed.name))
    except TimeoutError as error:
        raise CommandFailedError(str(error), Status.BUSY) from None
    except (NotFoundError, PreconditionFailedError) as error:
        raise CommandFailedError(str(error), Status.FAILED) from None
    except TenureError as error:
        raise CommandFailedError(f"the service's etcd: {error}", Status.FAILED) from None
    finally:
        await conn.close()


def _view_json(view: ServiceView) -> dict[str, Any]:
    return {
        "cells": [
            {
                "name": cell.name,
                "number": cell.number,
                "members": [
                    {"name": m.name, "role": m.role, "address": m.address} for m in cell.members
                ],
                "nodes": sorted(cell.nodes),
            }
            for cell in sorted(view.cells.values(), key=lambda cell: cell.name)
        ],
        "moves": [
            {"node": node, "from": place.cell, "to": place.to}
            for node, place in sorted(view.places.items())
            if place.to
        ],
        "failed": [
            {"node": node, "to": copy.target, "error": copy.error}
            for node, copy in sorted(view.copies.items())
            if copy.error
        ],
    }
