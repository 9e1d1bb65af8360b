"""``tenure serve``, ``tenure migrate`` and ``tenure demo``.

``serve`` and ``migrate`` parse their arguments with argparse and import neither
click nor rich, so that a server (``pip install tenure``) runs without the ``cli``
extra. ``serve``'s flags are generated from the settings table
(:data:`tenure.server._config.settings.SETTINGS`, and each face's rows, which the face
registry lists: :func:`tenure.server._faces.settings`), never copied by hand.

Layer (CONTRIBUTING.md): this module may also import tenure.server (lazily) and
tenure.backends.postgres._migrate (lazily).
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import os
import re
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn
from urllib.parse import urlsplit

import tenure
from tenure.cli._status import Status
from tenure.errors import TenureError

SERVE_DESCRIPTION = (
    "Run a tenure server. Each setting is a flag, an environment variable "
    "TENURE_<NAME> or a key of the --config file (a flag wins over the variable, the "
    "variable over the file). Stops gracefully on SIGTERM or SIGINT."
)


#: The words argparse's error names the flags it does not know with.
_UNRECOGNIZED = re.compile(r"unrecognized arguments: (.*)")


class ShortUsageParser(argparse.ArgumentParser):
    """An argparse parser whose errors are the error first, then one line of usage.

    argparse's own writes the whole usage first: ``tenure serve`` has a flag per
    setting, so a mistyped flag printed some fifty lines of usage before its one
    line of error (issue 57). Here the error comes first, with the nearest flag if
    one is close (``--data-dri``: did you mean ``--data-dir``?), then a single
    line saying where the full usage is. Exit status 2, as argparse's.
    """

    def error(self, message: str) -> NoReturn:
        """Print ``message`` (and the flag meant, if one is close) and one line of usage."""
        nearest = self._nearest_flags(message)
        if nearest:
            message += f" (did you mean {' or '.join(nearest)}?)"
        usage = " ".join(self.format_usage().split())
        if len(self.format_usage().strip().splitlines()) > 1:  # (serve's: a flag per setting)
            usage = f"usage: {self.prog} [OPTIONS]"
        self.exit(
            Status.USAGE,
            f"{self.prog}: error: {message}\n{usage} (see '{self.prog} --help')\n",
        )

    def _nearest_flags(self, message: str) -> list[str]:
        """The known flags nearest to the unknown ones ``message`` names, if any."""
        found = _UNRECOGNIZED.match(message)
        if found is None:
            return []
        known = [flag for action in self._actions for flag in action.option_strings]
        nearest: list[str] = []
        for word in found.group(1).split():
            if word.startswith("--"):
                flag = word.partition("=")[0]
                nearest += difflib.get_close_matches(flag, known, n=1, cutoff=0.75)
        return nearest


def serve_main(argv: Sequence[str]) -> int:
    """``tenure serve ARGS``: run a server until SIGTERM or SIGINT; the exit status."""
    # SIGHUP held until the server's handler is set (its default ends the process; the
    # console script held it already: _tenure_console, whose docstring says why).
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    from tenure.server._config.serve_config import ConfigError
    from tenure.server._config.serve_config import add_arguments as add_serve_arguments
    from tenure.server._faces import settings as face_settings
    from tenure.server._startup import configure as configure_server
    from tenure.server._startup import run as run_server

    parser = ShortUsageParser(prog="tenure serve", description=SERVE_DESCRIPTION)
    add_serve_arguments(parser, face_settings())
    args = parser.parse_args(list(argv))
    try:
        config = configure_server(args, os.environ)
        if config.shards > 1:
            from tenure.server._shards import check_shards

            check_shards(config)
    except ConfigError as error:
        parser.error(str(error))  # exit 2: the error, then one line of usage
    if config.shards > 1:
        from tenure.server._logs import setup_logging
        from tenure.server._shards import run_shards

        setup_logging(config.log_format)
        return run_shards(config, argv)
    return run_server(config)


def migrate_main(argv: Sequence[str]) -> int:
    """``tenure migrate URL``: create or upgrade a postgres:// schema; the exit status."""
    parser = ShortUsageParser(
        prog="tenure migrate",
        description="Create or upgrade the tables of a postgres:// URL (else done on first use).",
    )
    parser.add_argument("url", help="postgres://user:password@host:port/db?schema=tenure")
    url: str = parser.parse_args(list(argv)).url
    if urlsplit(url).scheme.lower() not in ("postgres", "postgresql"):
        print(
            f"tenure migrate: only postgres:// URLs have tables to migrate, got {url!r}",
            file=sys.stderr,
        )
        return Status.USAGE
    try:
        from tenure.backends.postgres._migrate import migrate_url

        print(asyncio.run(migrate_url(url)))
    except ImportError as error:
        print(
            f"tenure migrate: needs the postgres extra ({error.name} is missing): "
            "pip install 'tenure[postgres]'",
            file=sys.stderr,
        )
        return Status.FAILED
    except TenureError as error:
        print(f"tenure migrate: {error}", file=sys.stderr)
        return Status.FAILED
    return Status.OK


async def demo(url: str) -> None:
    """Three workers share a mutex, a semaphore and an election, and say what they see.

    Runs again and again on the same server: the node and the semaphore it makes
    are left in place and found again (``exist_ok``).
    """
    async with tenure.connect(url) as client:
        await client.create_node("demo", exist_ok=True)
        order: list[str] = []

        async def worker(name: str) -> None:
            async with (
                client.session("demo", description=name) as session,
                session.mutex("job") as lock,
            ):
                order.append(name)
                print(f"{name}: holds 'job' with fencing token {lock.token}")
                await asyncio.sleep(0.05)

        await asyncio.gather(*(worker(f"worker-{i}") for i in range(3)))
        print(f"served in arrival order: {order}")

        async with client.session("demo", description="admin") as admin:
            pool = admin.semaphore("pool")
            await pool.create(limit=2, data=b"two slots", exist_ok=True)
            async with pool.acquire(count=2, data=b"admin") as lease:
                described = await pool.describe(owners=True)
                print(f"'pool': {described.count}/{described.limit} held, token {lease.token}")
            election = admin.election("primary")
            async with election.campaign(b"host-a:8080") as leadership:
                await leadership.proclaim(b"host-a:9090")
                leader = await election.leader()
                assert leader is not None
                print(f"leader of 'primary': {leader.data.decode()} (is me: {leader.is_me})")
    print("demo done")
