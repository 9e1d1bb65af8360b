"""``tenure repair DATA_DIR``: explain what is wrong with a data directory's log, and
cut it at the last good record (``--truncate``), keeping a copy of what was cut.

A torn tail (a crash during an append) the server cuts itself at start; this is for
the damage it refuses to start on: a bad record followed by good ones, or a torn
segment that is not the last (docs/operations.md, "A start that fails"). Cutting
there drops every record after the damage, acknowledged ones too: it is the
operator's call, made with the server stopped (this takes the directory's lock).

Layer (CONTRIBUTING.md): this module may also import tenure.server._durability (lazily).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tenure.cli._common import CommandFailedError
from tenure.cli._status import Status


@click.command()
@click.argument("data_dir", type=click.Path(path_type=Path))
@click.option(
    "--truncate",
    is_flag=True,
    help="cut the log at the last good record (a copy goes to DATA_DIR/repair-<time>/)",
)
@click.option("--yes", "-y", is_flag=True, help="do not ask before cutting (with --truncate)")
def repair(data_dir: Path, truncate: bool, yes: bool) -> int:
    """Explain damage in a stopped server's data directory; --truncate cuts it off."""
    # The server's modules only when this runs: the other commands need none of them.
    from tenure.server._durability.dirlock import DataDirLock, DataDirLockedError
    from tenure.server._durability.examine import cut, examine, segments

    if not data_dir.is_dir():
        raise CommandFailedError(f"{data_dir} is not a directory", Status.USAGE)
    try:
        lock = DataDirLock(data_dir)
    except DataDirLockedError as error:
        who = f" (pid {error.pids[0]})" if error.pids else ""
        raise CommandFailedError(
            f"{data_dir} is in use by a running tenure server{who}: stop it first",
            Status.BUSY,
        ) from None
    with lock:
        damage, records = examine(data_dir)
        if damage is None:
            count = len(segments(data_dir))
            click.echo(
                f"{data_dir}: the log is whole ({records} records in {count} segment(s)); "
                "nothing to repair"
            )
            return Status.OK
        for line in damage.explain():
            click.echo(line)
        dropped = damage.scan.size - damage.scan.end
        plan = (
            f"cutting drops {dropped} bytes of {damage.segment.name} after offset "
            f"{damage.scan.end}"
            + (f" and {len(damage.after)} later segment(s)" if damage.after else "")
            + f": {records} records stay"
        )
        if not truncate:
            click.echo(f"{plan}; run `tenure repair {data_dir} --truncate` to do it")
            return Status.FAILED
        if not yes:
            if not sys.stdin.isatty():
                raise CommandFailedError(
                    f"{plan}: add --yes to do it without a terminal to confirm on",
                    Status.USAGE,
                )
            click.confirm(f"{plan}. Cut?", abort=True)
        kept = cut(data_dir, damage)
        click.echo(f"cut: {plan}; the files as they were are in {kept}")
        return Status.OK
