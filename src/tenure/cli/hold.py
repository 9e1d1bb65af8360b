"""``tenure lock`` and ``tenure elect``: run a command while a lock or leadership is held."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import click

from tenure._core.values import check_max_hold
from tenure.cli._auth_token import pass_token_option
from tenure.cli._common import (
    CommandFailedError,
    F,
    chosen_node,
    connect,
    ensure_node,
    exit_status_option,
    node_option,
    run,
    seconds_option,
    session_description,
    url_option,
)
from tenure.cli._requeue import REQUEUE_OPTIONS, refuse_given, requeue_options, with_requeue
from tenure.cli._status import Status
from tenure.cli._supervise import DEFAULT_GRACE, Bounded, Signals, held_environ, supervise
from tenure.client import Lease, Session
from tenure.errors import InvalidArgumentError, LeaseLostError, NotFoundError

#: Where :class:`CommandAfterDash` leaves the command it found after ``--``.
COMMAND_KEY = "tenure.command"


class CommandAfterDash(click.Command):
    """A click command whose own arguments end at ``--``; what follows is the command to run.

    Everything after the first ``--`` is the child's, untouched (its options are
    never taken for ours); a missing ``--``, or nothing after it, is a usage error.
    Without ``--``, whatever click makes of the rest (``tenure lock job echo hi``:
    "unexpected extra arguments"; ``... ls -l``: "no such option") is told with
    where the command goes, since that is the likely mistake.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Split ``args`` at the first ``--``; parse what comes before as usual."""
        if "--" not in args:
            try:
                super().parse_args(ctx, args)  # --help still works without a command
            except click.UsageError as error:
                reason = error.format_message().rstrip(".")
                raise click.UsageError(f"{reason}; {self.dash_usage(ctx)}", ctx) from None
            raise click.UsageError(f"no command to run; {self.dash_usage(ctx)}", ctx)
        cut = args.index("--")
        ctx.meta[COMMAND_KEY] = args[cut + 1 :]
        rest = super().parse_args(ctx, args[:cut])
        if not ctx.meta[COMMAND_KEY]:
            raise click.UsageError(f"no command after '--'; {self.dash_usage(ctx)}", ctx)
        return rest

    def dash_usage(self, ctx: click.Context) -> str:
        """Where the command to run goes: "use: tenure lock [OPTIONS] NAME -- COMMAND..."."""
        names = [p.human_readable_name for p in self.params if isinstance(p, click.Argument)]
        return f"use: {' '.join([ctx.command_path, '[OPTIONS]', *names])} -- COMMAND..."


def check_waiting(options: dict[str, Any]) -> None:
    """Refuse ``--try`` with ``--timeout`` (a usage error, before anything is opened)."""
    if options["try_only"] and options["timeout"] is not None:
        raise click.UsageError("--try and --timeout exclude each other")


def hold_options(function: F) -> F:
    """The options ``lock`` and ``elect`` share: waiting, the child's grace, exit statuses."""
    options = [
        click.option(
            "--timeout",
            type=click.FloatRange(0, min_open=True),
            metavar="SECONDS",
            help="give up (exit 1) if not acquired within this many seconds",
        ),
        click.option(
            "--try",
            "try_only",
            is_flag=True,
            help="exit at once (exit 1) if it is held by somebody else",
        ),
        seconds_option(
            "--grace",
            default=DEFAULT_GRACE,
            help="after a loss (or, for what it left behind, its end), how long the "
            "command's process group has between SIGTERM and SIGKILL",
        ),
        click.option(
            "--recovery-window",
            type=click.FloatRange(0, min_open=True),
            metavar="SECONDS",
            help="how long the lock outlives a lost connection (or a crash of tenure "
            "itself); default: the node's recovery_window (30 s unless altered)",
        ),
        exit_status_option(
            "--conflict-exit-code",
            default=Status.BUSY,
            help="exit status when busy (--try) or timed out (flock's -E)",
        ),
        exit_status_option(
            "--lost-exit-code",
            default=Status.LOST,
            help="exit status when it was lost while the command ran",
        ),
        node_option,
        url_option,
        pass_token_option,
    ]
    for option in reversed(options):
        function = option(function)
    return function


