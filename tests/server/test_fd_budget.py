"""The listeners' shared file-descriptor budget (tenure.server._net.fds), issue 28."""

from __future__ import annotations

import logging
import resource

import pytest

from tenure.server._net import fds


class FakeLimits:
    """RLIMIT_NOFILE as ``getrlimit``/``setrlimit`` see it, without touching the process."""

    def __init__(self, soft: int, hard: int) -> None:
        self.soft, self.hard = soft, hard

    def get(self, which: int) -> tuple[int, int]:
        assert which == resource.RLIMIT_NOFILE
        return self.soft, self.hard

    def set(self, which: int, limits: tuple[int, int]) -> None:
        soft, hard = limits
        if soft > self.hard:
            raise ValueError("not allowed")
        self.soft, self.hard = soft, hard


@pytest.fixture
def limits(monkeypatch: pytest.MonkeyPatch) -> FakeLimits:
    fake = FakeLimits(1024, 1024)
    monkeypatch.setattr(resource, "getrlimit", fake.get)
    monkeypatch.setattr(resource, "setrlimit", fake.set)
    return fake


def test_the_soft_limit_is_raised_to_fit_every_listener(limits: FakeLimits) -> None:
    limits.hard = 1 << 20
    assert fds.native_share(1024, 256) == 1024  # (1,024 + 256 + 64 do not fit in 1,024)
    assert limits.soft == 1024 + 256 + fds.HEADROOM


def test_a_low_hard_limit_lowers_the_native_share(
    limits: FakeLimits, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="tenure.server"):
        share = fds.native_share(1024, 256)
    assert share == 1024 - 256 - fds.HEADROOM  # the HTTP port keeps its whole cap
    [line] = [r for r in caplog.records if getattr(r, "event", None) == "fd_budget"]
    assert line.levelno == logging.WARNING


def test_enough_descriptors_change_nothing(limits: FakeLimits) -> None:
    limits.soft = limits.hard = 100_000
    assert fds.native_share(1024, 0) == 1024
    assert limits.soft == 100_000  # never lowered
