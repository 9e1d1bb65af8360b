"""The test harness's free ports: never the same one twice to one process."""

from __future__ import annotations

import collections
import socket
from typing import Any

import pytest

from tests import ports


def test_one_process_is_never_handed_a_port_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    # The OS hands out a just-closed port again often enough to fail a cluster start
    # (`--port P --http-port P`) once in a CI run; make it do so every time here.
    handed = iter([41001, 41001, 41001, 41003, 41003, 41005])

    class Repeating(socket.socket):
        def getsockname(self) -> Any:
            return ("127.0.0.1", next(handed))

    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.setattr(socket, "socket", Repeating)
    monkeypatch.setattr(ports, "_handed", collections.deque(maxlen=2))
    monkeypatch.setattr(ports, "_handed_set", set())
    assert [ports.free_port(), ports.free_port(), ports.free_port()] == [41001, 41003, 41005]
    assert ports._handed_set == {41003, 41005}, "only the last REMEMBERED are kept"
