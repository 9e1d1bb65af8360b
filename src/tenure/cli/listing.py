"""What is held, by whom: ``tenure ls``, ``describe``, ``sessions``, ``watch``, ``kill-session``."""

from __future__ import annotations

import click

from tenure._core.values import SemaphoreDescription
from tenure.cli import _render
from tenure.cli._common import (
    connect,
    count_option,
    json_option,
    print_json,
    print_states,
    run,
    run_until_interrupted,
    url_option,
)
from tenure.cli._status import Status
from tenure.cli.nodes import show_node
from tenure.errors import NotFoundError


@click.command(name="ls")
@click.argument("node", required=False)
@click.option("--prefix", default="", metavar="P", help="with NODE: only semaphores named P...")
@json_option
@url_option
def ls(node: str | None, prefix: str, as_json: bool, url: str) -> int:
    """List the nodes, or with NODE the semaphores (and mutexes) of that node.

    A mutex or election is an ephemeral semaphore: it is listed while somebody holds
    or waits for it.
    """
    if node is None and prefix:
        raise click.UsageError("--prefix lists the semaphores of a NODE: give one")

    async def main() -> int:
        async with connect(url, node=node) as client:
            if node is None:
                nodes = await client.list_nodes()
                if as_json:
                    print_json(nodes)
                else:
                    for name in nodes:
                        click.echo(_render.safe(name))
                return Status.OK
            summaries = await client.list_semaphores(node, prefix=prefix)
        if as_json:
            print_json([_render.summary_json(summary) for summary in summaries])
        else:
            _render.console().print(_render.summaries_table(node, summaries))
        return Status.OK

    return run(main())


@click.command()
@click.argument("node")
@click.argument("semaphore", required=False)
@json_option
@url_option
def describe(node: str, semaphore: str | None, as_json: bool, url: str) -> int:
    """Who holds SEMAPHORE of NODE (description, client, token, held for) and who waits;
    without SEMAPHORE, NODE itself, as ``tenure node describe`` prints it (its settings,
    counts, and the deadlocks the store broke on it lately).

    Waiters are listed in the order they will be served. "held for" and "waiting
    for" compare the store's clock with this machine's. A name nobody holds, waits
    for or created is a free mutex (with --json: "exists" false, "held" false).

    A recipe's semaphore also shows what the recipe says (--json: "recipe"): a
    readers-writer lock's readers and writers, a rate limiter's rate, burst and
    units available now, a barrier's arrivals and rounds, a counter's or latch's value.
    """

    if semaphore is None:
        return describe_node(node, as_json, url)

    async def main() -> int:
        async with (
            connect(url, node=node) as client,
            client.session(node, description="tenure describe") as session,
        ):
            try:
                found = await session.semaphore(semaphore).describe(owners=True, waiters=True)
            except NotFoundError:
                # A free mutex, as the API's Mutex.describe answers (held=False): a
                # mutex exists only while somebody holds or waits for it.
                found = SemaphoreDescription.missing(semaphore)
        if as_json:
            print_json(_render.semaphore_json(node, found))
        else:
            out = _render.console()
            for part in _render.semaphore_tables(node, found):
                out.print(part)
        return Status.OK

    return run(main())


def describe_node(node: str, as_json: bool, url: str) -> int:
    """``tenure describe NODE``: the node's description (``tenure node describe``)."""

    async def main() -> int:
        async with connect(url, node=node) as client:
            found = await client.describe_node(node)
        return show_node(found, as_json)

    return run(main())


@click.command()
@click.argument("node")
@json_option
@url_option
def sessions(node: str, as_json: bool, url: str) -> int:
    """List the live sessions of NODE: description, client, window, holds and waits."""

    async def main() -> int:
        async with connect(url, node=node) as client:
            found = await client.list_sessions(node)
        if as_json:
            print_json([_render.session_json(session) for session in found])
        else:
            _render.console().print(_render.sessions_table(node, found))
        return Status.OK

    return run(main())


@click.command(name="kill-session")
@click.argument("node")
@click.argument("session_id", metavar="ID", type=click.IntRange(0))
@url_option
def kill_session(node: str, session_id: int, url: str) -> int:
    """End session ID of NODE as if its recovery window had passed (needs write access).

    What it holds is released (the node's lock-delay applies, as on expiry), its
    requests are withdrawn, and its client is told an operator ended it.
    """

    async def main() -> int:
        async with connect(url, node=node) as client:
            await client.kill_session(node, session_id)
        click.echo(f"session {session_id} of node {node!r} ended")
        return Status.OK

    return run(main())


@click.command()
@click.argument("node")
@click.argument("semaphore")
@count_option
@json_option
@url_option
def watch(node: str, semaphore: str, limit: int | None, as_json: bool, url: str) -> int:
    """Print SEMAPHORE of NODE now, then again after each change (data, holders, waiters).

    One line per state (one JSON document per line with --json); a missing
    semaphore shows as not existing. Runs until ^C (exit 0) or --count states.
    """

    async def main() -> int:
        async with (
            connect(url, node=node) as client,
            client.session(node, description="tenure watch") as session,
        ):
            return await print_states(
                session.semaphore(semaphore).watch(data=True, owners=True, waiters=True),
                limit,
                as_json,
                lambda state: _render.semaphore_json(node, state),
                _render.state_line,
            )

    return run_until_interrupted(main())