@click.command(cls=CommandAfterDash)
@click.argument("name", required=False)
@click.option(
    "--semaphore",
    metavar="SEM",
    help="take --count tokens of this counting semaphore instead of the mutex NAME",
)
@click.option(
    "--count",
    type=click.IntRange(1),
    metavar="N",
    help="with --semaphore: tokens to hold (default 1)",
)
@click.option(
    "--limit",
    type=click.IntRange(1),
    metavar="L",
    help="with --semaphore: create it with this limit if missing (without --limit it must exist)",
)
@click.option(
    "--read",
    "mode",
    flag_value="read",
    help="take a reader's share of the readers-writer lock NAME (readers share it)",
)
@click.option(
    "--write",
    "mode",
    flag_value="write",
    help="take the readers-writer lock NAME alone (what a plain NAME takes: a mutex and "
    "the write side of one name exclude each other)",
)
@click.option("--data", default="", metavar="TEXT", help="owner data shown to others")
@click.option(
    "--max-hold",
    type=float,
    callback=lambda _ctx, _param, value: _max_hold(value),
    metavar="SECONDS",
    help="the lock ends this long after its grant, whatever tenure does (the store ends "
    "it): CMD is stopped before then (SIGTERM --grace before, at most half of it)",
)
@hold_options
def lock(
    name: str | None,
    semaphore: str | None,
    count: int | None,
    limit: int | None,
    mode: str | None,
    data: str,
    max_hold: float | None,
    **common: Any,
) -> int:
    """Run a command while holding the mutex NAME (or tokens of a semaphore).

    \b
    tenure lock NAME [OPTIONS] -- CMD [ARGS...]
    tenure lock --read NAME [OPTIONS] -- CMD [ARGS...]     (readers share NAME)
    tenure lock --write NAME [OPTIONS] -- CMD [ARGS...]    (alone, as plain NAME)
    tenure lock --semaphore SEM --count N --limit L [OPTIONS] -- CMD [ARGS...]

    Waits its turn (first come, first served), then runs CMD with TENURE_TOKEN (the
    fencing token), TENURE_LOCK (the name), TENURE_NODE and TENURE_SESSION_ID in its
    environment (and TENURE_MODE, read or write, with --read or --write), and
    releases when CMD ends; the exit status is CMD's. CMD runs in a process group of
    its own, which never outlives tenure (even killed by -9); what CMD leaves behind
    gets SIGTERM when it ends, SIGKILL after --grace. If the lock is lost meanwhile,
    CMD's group gets SIGTERM, then SIGKILL after --grace, and tenure exits 4.
    SIGINT, SIGTERM and SIGHUP are passed on to CMD's group (a ^C at a terminal
    reaches CMD once, from the terminal). Exit statuses: 1 busy or timed
    out, 2 usage, 3 backend error, 4 lost, 126/127 CMD cannot run / not found.

    With --max-hold S the store ends the lock S seconds after its grant, whatever
    tenure and its session do: CMD's group gets SIGTERM --grace (at most S/2)
    before S after the grant reached tenure, SIGKILL at S, and tenure exits 4.
    """
    command: list[str] = click.get_current_context().meta[COMMAND_KEY]
    check_waiting(common)
    common["node"], common["create_node"] = chosen_node(common["node"], common["create_node"])
    if (name is None) == (semaphore is None):
        raise click.UsageError("give either NAME (a mutex) or --semaphore SEM, not both")
    if semaphore is None and (count is not None or limit is not None):
        raise click.UsageError("--count and --limit go with --semaphore")
    if semaphore is not None and mode is not None:
        raise click.UsageError(f"--{mode} goes with NAME (a readers-writer lock), not --semaphore")
    target = name if semaphore is None else semaphore
    assert target is not None
    what = f"semaphore {target!r}" if semaphore is not None else f"lock {target!r}"
    if mode is not None:
        what = f"{mode} lock {target!r}"

    async def acquire(session: Session, timeout: float | None) -> Lease:
        if mode is not None:
            rwlock = session.rwlock(target, max_hold=max_hold)
            if mode == "read":
                return await rwlock.read(timeout=timeout, data=data.encode())
            return await rwlock.write(timeout=timeout, data=data.encode())
        if semaphore is None:
            mutex = session.mutex(target, max_hold=max_hold)
            return await mutex.lock(timeout=timeout, data=data.encode())
        handle = session.semaphore(target)
        if limit is not None:
            await handle.create(limit, exist_ok=True)
        try:
            # (session.acquire: the semaphore's acquire, with max_hold.)
            return await session.acquire(
                target, count or 1, data=data.encode(), timeout=timeout, max_hold=max_hold
            )
        except NotFoundError:
            raise CommandFailedError(
                f"semaphore {target!r} does not exist in node {common['node']!r}: "
                "give --limit L to create it",
                Status.FAILED,
            ) from None

    extra = {"TENURE_COUNT": str(count or 1)} if semaphore is not None else {}
    if mode is not None:
        extra["TENURE_MODE"] = mode
    return run(
        _hold_and_run("lock", target, what, acquire, command, extra, max_hold=max_hold, **common)
    )


