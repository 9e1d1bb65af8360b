"""The ``tenure`` console script: SIGHUP held from its first instruction, then the command.

SIGHUP's default ends a process, and ``tenure serve`` is told to reload by it: one sent
while the command starts (importing tenure takes a second or more on a busy machine,
before any handler of the server's can be set) ended it. So this module, which imports
nothing of tenure's, blocks SIGHUP first thing for ``serve``; the server unblocks it once
its handler is set, and one that arrived meanwhile is delivered then: before the server
serves, refused and logged (``reload_refused``; docs/operations.md, "Reload"). Shards
started by ``--shards`` inherit the block, and unblock it the same way. The interpreter's
own start, before this module runs, is the one window left (tens of milliseconds).

``python -m tenure serve`` blocks it too (:func:`tenure.cli.server.serve_main`'s first
line), once the ``tenure`` package is imported.
"""

from __future__ import annotations

import signal
import sys


def main() -> int:
    """Entry point of the ``tenure`` console script; the exit status."""
    if sys.argv[1:2] == ["serve"]:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    from tenure.__main__ import main as tenure_main

    return tenure_main()
