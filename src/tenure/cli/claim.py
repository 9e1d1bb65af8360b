"""``tenure claim``: run a command once per slot across a fleet; ``tenure release-claim``.

``tenure claim NAME --at-least 60 --at-most 600 -- CMD`` claims NAME (a cron job's
slot: ``report-2026-01-07``, or a plain job name with ``--at-least`` the period) and
runs CMD if it got it; exits 1 if another run has it (:attr:`Status.BUSY`). When CMD
ends the claim is released, so the name stays claimed until ``--at-least`` after the
grant (a replica whose cron fires late finds it taken) and no longer.

**Stopped at at_most.** The store ends the claim ``--at-most`` after the grant
whatever CMD does, and then lets the next claimer in: CMD still running then would
run beside the next slot's, which claims are there to prevent. So CMD's process
group gets SIGTERM ``--grace`` seconds (at most half of ``--at-most``) before that
end and SIGKILL at it, and
tenure exits 4 (:attr:`Status.LOST`). Both are timed on this machine's monotonic
clock from the moment the claim was *sent* (the store granted it after that), so
CMD is gone before the store's end, whatever the clocks of the store and of this
machine say. As ``tenure lock``'s, CMD runs in a process group of its own that
never outlives tenure (:mod:`tenure.cli._supervise`).
"""

from __future__ import annotations

import asyncio
import os
import socket

import click

from tenure.cli._auth_token import pass_token_option
from tenure.cli._common import (
    CommandFailedError,
    chosen_node,
    connect,
    ensure_node,
    environ_with,
    existing_node_option,
    exit_status_option,
    node_option,
    run,
    seconds_option,
    session_description,
    url_option,
)
from tenure.cli._status import Status
from tenure.cli._supervise import DEFAULT_GRACE, Bounded, Signals, say, supervise
from tenure.cli.hold import COMMAND_KEY, CommandAfterDash
from tenure.client import Claim
from tenure.errors import LeaseLostError


@click.command(cls=CommandAfterDash)
@click.argument("name")
@click.option(
    "--at-least",
    type=click.FloatRange(0),
    required=True,
    metavar="SECONDS",
    help="the name stays claimed this long after the grant, even once CMD has ended",
)
@click.option(
    "--at-most",
    type=click.FloatRange(0, min_open=True),
    required=True,
    metavar="SECONDS",
    help="the claim ends this long after the grant: CMD is stopped before then",
)
@click.option(
    "--data",
    default=None,
    metavar="TEXT",
    help="owner data shown to others (default: this host's name and tenure's pid)",
)
@seconds_option(
    "--grace",
    default=DEFAULT_GRACE,
    help="CMD's process group gets SIGTERM this long before --at-most (at most half of "
    "it), SIGKILL at it",
)
@exit_status_option(
    "--conflict-exit-code",
    default=Status.BUSY,
    help="exit status when the name is claimed already",
)
@exit_status_option(
    "--lost-exit-code",
    default=Status.LOST,
    help="exit status when CMD was stopped at --at-most",
)
@node_option
@url_option
@pass_token_option
def claim(
    name: str,
    at_least: float,
    at_most: float,
    data: str | None,
    grace: float,
    conflict_exit_code: int,
    lost_exit_code: int,
    node: str | None,
    create_node: bool,
    url: str,
) -> int:
    """Run a command once for the slot NAME: exit 1 if it is claimed already.

    \b
    tenure claim NAME --at-least SECONDS --at-most SECONDS [OPTIONS] -- CMD [ARGS...]

    Claims NAME (at most one claim of a name at a time, across every process), then
    runs CMD with TENURE_TOKEN (the claim's fencing token), TENURE_CLAIM (the name),
    TENURE_CLAIM_ID (its id: `tenure release-claim` takes it) and TENURE_NODE in its
    environment, and releases the claim when CMD ends: the name stays claimed until
    --at-least after the grant. The exit status is CMD's. CMD's process group gets
    SIGTERM --grace seconds (at most half of --at-most) before --at-most and SIGKILL
    at it (tenure then exits 4),
    since the claim ends then and the next claimer may run. Exit statuses: 1 claimed
    already, 2 usage, 3 backend error, 4 stopped at --at-most, 126/127 CMD cannot run
    / not found.
    """
    command: list[str] = click.get_current_context().meta[COMMAND_KEY]
    if at_least > at_most:
        raise click.UsageError(f"--at-least ({at_least:g}) exceeds --at-most ({at_most:g})")
    owner = f"{socket.gethostname()} pid {os.getpid()}" if data is None else data
    where = chosen_node(node, create_node)
    main = _claim_and_run(
        name, at_least, at_most, owner, grace, conflict_exit_code, lost_exit_code, where, url,
        command,
    )  # fmt: skip
    return run(main)


