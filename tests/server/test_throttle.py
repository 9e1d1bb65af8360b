"""The authentication throttle's core (tenure.server._net.throttle), time passed in."""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path

import pytest

from tenure.server._config.serve_config import ConfigError, ServeConfig, add_arguments, resolve
from tenure.server._net.gate import Gate
from tenure.server._net.pauses import PauseWatch
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


def test_failures_at_one_name_from_many_addresses_block_the_name() -> None:
    throttle = Throttle(3, 30.0)
    for n in range(3):
        assert throttle.check(f"10.0.0.{n}", n, "deployer")
        throttle.failed(f"10.0.0.{n}", n, "deployer")
    assert throttle.check("10.0.0.0", 3.0)  # no address is blocked...
    assert not throttle.check("10.0.0.7", 3.0, "deployer")  # ...but the name is,
    assert throttle.check("10.0.0.7", 3.0, "viewer")  # and only that name
    assert (throttle.blocked(3.0), throttle.blocked_names(3.0)) == (0, 1)
    assert throttle.check("10.0.0.7", 33.1, "deployer")  # for the block time
    assert throttle.refused_total == 1


def test_a_blocked_name_still_hears_its_owners_addresses() -> None:
    throttle = Throttle(2, 30.0, names=frozenset({"deployer"}))
    throttle.succeeded("10.9.9.9", "deployer")  # its owner logged in before
    throttle.failed("10.0.0.1", 1.0, "deployer")
    throttle.failed("10.0.0.2", 1.0, "deployer")
    assert not throttle.check("10.0.0.3", 2.0, "deployer")
    assert throttle.check("10.9.9.9", 2.0, "deployer")
    throttle.succeeded("10.0.0.1", "other")  # a success forgets no failure
    assert not throttle.check("10.0.0.3", 2.0, "deployer")


def test_a_name_the_auth_file_has_is_never_pushed_out() -> None:
    throttle = Throttle(2, 30.0, max_addresses=10, names=frozenset({"deployer"}))
    throttle.failed("10.0.0.1", 0.0, "deployer")
    for n in range(100):  # a guesser naming ever new users
        throttle.failed("10.0.0.2", 0.0, f"user-{n}")
    assert throttle.tracked_targets() == 11  # ten others, and the token's own name
    throttle.failed("10.0.0.3", 1.0, "deployer")  # its second failure: still counted
    assert not throttle.check("10.0.0.4", 2.0, "deployer")
    assert throttle.check("10.0.0.4", 2.0, "user-0")  # forgotten, the oldest other


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


def test_the_tracked_entries_are_a_setting(tmp_path: Path) -> None:
    """``--auth-max-tracked`` (TENURE_AUTH_MAX_TRACKED, ``auth_max_tracked``): how many
    addresses and how many other names the throttle tracks; at least 1."""

    def parse(*argv: str, env: dict[str, str] | None = None) -> ServeConfig:
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        return resolve(parser.parse_args(argv), env or {})

    assert parse().auth_max_tracked == 10_000
    assert parse("--auth-max-tracked", "5").auth_max_tracked == 5
    assert parse(env={"TENURE_AUTH_MAX_TRACKED": "6"}).auth_max_tracked == 6
    file = tmp_path / "tenure.toml"
    file.write_text("auth_max_tracked = 7\n")
    assert parse("--config", str(file)).auth_max_tracked == 7
    with pytest.raises(ConfigError, match="--auth-max-tracked='0'"):
        parse("--auth-max-tracked", "0")


async def test_the_servers_throttle_tracks_what_the_setting_says(tmp_path: Path) -> None:
    auth = tmp_path / "auth.toml"
    auth.write_text('[[token]]\nname = "deployer"\nsecret = "s3cret"\naccess = "read-write"\n')
    config = ServeConfig(port=0, auth_file=auth, auth_max_tracked=2)
    gate = Gate(
        config,
        b"1" * 16,
        lambda conn, message: None,
        window_of=lambda c: None,
        detach=print,
        pauses=PauseWatch(asyncio.get_running_loop()),
    )
    assert gate.tokens is not None
    throttle = gate.tokens.throttle
    throttle.failed("10.0.0.1", 0.0, "deployer")
    for n in range(5):
        throttle.failed(f"10.0.1.{n}", 0.0, f"user-{n}")
    assert (throttle.tracked(), throttle.tracked_targets()) == (2, 3)  # and "deployer"
