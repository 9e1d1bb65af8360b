"""The ``tenure`` click group: every command, and :func:`main`, which runs one."""

from __future__ import annotations

import os
import signal
import sys
import traceback
from collections.abc import Sequence

import click

import tenure
from tenure._build import build
from tenure.cli import claim, cluster, election, hold, listing, nodes, reload, server, top, why
from tenure.cli._common import TRACEBACK_ENV, URL_ENV, error_line, expected, run, status_of
from tenure.cli._status import Status

__all__ = ["Status", "cli", "main"]

#: Commands whose arguments go to argparse untouched (click neither parses nor checks them).
PASSED_THROUGH = {"context_settings": {"ignore_unknown_options": True, "help_option_names": []}}


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="Exit statuses: 0 ok (for lock/elect: the command's own), 1 busy or timed out "
    "(lock/elect), claimed already (claim) or no leader (leader, cluster status), 2 usage, "
    "3 backend error, 4 lock or leadership lost (claim: stopped at --at-most), 126/127 "
    "the command cannot run / was not found, 128+N ended by signal N.",
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=lambda context, _, asked: _show_version(context, asked),
    help="Show the version and the build (compiled or pure), and exit.",
)
def cli() -> None:
    """tenure: distributed coordination for Python (locks, semaphores, elections)."""


def _show_version(context: click.Context, asked: bool) -> None:
    # Asked only here, not when the CLI is imported: the build is found by looking up
    # modules on the path, which every other command has no use for.
    if asked and not context.resilient_parsing:
        click.echo(f"tenure {tenure.__version__} ({build()} build)")
        context.exit()


@cli.command(**PASSED_THROUGH)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def serve(args: tuple[str, ...]) -> int:
    """Run a tenure server (tenure serve --help lists its settings)."""
    return server.serve_main(args)


@cli.command(**PASSED_THROUGH)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def migrate(args: tuple[str, ...]) -> int:
    """Create or upgrade the tables of a postgres:// URL (else done on first use)."""
    return server.migrate_main(args)


@cli.command()
@click.option(
    "--url",
    envvar=URL_ENV,
    default="memory://",
    show_default=True,
    metavar="URL",
    help=f"backend URL; env {URL_ENV} (the demo runs in-process on memory:// without it)",
)
def demo(url: str) -> int:
    """Run a short demo of the API: a mutex, a semaphore and an election."""
    run(server.demo(url))
    return Status.OK


for _command in (
    hold.lock,
    hold.elect,
    claim.claim,
    claim.release_claim,
    election.leader,
    election.observe,
    listing.ls,
    listing.describe,
    listing.sessions,
    listing.watch,
    listing.kill_session,
    why.why,
    top.top,
    nodes.node,
    cluster.cluster,
    reload.reload,
):
    cli.add_command(_command)
cli.add_command(__import__("tenure.cli.repair", fromlist=["repair"]).repair)  # issue 28
cli.add_command(__import__("tenure.cli.cells", fromlist=["cells"]).cells)  # issue 61
cli.add_command(__import__("tenure.cli.group", fromlist=["group"]).group)  # issue 35
cli.add_command(__import__("tenure.cli.backup", fromlist=["backup"]).backup)  # issue 50
cli.add_command(__import__("tenure.cli.backup", fromlist=["restore"]).restore)


def main(argv: Sequence[str]) -> int:
    """Run ``tenure ARGV``; the exit status. Errors are one line on stderr, no traceback."""
    try:
        result = cli.main(list(argv), prog_name="tenure", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as error:
        click.echo(error.ctx.get_help(), err=True)
        return Status.USAGE
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.exceptions.Abort:
        return Status.SIGNAL_BASE + signal.SIGINT  # ^C while click itself was reading
    except KeyboardInterrupt:
        return Status.SIGNAL_BASE + signal.SIGINT
    except Exception as error:
        if not expected(error) and os.environ.get(TRACEBACK_ENV) == "1":
            traceback.print_exception(error)
        print(error_line(error), file=sys.stderr, flush=True)
        return status_of(error)
    return result if isinstance(result, int) else Status.OK
