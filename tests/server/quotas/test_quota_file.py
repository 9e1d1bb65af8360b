"""Quotas per token in the auth file (``[token.quota]``) and the server-wide defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenure._core.quotas import Quota
from tenure.server._config.quota_settings import READ_ONLY_QUOTA, default_quota
from tenure.server._config.serve_config import ConfigError, ServeConfig
from tenure.server._net.auth import load_tokens

FILE = """
[[token]]
name = "batch"
secret = "batch-secret"
access = "read-write"
nodes = ["jobs-*"]
[token.quota]
sessions = 1000
watches = 10000
waiters = 10000
semaphores = 10000
nodes = 100
data_bytes = 67108864
prefix_watches = 50
recovery_window = 3600
requests_per_second = 5000

[[token]]
name = "viewer"
secret = "viewer-secret"
access = "read-only"

[[token]]
name = "wide-viewer"
secret = "wide-viewer-secret"
access = "read-only"
[token.quota]
sessions = 5000
recovery_window = 86400

[[token]]
name = "plain"
secret = "plain-secret"
access = "read-write"
"""


def _tokens(tmp_path: Path, text: str = FILE) -> dict[str, Quota]:
    path = tmp_path / "auth.toml"
    path.write_text(text)
    return load_tokens(path).quotas(default_quota(ServeConfig()))


def test_every_key_of_the_interface_is_read(tmp_path: Path) -> None:
    quotas = _tokens(tmp_path)
    assert quotas["batch"] == Quota(
        sessions=1000,
        watches=10000,
        waiters=10000,
        semaphores=10000,
        nodes=100,
        data_bytes=67108864,
        prefix_watches=50,
        recovery_window=3600.0,
        requests_per_second=5000.0,
    )
    assert quotas["plain"] == Quota()  # no default given: no quota at all


def test_read_only_tokens_get_small_defaults_unless_their_table_says_otherwise(
    tmp_path: Path,
) -> None:
    quotas = _tokens(tmp_path)
    assert quotas["viewer"] == READ_ONLY_QUOTA
    assert (quotas["viewer"].sessions, quotas["viewer"].recovery_window) == (100, 300.0)
    assert (quotas["viewer"].watches, quotas["viewer"].prefix_watches) == (10_000, 100)
    wide = quotas["wide-viewer"]
    assert (wide.sessions, wide.recovery_window, wide.watches) == (5000, 86400.0, 10_000)


def test_server_defaults_fill_what_a_token_leaves_out(tmp_path: Path) -> None:
    path = tmp_path / "auth.toml"
    path.write_text(FILE)
    config = ServeConfig(quota_sessions=7, quota_data_bytes=1024, quota_recovery_window=1000.0)
    quotas = load_tokens(path).quotas(default_quota(config))
    assert quotas["plain"] == Quota(sessions=7, data_bytes=1024, recovery_window=1000.0)
    assert quotas["batch"].sessions == 1000  # its own wins
    # A read-only token: the smaller of the server's default and the read-only one.
    assert quotas["viewer"].sessions == 7
    assert quotas["viewer"].recovery_window == 300.0
    assert quotas["viewer"].data_bytes == 1024


def test_the_prefix_watches_default_is_a_flag_and_a_read_only_token_s_at_most_100(
    tmp_path: Path,
) -> None:
    """Issue 47: ``--quota-prefix-watches`` (TENURE_QUOTA_PREFIX_WATCHES), the smaller
    of it and 100 for a read-only token."""
    for config in (ServeConfig(quota_prefix_watches=30), ServeConfig(quota_prefix_watches=500)):
        quotas = load_tokens(_written(tmp_path)).quotas(default_quota(config))
        assert quotas["plain"].prefix_watches == config.quota_prefix_watches
        assert quotas["batch"].prefix_watches == 50  # its own wins
        assert quotas["viewer"].prefix_watches == min(config.quota_prefix_watches, 100)


def _written(tmp_path: Path) -> Path:
    path = tmp_path / "auth.toml"
    path.write_text(FILE)
    return path


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ("sessoins = 3", "unknown quota 'sessoins'"),
        ("sessions = -1", "sessions must be an integer >= 0"),
        ('sessions = "10"', "sessions must be an integer >= 0"),
        ("data_bytes = 1.5", "data_bytes must be an integer >= 0"),
        ("recovery_window = 0", "recovery_window must be a number > 0"),
        ("requests_per_second = -3", "requests_per_second must be a number > 0"),
        ("recovery_window = nan", "recovery_window must be a number > 0"),
    ],
)
def test_bad_quotas_are_named(tmp_path: Path, table: str, named: str) -> None:
    path = tmp_path / "auth.toml"
    path.write_text(
        f'[[token]]\nname = "t"\nsecret = "s3cret"\naccess = "read-write"\n[token.quota]\n{table}\n'
    )
    with pytest.raises(ConfigError, match=named) as raised:
        load_tokens(path)
    assert "'t'" in str(raised.value)
    assert "s3cret" not in str(raised.value)


def test_a_quota_that_is_not_a_table_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "auth.toml"
    path.write_text('[[token]]\nname = "t"\nsecret = "s"\naccess = "read-write"\nquota = 3\n')
    with pytest.raises(ConfigError, match=r"quota must be a table"):
        load_tokens(path)
