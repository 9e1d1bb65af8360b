"""Who leads: ``tenure leader`` (once) and ``tenure observe`` (each change)."""

from __future__ import annotations

import click

from tenure.cli import _render
from tenure.cli._common import (
    CommandFailedError,
    connect,
    count_option,
    existing_node_option,
    json_option,
    print_json,
    print_states,
    run,
    run_until_interrupted,
    url_option,
)
from tenure.cli._status import Status


@click.command()
@click.argument("name")
@json_option
@existing_node_option
@url_option
def leader(name: str, as_json: bool, node: str, url: str) -> int:
    """Print the leader of election NAME: its data, fencing token and session.

    Exit status 1 (and "no leader" on stderr) when nobody leads; with --json the
    document says "leader": false then.
    """

    async def main() -> int:
        async with (
            connect(url, node=node) as client,
            client.session(node, description="tenure leader") as session,
        ):
            state = await session.election(name).leader()
        if as_json:
            print_json(_render.leader_json(node, name, state))
        elif state is not None:
            click.echo(_render.leader_text(state))
        if state is None:
            if as_json:
                return Status.BUSY
            raise CommandFailedError(f"no leader of {name!r} in node {node!r}", Status.BUSY)
        return Status.OK

    return run(main())


@click.command()
@click.argument("name")
@count_option
@json_option
@existing_node_option
@url_option
def observe(name: str, limit: int | None, as_json: bool, node: str, url: str) -> int:
    """Print who leads election NAME now, then again at each change of leader or data.

    One line per state ("no leader" when nobody leads; one JSON document per line
    with --json). Runs until ^C (exit 0) or --count states.
    """

    async def main() -> int:
        async with (
            connect(url, node=node) as client,
            client.session(node, description="tenure observe") as session,
        ):
            return await print_states(
                session.election(name).observe(),
                limit,
                as_json,
                lambda state: _render.leader_json(node, name, state),
                _render.leader_text,
            )

    return run_until_interrupted(main())
