"""Groups: ``tenure group ls NODE GROUP`` (its members and their data)."""

from __future__ import annotations

import time
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from tenure._core.members import GROUP_DATA, joining_count, members_of
from tenure._core.values import OwnerInfo, SemaphoreDescription
from tenure.cli import _render
from tenure.cli._common import connect, json_option, print_json, run, url_option
from tenure.cli._status import Status
from tenure.errors import NotFoundError, PreconditionFailedError


@click.group()
def group() -> None:
    """Groups: members with data (session.group(name) in the API)."""


@group.command(name="ls")
@click.argument("node")
@click.argument("name", metavar="GROUP")
@json_option
@url_option
def ls(node: str, name: str, as_json: bool, url: str) -> int:
    """List the members of GROUP in NODE: id, data, fencing token, session, client,
    weight (partition members) and for how long, in the order they joined.

    Joins under way (not yet members) are counted, not listed. Exit 3 if GROUP does
    not exist ("no group GROUP in node NODE": nobody has joined it, or its name is
    mistyped) or is not a group.
    """

    async def main() -> int:
        async with (
            connect(url, node=node) as client,
            client.session(node, description="tenure group ls") as session,
        ):
            try:
                found = await session.semaphore(name).describe(owners=True)
            except NotFoundError:
                # A group's words, not its semaphore's; an error, not an empty list:
                # the likely cause is a name mistyped, which an empty list would hide.
                raise NotFoundError(
                    f"no group {name!r} in node {node!r} (a group is made by its first join)"
                ) from None
        if found.ephemeral or found.data != GROUP_DATA:
            raise PreconditionFailedError(f"semaphore {name!r} of node {node!r} is not a group")
        if as_json:
            print_json(group_json(node, found))
        else:
            out = _render.console()
            for part in group_tables(node, found):
                out.print(part)
        return Status.OK

    return run(main())


def _holds(found: SemaphoreDescription) -> list[tuple[str, int | float | None, bytes, OwnerInfo]]:
    """Each member: id, weight, data, and its hold (session, client, since)."""
    by_token = {owner.token: owner for owner in found.owners}
    return [
        (member.id, member.weight, member.data, by_token[member.token])
        for member in members_of(found.owners).values()
    ]


def group_json(node: str, found: SemaphoreDescription) -> dict[str, Any]:
    """A group and its members as JSON (``since``: UNIX seconds, the store's clock)."""
    return {
        "node": node,
        "group": found.name,
        "max_members": found.limit,
        "joining": joining_count(found.owners),
        "members": [
            {
                "id": member_id,
                "token": owner.token,
                "weight": weight,
                "session_id": owner.session_id,
                "description": owner.description,
                "identity": _render.identity_json(owner.identity),
                "since": owner.since,
                **_render.data_json(data),
            }
            for member_id, weight, data, owner in _holds(found)
        ],
    }


def group_tables(node: str, found: SemaphoreDescription) -> list[Table | Text]:
    """What ``tenure group ls`` prints: a heading line and the members."""
    holds = _holds(found)
    joining = joining_count(found.owners)
    heading = (
        f"group {found.name!r} in node {node!r}: {len(holds)} of at most {found.limit} members"
        + (f", {joining} joining" if joining else "")
    )
    now = time.time()
    members = _render.table(
        "members (in the order they joined)",
        ["id", "data", "token", "weight", "session", "client", "member for"],
        (
            [
                _render.safe(member_id),
                _render.data_text(data),
                str(owner.token),
                "-" if weight is None else str(weight),
                str(owner.session_id),
                _render.identity_text(owner.identity),
                _render.age_text(owner.since, now),
            ]
            for member_id, weight, data, owner in holds
        ),
    )
    return [Text(_render.safe(heading)), members]