@click.command(cls=CommandAfterDash)
@click.argument("name")
@click.option("--data", default="", metavar="TEXT", help="the leader's data (an address, say)")
@click.option(
    "--requeue",
    is_flag=True,
    help="keep leading until stopped: when CMD exits or leadership is lost, campaign "
    "again (behind the other candidates) and run CMD again",
)
@requeue_options
@hold_options
def elect(name: str, data: str, requeue: bool, **common: Any) -> int:
    """Run a command only while leader of the election NAME.

    \b
    tenure elect NAME --data TEXT [OPTIONS] -- CMD [ARGS...]
    tenure elect NAME --requeue [OPTIONS] -- CMD [ARGS...]

    Campaigns (candidates are served first come, first served); once leader, runs
    CMD with TENURE_TOKEN (the leadership's fencing token), TENURE_LOCK (the
    election's name), TENURE_NODE and TENURE_SESSION_ID, and resigns when CMD ends;
    the exit status is CMD's. If leadership is lost, CMD's process group gets
    SIGTERM, then SIGKILL after --grace, and tenure exits 4 (restart it to campaign
    again). Exit statuses as for tenure lock.

    With --requeue it campaigns again whenever CMD exits or leadership is lost (CMD
    stopped as above), in a new session if the old one is gone, until stopped: a
    signal while CMD runs is passed on to it, and tenure then exits with CMD's
    status; one while it campaigns or pauses ends it with 128 + N. A CMD that
    cannot run (126, 127) ends it too. It takes neither --try, --timeout nor the
    exit-code options.

    After CMD exits, --requeue resigns (closing its session) and pauses before it
    campaigns again, so that a CMD that fails at once does not loop: another
    candidate may lead during the pause. The pause is --requeue-delay, doubled
    after each run in a row shorter than --requeue-reset-after, up to
    --requeue-max-delay; a longer run brings it back to --requeue-delay. After a
    loss it campaigns again at once.
    """
    command: list[str] = click.get_current_context().meta[COMMAND_KEY]
    check_waiting(common)
    common["node"], common["create_node"] = chosen_node(common["node"], common["create_node"])
    pause = {key: common.pop(key) for key in REQUEUE_OPTIONS}
    if requeue:
        return run(with_requeue(name, data, command, common, pause))
    refuse_given(list(REQUEUE_OPTIONS), "only with --requeue")

    async def campaign(session: Session, timeout: float | None) -> Lease:
        return await session.election(name).campaign(data.encode(), timeout=timeout)

    what = f"leadership of {name!r}"
    return run(_hold_and_run("elect", name, what, campaign, command, {}, **common))


async def _hold_and_run(
    verb: str,
    name: str,
    what: str,
    acquire: Callable[[Session, float | None], Awaitable[Lease]],
    command: Sequence[str],
    extra: dict[str, str],
    *,
    url: str,
    node: str,
    create_node: bool,
    timeout: float | None,
    try_only: bool,
    grace: float,
    recovery_window: float | None,
    conflict_exit_code: int,
    lost_exit_code: int,
    max_hold: float | None = None,
) -> int:
    """Open a session, acquire, run ``command`` under :func:`supervise`, release;
    with ``max_hold``, ``command`` is stopped before the store ends the lease. The
    node is made if missing only if ``create_node`` (:func:`chosen_node`)."""
    wait = 0.0 if try_only else timeout
    description = session_description([verb, name, "--", *command])
    with Signals() as signals:
        try:
            async with connect(url, node=node, creatable=not create_node) as client:
                await ensure_node(client, node, create_node)
                session = await client.session(
                    node, recovery_window=recovery_window, description=description
                )
                try:
                    try:
                        lease = await acquire(session, wait)
                    except TimeoutError:
                        why = "busy (--try)" if try_only else f"not acquired within {timeout:g}s"
                        raise CommandFailedError(f"{what}: {why}", conflict_exit_code) from None
                    bounded = _bounded(lease, max_hold, grace)
                    try:
                        return await supervise(
                            command,
                            held_environ(name, node, lease, extra),
                            lease.lost if bounded is None else bounded.stop,
                            signals,
                            what=what,
                            grace=grace if bounded is None else bounded.grace,
                            lost_status=lost_exit_code,
                        )
                    finally:
                        if bounded is not None:
                            bounded.cancel()
                        await lease.release()
                finally:
                    await session.close()
        except asyncio.CancelledError:
            status = signals.stopped_status(f"waiting for {what}")
            if status is None:
                raise
            return status


def _max_hold(value: float | None) -> float | None:
    """``--max-hold`` checked as the library checks ``max_hold`` (above 0, finite, at
    most MAX_HOLD_SECONDS): a usage error naming it, before anything is opened."""
    try:
        return check_max_hold(value)
    except InvalidArgumentError as error:
        raise click.BadParameter(str(error)) from None


def _bounded(lease: Lease, max_hold: float | None, grace: float) -> Bounded | None:
    """The stop of a command run under a lease of ``max_hold`` (None without one): the
    lease's loss, or ``max_hold`` after the grant reached this process (SIGTERM
    ``grace`` before, at most half of it). The store's end is ``max_hold`` after its
    grant, which it made before this process heard of it: it may come a network
    delay sooner, and its loss then stops the command as any loss does."""
    if max_hold is None:
        return None
    end = asyncio.get_running_loop().time() + max_hold
    why = LeaseLostError(f"its max_hold ({max_hold:g} s after the grant) comes")
    return Bounded(end, max_hold, grace, why, lease.lost)
