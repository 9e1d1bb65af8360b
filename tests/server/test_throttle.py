"""The authentication throttle's core (tenure.server._net.throttle), time passed in."""

from __future__ import annotations

import logging

import pytest

from tenure.server._net.throttle import Throttle, peer_host


def test_an_address_is_blocked_after_its_failures_and_freed_after_the_block() -> None:
    throttle = Throttle(3, 30.0)
    for second in range(3):
        assert throttle.check("a", second)
        throttle.failed("a", second)
    assert not throttle.check("a", 3.0)  # blocked, whatever comes next
    assert throttle.check("b", 3.0)  # another address is not
    assert throttle.blocked(3.0) == 1
    assert not throttle.check("a", 31.9)
    assert throttle.check("a", 32.1)  # the block is over
    assert throttle.blocked(32.1) == 0
    assert throttle.refused_total == 2


def test_failures_are_counted_per_minute() -> None:
    throttle = Throttle(3, 30.0)
    throttle.failed("a", 0.0)
    throttle.failed("a", 1.0)
    throttle.failed("a", 61.0)  # a new minute: one failure in it
    assert throttle.check("a", 62.0)
    throttle.failed("a", 62.0)
    assert throttle.check("a", 63.0)
    throttle.failed("a", 63.0)  # the third of this minute
    assert not throttle.check("a", 64.0)
    assert throttle.blocks_total == 1


def test_one_log_line_per_burst(caplog: pytest.LogCaptureFixture) -> None:
    throttle = Throttle(2, 10.0)
    with caplog.at_level(logging.INFO, logger="tenure.server"):
        for second in range(20):  # guesses once a second for 20 s: two bursts
            if throttle.check("a", second):
                throttle.failed("a", second)
    blocks = [r for r in caplog.records if getattr(r, "event", None) == "auth_throttled"]
    assert len(blocks) == 2
    assert throttle.blocks_total == 2


def test_memory_is_bounded_the_oldest_address_forgotten() -> None:
    throttle = Throttle(1, 60.0, max_addresses=100)
    for n in range(1000):
        throttle.failed(f"10.0.{n // 256}.{n % 256}", 0.0)
    assert throttle.tracked() == 100
    assert throttle.check("10.0.0.0", 1.0)  # the oldest: forgotten
    assert not throttle.check("10.0.3.231", 1.0)  # the newest: blocked


def test_zero_never_throttles() -> None:
    throttle = Throttle(0, 60.0)
    for _ in range(100):
        throttle.failed("a", 0.0)
    assert throttle.check("a", 0.0)
    assert throttle.tracked() == 0


@pytest.mark.parametrize(
    ("peer", "host"),
    [
        (("127.0.0.1", 5000), "127.0.0.1"),
        (("::1", 5000, 0, 0), "::1"),
        ("('127.0.0.1', 5000)", "127.0.0.1"),
        ("ipv4:10.1.2.3:41000", "10.1.2.3"),
        ("ipv6:[::1]:41000", "::1"),
        ("10.1.2.3:80", "10.1.2.3"),
        ("unix:/tmp/s", "unix:/tmp/s"),
    ],
)
def test_peer_host(peer: object, host: str) -> None:
    assert peer_host(peer) == host
