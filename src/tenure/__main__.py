"""The ``tenure`` command (``python -m tenure``); the commands live in :mod:`tenure.cli`.

``serve`` and ``migrate`` run without the ``cli`` extra (click, rich): a server
install needs neither. Every other command needs it, and says so in one line.

Layer (CONTRIBUTING.md): this module may import tenure.cli._status, tenure.cli (lazily)
and tenure.errors.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence

from tenure.cli._status import Status

#: The modules of the ``cli`` extra; a command that misses one says how to install it.
CLI_EXTRA_MODULES = ("click", "rich")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tenure`` console script; the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return _run(args)
    except KeyboardInterrupt:  # ^C before a command took charge of it: no traceback
        return Status.SIGNAL_BASE + signal.SIGINT


def _run(args: list[str]) -> int:
    """``serve`` and ``migrate`` straight away; any other command through click."""
    if args and args[0] in ("serve", "migrate"):
        from tenure.cli import server

        return server.serve_main(args[1:]) if args[0] == "serve" else server.migrate_main(args[1:])
    try:
        from tenure.cli.app import main as cli_main
    except ImportError as error:
        if (error.name or "").partition(".")[0] not in CLI_EXTRA_MODULES:
            raise
        print(
            f"tenure: this command needs the cli extra ({error.name} is missing): "
            "pip install 'tenure[cli]'",
            file=sys.stderr,
        )
        return Status.FAILED
    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