async def _claim_and_run(
    name: str,
    at_least: float,
    at_most: float,
    data: str,
    grace: float,
    conflict_exit_code: int,
    lost_exit_code: int,
    where: tuple[str, bool],
    url: str,
    command: list[str],
) -> int:
    """Claim, run ``command`` under :func:`supervise` until at_most, release.

    A signal before CMD runs (while connecting or claiming) exits 128 + N, as
    ``lock`` and ``elect`` do; a claim already made is released then too.
    """
    what = f"claim {name!r}"
    node, create_node = where
    description = session_description(["claim", name, "--", *command])
    loop = asyncio.get_running_loop()
    with Signals() as signals:
        try:
            async with connect(url, node=node, creatable=not create_node) as client:
                await ensure_node(client, node, create_node)
                # The session only sends the claim: the claim outlives it.
                async with client.session(node, description=description) as session:
                    sent = loop.time()
                    got = await session.claim(
                        name, at_least=at_least, at_most=at_most, data=data.encode()
                    )
                if got is None:
                    raise CommandFailedError(f"{what}: claimed already", conflict_exit_code)
                try:
                    return await _run_claimed(
                        got, node, command, signals, sent + at_most, grace, lost_exit_code
                    )
                finally:
                    await client.release_claim(node, name, got.id)
        except asyncio.CancelledError:
            status = signals.stopped_status(f"claiming {name!r}")
            if status is None:
                raise
            return status


async def _run_claimed(
    got: Claim,
    node: str,
    command: list[str],
    signals: Signals,
    end: float,
    grace: float,
    lost_exit_code: int,
) -> int:
    """Run ``command`` under :func:`supervise` for the claim ``got``, stopped before
    ``end`` (its at_most, on this machine's clock: at or before the store's end)."""
    environ = environ_with(
        {
            "TENURE_TOKEN": str(got.token),
            "TENURE_CLAIM": got.name,
            "TENURE_CLAIM_ID": got.id,
            "TENURE_NODE": node,
        }
    )
    # SIGTERM --grace before the end (at most half of at_most), SIGKILL at it.
    why = LeaseLostError(f"its at_most ({got.at_most:g} s after the grant) comes")
    bounded = Bounded(end, got.at_most, grace, why)
    try:
        return await supervise(
            command,
            environ,
            bounded.stop,
            signals,
            what=f"claim {got.name!r}",
            grace=bounded.grace,
            lost_status=lost_exit_code,
            lost_words="ends",
        )
    finally:
        bounded.cancel()


@click.command("release-claim")
@click.argument("name")
@click.argument("claim_id", metavar="ID")
@existing_node_option
@url_option
def release_claim(name: str, claim_id: str, node: str, url: str) -> int:
    """Release the claim ID of NAME (the TENURE_CLAIM_ID its command was given).

    \b
    tenure release-claim NAME ID [OPTIONS]

    `tenure describe NODE NAME --json` shows a claim's id too (recipe.id). The
    claim then ends at the later of now and its at_least after the grant. Exit
    status 0 if it shortened the live claim of that id, 1 if there is none (ended,
    another claim's, released already), 3 for a backend error.
    """
    return run(_release(name, claim_id, node, url))


async def _release(name: str, claim_id: str, node: str, url: str) -> int:
    async with connect(url, node=node) as client:
        if await client.release_claim(node, name, claim_id):
            say(f"claim {name!r} ({claim_id}) released")
            return Status.OK
    say(f"claim {name!r} has no live claim of id {claim_id}")
    return Status.BUSY
