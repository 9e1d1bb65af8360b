"""``tenure why NODE NAME``: who blocks a name, its holders and waiters, the chain to its roots.

The JSON (``--json``) is the report (:class:`tenure.WhyReport`) with the client's
identity spelled out: each holder's, waiter's and root's ``client`` ``{host, pid,
name}``, and ``address``, where the server sees its connection (``null``: detached,
or a store that does not say). What the store does
not know (Capability.WAIT_CHAINS: ``etcd://``, ``redis://``, ``postgres://``) is
left out: a holder's ``waiting_for``, the ``chain`` and the ``roots``; a time it keeps
none of is ``null``. What lies in a node the token may not read is hidden: its node
and name are ``""`` (shown ``(hidden)`` in the text), its session 0.
"""

from __future__ import annotations

import click

from tenure._core.values import MAX_PAGE, WHY_PAGE
from tenure._core.why_report import WhyHolder, WhyLink, WhyReport, WhyRoot, WhyWait, WhyWaiter
from tenure.cli import _render
from tenure.cli._common import connect, json_option, print_json, run, url_option
from tenure.cli._status import Status

__all__ = ["report_json", "report_lines", "why"]


@click.command()
@click.argument("node")
@click.argument("name")
@click.option(
    "--after",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    metavar="N",
    help="list the waiters after the N-th (the next page)",
)
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_PAGE),
    default=WHY_PAGE,
    show_default=True,
    metavar="N",
    help="holders, waiters and chain links listed at most",
)
@json_option
@url_option
def why(node: str, name: str, after: int, limit: int, as_json: bool, url: str) -> int:
    """Who blocks NAME of NODE: its holders and waiters (in grant order), what each holder
    waits for, and the chain of holders that wait, to the roots (holders that wait for
    nothing: whom everyone behind waits on)."""

    async def main() -> int:
        async with connect(url, node=node) as client:
            report = await client.why(node, name, after=after, limit=limit)
        if as_json:
            print_json(report_json(report))
        else:
            for line in report_lines(report):
                click.echo(line)
        return Status.OK

    return run(main())


def report_json(report: WhyReport) -> dict[str, object]:
    """The report as ``--json`` prints it (module docstring)."""
    document: dict[str, object] = {
        "node": report.node,
        "name": report.name,
        "holders": [_holder_json(holder) for holder in report.holders],
        "waiters": [_waiter_json(waiter) for waiter in report.waiters],
    }
    if report.chain is not None:
        document["chain"] = [_link_json(link) for link in report.chain]
    if report.roots is not None:
        document["roots"] = [_root_json(root) for root in report.roots]
    document.update(
        holders_total=report.holders_total, waiters_total=report.waiters_total, cut=report.cut
    )
    return document


def _holder_json(holder: WhyHolder) -> dict[str, object]:
    document: dict[str, object] = {
        "session_id": holder.session_id,
        "description": holder.description,
        "address": holder.address or None,
        "client": _render.identity_json(holder.identity),
        "count": holder.count,
        "token": holder.token,
        "held_for": holder.held_for,
        "max_hold_ends_in": holder.max_hold_ends_in,
    }
    if holder.waiting_for is not None:
        document["waiting_for"] = [_wait_json(wait) for wait in holder.waiting_for]
    return document


def _wait_json(wait: WhyWait) -> dict[str, object]:
    return {"node": wait.node, "name": wait.name, "position": wait.position}


def _waiter_json(waiter: WhyWaiter) -> dict[str, object]:
    return {
        "session_id": waiter.session_id,
        "description": waiter.description,
        "address": waiter.address or None,
        "client": _render.identity_json(waiter.identity),
        "count": waiter.count,
        "position": waiter.position,
        "waiting_for": waiter.waiting_for,
    }


def _link_json(link: WhyLink) -> dict[str, object]:
    return {
        "node": link.node,
        "name": link.name,
        "session_id": link.session_id,
        "waits_on": list(link.waits_on),
        "waits_elsewhere": [_wait_json(wait) for wait in link.waits_elsewhere],
    }


def _root_json(root: WhyRoot) -> dict[str, object]:
    return {
        "node": root.node,
        "name": root.name,
        "session_id": root.session_id,
        "description": root.description,
        "address": root.address or None,
        "client": _render.identity_json(root.identity),
        "held_for": root.held_for,
    }


def report_lines(report: WhyReport) -> list[str]:
    """The report for people: the name, its holders (and what each waits for), its
    waiters, the chain and the roots, one thing a line (names shown safely)."""
    safe = _render.safe
    lines = [
        f"{safe(report.name)} (node {safe(report.node)}): {report.holders_total} "
        f"holder(s), {report.waiters_total} waiter(s)"
    ]
    for holder in report.holders:
        waits = ""
        if holder.waiting_for:
            waits = ", waiting for " + ", ".join(
                f"{_place(wait, report.node)} (#{wait.position or '?'})"
                for wait in holder.waiting_for
            )
        bound = ""
        if holder.max_hold_ends_in is not None:
            bound = f", max_hold ends in {_render.duration_text(holder.max_hold_ends_in)}"
        lines.append(
            f"  held by {_who(holder)} "
            f"token {holder.token} for {_render.duration_text(holder.held_for)}{bound}{waits}"
        )
    for waiter in report.waiters:
        who = _who(waiter)
        lines.append(
            f"  #{waiter.position} {who} waiting {_render.duration_text(waiter.waiting_for)}"
        )
    if report.chain is None:
        lines.append("chain: not known (the store does not say what a holder waits for)")
    else:
        for link in report.chain:
            here = WhyWait(link.node, link.name, 0)
            on = [_place(WhyWait(link.node, name, 0), report.node) for name in link.waits_on]
            on += [_place(wait, report.node) for wait in link.waits_elsewhere]
            held = f"{_place(here, report.node)} held by session {link.session_id or '?'}"
            lines.append(f"chain: {held}, waits on {', '.join(on) or 'nothing'}")
        for root in report.roots or ():
            who = _who(root)
            name = _place(WhyWait(root.node, root.name, 0), report.node)
            lines.append(f"root: {name} held by {who} for {_render.duration_text(root.held_for)}")
    if report.cut:
        lines.append("(cut short at the server's --why-look-limit or --limit: more may block)")
    return lines


def _place(wait: WhyWait, node: str) -> str:
    """A name as the text shows it: ``name``, ``name (node N)`` in another node than
    the one asked about, ``(hidden)`` where the token may not read it."""
    if not wait.name:
        return "(hidden)"
    name = _render.safe(wait.name)
    return name if wait.node == node else f"{name} (node {_render.safe(wait.node)})"


def _who(who: WhyHolder | WhyWaiter | WhyRoot) -> str:
    """``session 7 "job-a" (svc@host:42 from 10.0.0.7)``."""
    shown = f' "{_render.safe(who.description)}"' if who.description else ""
    where = f" from {_render.safe(who.address)}" if who.address else ""
    return f"session {who.session_id}{shown} ({_render.identity_text(who.identity)}{where})"
