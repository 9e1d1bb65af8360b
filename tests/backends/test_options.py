"""The URL option helpers every self-parsing backend shares (etcd, redis, postgres)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

import pytest

import tenure
from tenure._core.limits import MAX_PREFIX_WATCHES_PER_NODE
from tenure._url_options import MAX_SECONDS, merged_settings, seconds
from tenure.backends._options import MOST_PREFIX_WATCHES_PER_NODE, WITHDRAW_WAIT
from tenure.backends._session import StoreSession
from tenure.backends.etcd._url import parse_url as parse_etcd
from tenure.backends.postgres._url import parse_url as parse_postgres
from tenure.backends.redis._url import parse_url as parse_redis
from tenure.errors import InvalidArgumentError

#: A backend's URL parser.
Parse = Callable[[str, Mapping[str, object]], object]


def test_keywords_win_over_the_query() -> None:
    parts = urlsplit("x://h?a=1&b=&c=3")
    settings = merged_settings("x", parts, {"a": 9}, {"a", "b", "c"})
    assert settings == {"a": 9, "b": "", "c": "3"}


def test_every_unknown_option_is_named_with_the_scheme() -> None:
    parts = urlsplit("x://h?zeta=1&a=1")
    with pytest.raises(InvalidArgumentError, match=r"unknown x:// option\(s\): alpha, zeta"):
        merged_settings("x", parts, {"alpha": 2}, {"a"})


@pytest.mark.parametrize(
    ("value", "expected"), [("0.5", 0.5), (2, 2.0), (str(MAX_SECONDS), MAX_SECONDS)]
)
def test_seconds_in_bounds(value: object, expected: float) -> None:
    assert seconds({"t": value}, "t", 1.0) == expected


def test_seconds_default_when_absent() -> None:
    assert seconds({}, "t", 7.5) == 7.5


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("soon", "t must be a number of seconds"),
        (None, "t must be a number of seconds"),
        ("0", r"t must be in \(0, 3600\] seconds, got 0"),
        ("-1", r"t must be in \(0, 3600\] seconds, got -1"),
        ("3600.5", r"t must be in \(0, 3600\] seconds, got 3600.5"),
    ],
)
def test_seconds_refused(value: object, match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        seconds({"t": value}, "t", 1.0)


@pytest.mark.parametrize(
    ("parse", "url"),
    [
        (parse_etcd, "etcd://h?request_timeout=0"),
        (parse_redis, "redis://h?request_timeout=0"),
        (parse_postgres, "postgres://h/db?request_timeout=0"),
    ],
)
def test_each_backend_bounds_its_timeouts_alike(parse: Parse, url: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"request_timeout must be in \(0, 3600\]"):
        parse(url, {})


@pytest.mark.parametrize(
    ("parse", "url", "scheme"),
    [
        (parse_etcd, "etcd://h?nope=1", "etcd"),
        (parse_redis, "redis://h?nope=1", "redis"),
        (parse_postgres, "postgres://h/db?nope=1", "postgres"),
    ],
)
def test_each_backend_refuses_unknown_options(parse: Parse, url: str, scheme: str) -> None:
    with pytest.raises(InvalidArgumentError, match=rf"unknown {scheme}:// option\(s\): nope"):
        parse(url, {})


@pytest.mark.parametrize(
    ("parse", "url"),
    [
        (parse_etcd, "etcd://h"),
        (parse_redis, "redis://h"),
        (parse_postgres, "postgres://h/db"),
    ],
)
def test_each_store_takes_withdraw_wait_from_the_query_or_a_keyword(parse: Parse, url: str) -> None:
    """``withdraw_wait``: how long a cancelled acquire's caller waits for its withdrawal."""
    assert _withdraw_wait(parse(url, {})) == WITHDRAW_WAIT
    sep = "&" if "?" in url else "?"
    assert _withdraw_wait(parse(url + sep + "withdraw_wait=0.25", {})) == 0.25
    assert _withdraw_wait(parse(url + sep + "withdraw_wait=0.25", {"withdraw_wait": 3})) == 3.0
    with pytest.raises(InvalidArgumentError, match=r"withdraw_wait must be in \(0, 3600\]"):
        parse(url + sep + "withdraw_wait=0", {})


@pytest.mark.parametrize(
    ("parse", "url"), [(parse_redis, "redis://h"), (parse_postgres, "postgres://h/db")]
)
def test_the_stores_that_scan_prefix_watches_bound_them_as_the_engine(
    parse: Parse, url: str
) -> None:
    """``max_prefix_watches_per_node``: the engine's bound by default, one rule for both."""
    option = "max_prefix_watches_per_node"  # (two option types: read by name)
    assert getattr(parse(url, {}), option) == MAX_PREFIX_WATCHES_PER_NODE
    assert getattr(parse(f"{url}?{option}=5", {option: 7}), option) == 7  # (a keyword wins)
    for bad in ("0", "x", str(MOST_PREFIX_WATCHES_PER_NODE + 1)):
        with pytest.raises(InvalidArgumentError, match=f"{option} must be"):
            parse(f"{url}?{option}={bad}", {})
    with pytest.raises(InvalidArgumentError, match="unknown etcd:// option"):
        parse_etcd(f"etcd://h?{option}=5", {})  # (not etcd's: docs/backends.md says why)


def _withdraw_wait(parsed: object) -> float:
    options = parsed[0] if isinstance(parsed, tuple) else parsed
    wait = getattr(options, "withdraw_wait")  # noqa: B009  (three option types)
    assert isinstance(wait, float)
    return wait


async def test_memory_sessions_wait_as_long_as_withdraw_wait_says() -> None:
    async with tenure.connect("memory://", withdraw_wait=0.25) as client:
        await client.create_node("n")
        session = await client.session("n")
        backend_session = session._backend_session()
        assert isinstance(backend_session, StoreSession)
        assert backend_session.withdraw_wait == 0.25
    async with tenure.connect("memory://") as client:
        await client.create_node("n")
        backend_session = (await client.session("n"))._backend_session()
        assert isinstance(backend_session, StoreSession)
        assert backend_session.withdraw_wait == WITHDRAW_WAIT


@pytest.mark.parametrize("url", ["memory://", "tenure://127.0.0.1:9"])
async def test_a_withdraw_wait_out_of_bounds_is_refused_before_connecting(url: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"withdraw_wait must be in \(0, 3600\]"):
        await tenure.connect(url, withdraw_wait=0)


@pytest.mark.parametrize(
    "url",
    [
        "tenure://[bad?token=s3cr3t-token",  # urlsplit cannot split it
        "tenure://h:99999?token=s3cr3t-token",  # a port out of range
        "tenure://a,a?token=s3cr3t-token",  # a server listed twice
        "postgres:///db?password=s3cr3t-token",  # no host
        "nonsense?token=s3cr3t-token",  # not a URL
    ],
)
async def test_a_bad_url_is_invalid_argument_and_its_secrets_are_not_shown(url: str) -> None:
    # Issue 37: a malformed URL was a ValueError (the CLI's "internal error"), and a
    # bad one quoted its ?token= in the error.
    with pytest.raises(InvalidArgumentError) as raised:
        await tenure.connect(url)
    assert "s3cr3t-token" not in str(raised.value)
    assert "***" in str(raised.value)
