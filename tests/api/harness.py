"""The repo's harnesses for the conformance kit: ``memory://`` and a ``tenure serve``.

The kit (:mod:`tenure.testing.conformance`) reaches a backend through a harness;
with no ``--tenure-url``, the repo's run hands it :data:`ALL_HARNESSES` (see
``tests/conftest.py``). The server harness is repo-only: it starts ``tenure serve``
with the test helpers of ``tests/server``.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from tenure.testing.conformance.harness import Harness, MemoryHarness, UrlHarness, in_ci, unique

__all__ = ["ALL_HARNESSES", "Harness", "MemoryHarness", "TenureHarness", "in_ci", "unique"]


class TenureHarness(UrlHarness):
    """``tenure://``: one real ``tenure serve`` subprocess for the whole run.

    Tests share the server; each works in its own fresh node, so they do not meet.
    Time is the server's real clock (no FakeClock), so tests that need ``clock``
    skip here; tests/backends/test_remote_*.py cover expiry and disconnects in real
    time, through a TCP proxy.
    """

    def __init__(self) -> None:
        super().__init__("tenure://")
        self._tmp: Path | None = None
        self._server: Any = None

    def start(self) -> None:
        from tests.server.wire import ServerProcess  # a test helper: imported when used

        self._tmp = Path(tempfile.mkdtemp(prefix="tenure-api-"))
        # fsync off: the suite tests the API, not the disk (tests/server covers it).
        server = ServerProcess(self._tmp / "data", "--fsync", "off")
        self._server = server.__enter__()

    def stop(self) -> None:
        if self._server is not None:
            self._server.kill()
            self._server = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def url(self, state: str) -> str:
        assert self._server is not None, "the harness was not started"
        return f"tenure://127.0.0.1:{self._server.port}"


#: Every backend the repo's run tests. Real servers (etcd, postgres, redis) join
#: here; their ``unavailable()`` says when their server is missing.
ALL_HARNESSES: list[Harness] = [MemoryHarness(), TenureHarness()]
