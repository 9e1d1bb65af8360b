"""etcd URLs read into the client's options and a prefix (``tenure/_etcd/url.py``).

Every etcd URL of ours takes these options (the ``etcd://`` backend's and a
cluster's ``--cluster``); the backend adds ``withdraw_wait``, which the client's
parser refuses as any option it does not know.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tenure._etcd.url import DEFAULT_PREFIX, parse_url
from tenure.backends.etcd._url import parse_url as parse_backend_url
from tenure.errors import InvalidArgumentError


def test_hosts_without_a_port_get_etcds_and_the_prefix_its_default() -> None:
    client, prefix = parse_url("etcd://a,b:2380, c ", {})
    assert client.endpoints == ("a:2379", "b:2380", "c:2379")
    assert client.credentials is None
    assert (client.connect_timeout, client.request_timeout) == (5.0, 5.0)
    assert prefix == DEFAULT_PREFIX == "/tenure/"


def test_keywords_win_over_the_query() -> None:
    client, prefix = parse_url(
        "etcd://h?prefix=/q/&request_timeout=2", {"prefix": "/k/", "connect_timeout": 0.5}
    )
    assert prefix == "/k/"
    assert (client.connect_timeout, client.request_timeout) == (0.5, 2.0)


def test_a_user_is_unquoted_and_a_password_counts_only_with_a_user() -> None:
    client, _ = parse_url("etcd://h?user=ops%40site&password=pw", {})
    assert (client.user, client.password) == ("ops@site", "pw")
    client, _ = parse_url("etcd://h?password=pw", {})
    assert (client.user, client.password) == (None, None)


def test_etcds_or_a_ca_means_tls(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"not checked until the channel is made")
    assert parse_url("etcds://h", {})[0].credentials is not None
    client, _ = parse_url(f"etcd://h?ca={ca}&server_hostname=etcd.internal", {})
    assert client.credentials is not None
    assert client.server_hostname == "etcd.internal"


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("etcd://", "at least one host"),
        ("etcd://h/name", "takes no path"),
        ("etcd://h?prefix=", "prefix= must not be empty"),
        ("etcd://h?cert=c.pem", "need TLS"),
        ("etcd://h?ca=/nonexistent/ca.pem", "ca='/nonexistent/ca.pem'"),
        ("etcd://h?connect_timeout=0", r"connect_timeout must be in \(0, 3600\]"),
        ("etcd://h?colour=red", r"unknown etcd:// option\(s\): colour"),
    ],
)
def test_what_is_wrong_is_said(url: str, match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        parse_url(url, {})


def test_withdraw_wait_is_the_backends_option_not_the_clients() -> None:
    with pytest.raises(InvalidArgumentError, match=r"unknown etcd:// option\(s\): withdraw_wait"):
        parse_url("etcd://h?withdraw_wait=2", {})
    parsed = parse_backend_url("etcd://h?withdraw_wait=2&prefix=/p/", {"user": "u"})
    assert (parsed.withdraw_wait, parsed.prefix, parsed.client.user) == (2.0, "/p/", "u")
    assert parsed.client == parse_url("etcd://h?prefix=/p/", {"user": "u"})[0]
