"""The ``tenure`` command."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from urllib.parse import urlsplit

import tenure
from tenure.errors import TenureError
from tenure.server._config.serve_config import ConfigError
from tenure.server._config.serve_config import add_arguments as add_serve_arguments
from tenure.server._config.serve_config import resolve as resolve_serve_config
from tenure.server._startup import run as run_server


async def demo(url: str) -> None:
    """Three workers share a mutex, a semaphore and an election, and say what they see."""
    async with tenure.connect(url) as client:
        await client.create_node("demo")
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
            await pool.create(limit=2, data=b"two slots")
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


def migrate(url: str) -> int:
    """``tenure migrate URL``: create or upgrade a postgres:// schema; the exit status."""
    if urlsplit(url).scheme.lower() not in ("postgres", "postgresql"):
        print(
            f"tenure migrate: only postgres:// URLs have tables to migrate, got {url!r}",
            file=sys.stderr,
        )
        return 2
    try:
        from tenure.backends.postgres._migrate import migrate_url

        print(asyncio.run(migrate_url(url)))
    except ImportError as error:
        print(
            f"tenure migrate: needs the postgres extra ({error.name} is missing): "
            "pip install 'tenure[postgres]'",
            file=sys.stderr,
        )
        return 1
    except TenureError as error:
        print(f"tenure migrate: {error}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tenure`` console script."""
    parser = argparse.ArgumentParser(
        prog="tenure", description="tenure: distributed coordination for Python."
    )
    parser.add_argument("--version", action="version", version=f"tenure {tenure.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    run_demo = commands.add_parser("demo", help="run a short demo of the API on memory://")
    run_demo.add_argument("--url", default="memory://", help="backend URL (default: memory://)")
    serve = commands.add_parser(
        "serve",
        help="run a tenure server (tenure:// clients connect to it)",
        description="Run a tenure server. Each setting is a flag, an environment "
        "variable TENURE_<NAME> or a key of the --config file (a flag wins over the "
        "variable, the variable over the file). Stops gracefully on SIGTERM or SIGINT.",
    )
    add_serve_arguments(serve)
    run_migrate = commands.add_parser(
        "migrate",
        help="create or upgrade the tables of a postgres:// URL (else done on first use)",
    )
    run_migrate.add_argument("url", help="postgres://user:password@host:port/db?schema=tenure")
    args = parser.parse_args(argv)
    if args.command == "migrate":
        return migrate(args.url)
    if args.command == "demo":
        asyncio.run(demo(args.url))
        return 0
    if args.command == "serve":
        try:
            config = resolve_serve_config(args, os.environ)
        except ConfigError as error:
            serve.error(str(error))
        return run_server(config)
    parser.print_help(sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
