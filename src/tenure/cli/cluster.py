"""``tenure cluster status``: a ``tenure serve --cluster`` as each of its doors sees it.

Each door of ``--url`` is asked on a connection of its own (a standby answers
too), through :func:`tenure.backends.remote.cluster_status`, imported when the
command runs: the CLI otherwise stays on the public API, and this is the one
command that speaks to servers rather than to a backend. A service of several cells
(``--cell``) is shown cell by cell (:mod:`tenure.cli._cluster_cells`).

Layer (CONTRIBUTING.md): this module may also import tenure.backends.remote (lazily).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import click
from rich.text import Text

from tenure.cli import _render
from tenure.cli._auth_token import connect_token, redact
from tenure.cli._cluster_cells import (
    LEADER,
    CellStatus,
    cell_of,
    cells_json,
    cells_parts,
    cells_status,
    is_service,
    members_json,
    members_table,
    no_leader,
    service_view,
    shown_view,
)
from tenure.cli._common import (
    CLIENT_NAME,
    CommandFailedError,
    json_option,
    print_json,
    run,
    tenure_flags,
    tenure_options,
    url_option,
)
from tenure.cli._status import Status

if TYPE_CHECKING:
    from tenure.backends.remote import ClusterView, DoorStatus

#: Welcome.role of a server that is not part of a cluster.
STANDALONE = ""
#: What a standalone server is, in the words of ``tenure cluster status``.
STANDALONE_WORDS = "a standalone server (tenure serve without --cluster)"


@click.group()
def cluster() -> None:
    """A cluster of tenure servers (tenure serve --cluster)."""


@cluster.command()
@tenure_options
@json_option
@url_option
def status(url: str, as_json: bool, **flags: Any) -> int:
    """Show the members of the cluster behind each door of --url (tenure://a,b,c).

    Every member (role, address, applied log index, lag behind the log, age of its
    record), the leader and its term, the log index, and each door that could not
    be asked, and why. Exit status 0 when every door answered and one of them
    leads, 1 when none of those that answered leads, 3 when a door could not be
    asked (down, refused, or a server that is not part of a cluster).

    A service of several cells (--cell) is shown cell by cell, each cell from the
    answer of one of its members if a door of it answered, else from its records in
    the service's directory; exit status 1 then when a cell has no leader.
    """
    if urlsplit(url).scheme.lower() not in ("tenure", "tenures"):
        raise click.BadParameter(
            f"cluster status asks tenure:// servers, got {redact(repr(url))}", param_hint="--url"
        )
    token = connect_token(url)
    options = {
        **({} if token is None else {"token": token}),
        **tenure_flags(flags),
        "client_name": CLIENT_NAME,
    }

    async def main() -> list[DoorStatus]:
        from tenure.backends.remote import cluster_status  # (see the module docstring)

        return await cluster_status(url, options)

    doors = run(main())
    cells = cells_status(doors)
    service = cells if is_service(doors) else None
    view = shown_view(doors) if service is None else service_view(doors, service)
    verdict, why = judge(doors, view, service)
    if as_json:
        print_json(status_json(doors, view, verdict, cells))
        return verdict
    out = _render.console()
    for part in status_parts(doors, view, service):
        out.print(part)
    if verdict != Status.OK:
        raise CommandFailedError(why, verdict)
    return Status.OK


def judge(
    doors: list[DoorStatus], view: ClusterView | None, cells: list[CellStatus] | None = None
) -> tuple[Status, str]:
    """The exit status, and why it is not OK (see :func:`status`); ``cells``: a
    service's, each judged on its own (None: one cluster)."""
    failed = [door for door in doors if door.view is None]
    if view is None:
        alone = standalone(doors)
        if alone and len(alone) == len(doors):
            return Status.FAILED, f"{_listed(alone)} {STANDALONE_WORDS}, not part of a cluster"
        return Status.FAILED, f"no door of the cluster answered ({door_errors(failed)})"
    if cells is not None:
        leaderless = [no_leader(cell) for cell in cells if not cell.leads]
        if leaderless:
            return Status.BUSY, f"a cell has no leader: {'; '.join(leaderless)}"
    elif not any(door.role == LEADER for door in doors if door.view is not None):
        known = f"the members name {view.leader!r}" if view.leader else "no member leads"
        return Status.BUSY, f"no door that answered leads ({known})"
    if failed:
        return Status.FAILED, (
            f"{len(failed)} of {len(doors)} doors could not be asked: {door_errors(failed)}"
        )
    return Status.OK, ""


def standalone(doors: list[DoorStatus]) -> list[DoorStatus]:
    """The doors whose server greeted as a standalone server (no cluster's member)."""
    return [door for door in doors if door.view is None and door.role == STANDALONE]


def _listed(doors: list[DoorStatus]) -> str:
    """``a:1 is`` or ``a:1, b:2 are``."""
    names = ", ".join(door.door for door in doors)
    return f"{names} {'is' if len(doors) == 1 else 'are'}"


def door_errors(failed: list[DoorStatus]) -> str:
    """``door: why; door: why``."""
    return "; ".join(f"{door.door}: {error_text(door)}" for door in failed)


def error_text(door: DoorStatus) -> str:
    """Why ``door`` gave no view, in one line."""
    if door.error is None:
        return "no answer"
    return f"{type(door.error).__name__}: {' '.join(str(door.error).split())}"


def answer_text(door: DoorStatus) -> str:
    """What the doors table says ``door`` answered."""
    if door.view is not None:
        return "ok"
    if door.role == STANDALONE:
        return "not part of a cluster: a standalone server"
    return error_text(door)


def status_json(
    doors: list[DoorStatus],
    view: ClusterView | None,
    verdict: Status,
    cells: list[CellStatus] | None = None,
) -> dict[str, object]:
    """``tenure cluster status --json``'s document: the keys of one cluster are those of
    ``view`` (in a service, its cell's: ``cell``), ``cells`` every cell's."""
    return {
        "ok": verdict == Status.OK,
        "cluster": None if view is None else view.cluster,
        "leader": None if view is None else view.leader or None,
        "term": None if view is None else view.term,
        "index": None if view is None else view.index,
        "answered_by": None if view is None else view.answered_by,
        "members": [] if view is None else members_json(view.members, view.index),
        "cell": None if view is None else cell_of(view),
        "cells": cells_json(cells or []),
        "doors": [
            {
                "door": door.door,
                "answered": door.view is not None,
                "role": door.role,
                "member": None if door.view is None else door.view.answered_by,
                "error": None if door.view is not None else error_text(door),
            }
            for door in doors
        ],
    }


def status_parts(
    doors: list[DoorStatus], view: ClusterView | None, cells: list[CellStatus] | None = None
) -> list[Any]:
    """What the command prints: a heading, the members, the doors (``cells``: a
    service's, shown cell by cell in place of the heading and the members)."""
    parts: list[Any] = []
    alone = standalone(doors)
    if view is None and alone and len(alone) == len(doors):
        parts.append(Text(_render.safe(f"not a cluster: {_listed(alone)} {STANDALONE_WORDS}")))
    elif view is None and alone:
        parts.append(
            Text(
                _render.safe(
                    f"no member of a cluster answered: {_listed(alone)} {STANDALONE_WORDS}; "
                    "the cluster's state is unknown"
                )
            )
        )
    elif view is None:
        parts.append(Text("no door answered: the cluster's state is unknown"))
    elif cells is not None:
        parts += cells_parts(view.cluster, cells)
    else:
        # What the servers say is shown as text (no markup), control characters escaped.
        leader = f"leader {view.leader} (term {view.term})" if view.leader else "no leader"
        heading = (
            f"cluster {view.cluster!r}: {leader}, log index {view.index} "
            f"(as {view.answered_by} sees it)"
        )
        parts.append(Text(_render.safe(heading)))
        parts.append(members_table("members", view.members, view.index))
    parts.append(doors_table(doors, with_cells=cells is not None))
    return parts


def doors_table(doors: list[DoorStatus], *, with_cells: bool) -> Any:
    """Each door: its role, the member that answered (and its cell, ``with_cells``),
    what it answered."""
    columns = ["door", "role", "member", *(["cell"] if with_cells else []), "answer"]
    rows = []
    for door in doors:
        member = door.view.answered_by if door.view is not None else "-"
        cell = [cell_of(door.view) if door.view is not None else "-"] if with_cells else []
        role = door.role or ("standalone" if door.role == "" else "-")
        rows.append([door.door, role, member, *cell, answer_text(door)])
    return _render.table("doors", columns, rows)
