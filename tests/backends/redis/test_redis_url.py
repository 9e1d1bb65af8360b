"""redis:// URLs and options: what each part means, and clear refusals of bad ones."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tenure
from tenure._core.limits import (
    DEADLOCK_SEARCH_LIMIT,
    MAX_DEADLOCK_LINKS,
    MAX_DEADLOCK_NAME_BYTES,
    MAX_DEADLOCKS_SHOWN,
    MAX_PREFIX_WATCHES_PER_NODE,
)
from tenure.backends.redis import node_base
from tenure.backends.redis._conn import LIBRARY, LIMITS
from tenure.backends.redis._url import parse_url
from tenure.errors import InvalidArgumentError, UnavailableError


def test_the_parts_of_a_url() -> None:
    options = parse_url("redis://alice:s%40cret@db.example:6380/3?prefix=app:", {})
    assert (options.host, options.port, options.db) == ("db.example", 6380, 3)
    assert (options.username, options.password) == ("alice", "s@cret")
    assert options.prefix == "app:"
    assert not options.tls
    assert (options.connect_timeout, options.request_timeout) == (5.0, 5.0)
    default = parse_url("redis://localhost", {})
    assert (default.port, default.db, default.prefix) == (6379, 0, "tenure:")


def test_the_bounds_sent_with_calls_are_the_engines_by_default() -> None:
    default = parse_url("redis://h", {})
    assert default.deadlock_search_limit == DEADLOCK_SEARCH_LIMIT
    assert default.max_prefix_watches_per_node == MAX_PREFIX_WATCHES_PER_NODE
    assert parse_url("redis://h?max_prefix_watches_per_node=7", {}).max_prefix_watches_per_node == 7
    for bad in ("0", "-1", "x", "1000001"):
        with pytest.raises(InvalidArgumentError, match="max_prefix_watches_per_node must be"):
            parse_url(f"redis://h?max_prefix_watches_per_node={bad}", {})


def test_the_library_states_the_engines_limits() -> None:
    # The limits the functions keep (a cycle's text, the deadlocks a node keeps) are
    # the engine's, put in from tenure._core.limits: none left unfilled.
    assert LIMITS == {
        "MAX_DEADLOCKS_SHOWN": MAX_DEADLOCKS_SHOWN,
        "MAX_DEADLOCK_LINKS": MAX_DEADLOCK_LINKS,
        "MAX_DEADLOCK_NAME_BYTES": MAX_DEADLOCK_NAME_BYTES,
    }
    assert not re.search(r"@[A-Z_]+@", LIBRARY)
    assert f"local DL_LINKS = {MAX_DEADLOCK_LINKS}\n" in LIBRARY
    assert f"local DL_NAME_BYTES = {MAX_DEADLOCK_NAME_BYTES}\n" in LIBRARY
    assert f"local DL_KEEP = {MAX_DEADLOCKS_SHOWN}\n" in LIBRARY


def test_keywords_win_over_the_url() -> None:
    options = parse_url("redis://h/1?prefix=a:", {"db": 2, "prefix": "b:", "password": "pw"})
    assert (options.db, options.prefix, options.password) == (2, "b:", "pw")


def test_tls_by_scheme_or_by_ca(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not checked here")
    assert parse_url("rediss://h", {}).tls
    assert parse_url(f"redis://h?ca={ca}", {}).tls


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("redis://h?colour=blue", "unknown redis:// option"),
        ("redis://h/zero", "database must be a number"),
        ("redis://h?prefix=", "prefix"),
        ("redis://h?prefix=a{b}:", "braces"),
        ("redis://h?cert=/x", "need TLS"),
        ("redis://h?connect_timeout=0", "connect_timeout"),
        ("redis://h?request_timeout=soon", "request_timeout"),
        ("rediss://h?ca=/no/such/file", "no such file"),
        ("redis://a,b", "one host"),
        ("redis://h:99999", "bad redis:// address"),
    ],
)
def test_a_bad_url_is_refused_by_name(url: str, match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        parse_url(url, {})


def test_node_names_make_one_hash_tag() -> None:
    assert node_base("t:", "n") == "t:{n}:"
    # Braces in a name would end the tag early: escaped, the tag is the whole name.
    assert node_base("t:", "a}b{c%") == "t:{a%7Db%7Bc%25}:"


async def test_an_unreachable_server_is_unavailable() -> None:
    with pytest.raises(UnavailableError):
        await tenure.connect("redis://127.0.0.1:1", connect_timeout=0.5)
