"""``tenure cluster status``: a ``tenure serve --cluster`` as each of its doors sees it.

Each door of ``--url`` is asked on a connection of its own (a standby answers
too), through :func:`tenure.backends.remote.cluster_status`, imported when the
command runs: the CLI otherwise stays on the public API, and this is the one
command that speaks to servers rather than to a backend.

Layer (CONTRIBUTING.md): this module may also import tenure.backends.remote (lazily).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import click
from rich.text import Text

from tenure.cli import _render
from tenure.cli._auth_token import connect_token, redact
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

#: Welcome.role of a cluster's leader (tenure._protocol's word, said here as text).
LEADER = "leader"
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
    view = shown_view(doors)
    verdict, why = judge(doors, view)
    if as_json:
        print_json(status_json(doors, view, verdict))
        return verdict
    out = _render.console()
    for part in status_parts(doors, view):
        out.print(part)
    if verdict != Status.OK:
        raise CommandFailedError(why, verdict)
    return Status.OK


def shown_view(doors: list[DoorStatus]) -> ClusterView | None:
    """The view to show: the leader's own if it answered, else the latest (by term, index)."""
    views = [(door.role == LEADER, door.view) for door in doors if door.view is not None]
    if not views:
        return None
    return max(views, key=lambda seen: (seen[0], seen[1].term, seen[1].index))[1]


def judge(doors: list[DoorStatus], view: ClusterView | None) -> tuple[Status, str]:
    """The exit status, and why it is not OK (see :func:`status`)."""
    failed = [door for door in doors if door.view is None]
    if view is None:
        alone = standalone(doors)
        if alone and len(alone) == len(doors):
            return Status.FAILED, f"{_listed(alone)} {STANDALONE_WORDS}, not part of a cluster"
        return Status.FAILED, f"no door of the cluster answered ({door_errors(failed)})"
    if not any(door.role == LEADER for door in doors if door.view is not None):
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


def members_json(view: ClusterView) -> list[dict[str, object]]:
    """Each member as JSON, with its lag behind the log (``index - applied``)."""
    return [
        {
            "name": member.name,
            "role": member.role,
            "address": member.address,
            "applied": member.applied,
            "lag": max(0, view.index - member.applied),
            "age": member.age,
            "http": member.http or None,
            "ydb": member.ydb or None,
        }
        for member in view.members
    ]


def status_json(
    doors: list[DoorStatus], view: ClusterView | None, verdict: Status
) -> dict[str, object]:
    """``tenure cluster status --json``'s document."""
    return {
        "ok": verdict == Status.OK,
        "cluster": None if view is None else view.cluster,
        "leader": None if view is None else view.leader or None,
        "term": None if view is None else view.term,
        "index": None if view is None else view.index,
        "answered_by": None if view is None else view.answered_by,
        "members": [] if view is None else members_json(view),
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


def status_parts(doors: list[DoorStatus], view: ClusterView | None) -> list[Any]:
    """What the command prints: a heading, the members, the doors."""
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
    else:
        # What the servers say is shown as text (no markup), control characters escaped.
        leader = f"leader {view.leader} (term {view.term})" if view.leader else "no leader"
        heading = (
            f"cluster {view.cluster!r}: {leader}, log index {view.index} "
            f"(as {view.answered_by} sees it)"
        )
        parts.append(Text(_render.safe(heading)))
        parts.append(
            _render.table(
                "members",
                ["name", "role", "address", "applied", "lag", "age"],
                (
                    [
                        member.name,
                        member.role,
                        member.address,
                        str(member.applied),
                        str(max(0, view.index - member.applied)),
                        _render.duration_text(member.age),
                    ]
                    for member in view.members
                ),
            )
        )
    parts.append(
        _render.table(
            "doors",
            ["door", "role", "member", "answer"],
            (
                [
                    door.door,
                    door.role or ("standalone" if door.role == "" else "-"),
                    door.view.answered_by if door.view is not None else "-",
                    answer_text(door),
                ]
                for door in doors
            ),
        )
    )
    return parts
