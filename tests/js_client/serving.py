"""A ``tenure serve`` for the JavaScript tests, given a minute to start listening.

:class:`tests.server.wire.ServerProcess` waits ``WAIT`` (10 s) for its server; these
tests start one beside node processes, ``npm`` and ``tsc``, and on a busy machine an
interpreter took longer than that to start (the tests failed, nothing else wrong).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from tests.server.wire import ServerProcess

#: How long a server may take to listen: a bound, not a measurement.
STARTUP_S: Final = 60.0


@contextmanager
def serving(data_dir: Path, *extra: str) -> Iterator[ServerProcess]:
    """``tenure serve`` on a free port with ``extra`` arguments, listening; killed after."""
    server = ServerProcess(data_dir, *extra)
    try:
        deadline = time.monotonic() + STARTUP_S
        while '"msg": "listening"' not in server.output():
            assert server.proc.poll() is None, f"server exited: {server.output()}"
            late = f"not listening within {STARTUP_S} s: {server.output()}"
            assert time.monotonic() < deadline, late
            time.sleep(0.02)
        yield server
    finally:
        server.kill()
