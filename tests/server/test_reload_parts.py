"""Reload's parts in this process (issue 50): the request rates retuned, the admin
token, and :func:`tenure.server._reload.reload` on a ``Server`` as ``tenure serve``
composes it (the ledger's quotas, a refusal that changes nothing, a cluster member's
next term keeping what was loaded). The real process, TLS and the CLI are
tests/server/net/test_reload.py's."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from tenure._core.quotas import NO_QUOTA, Quota
from tenure.errors import LimitExceededError
from tenure.server import DataDir, FsyncMode, Journal, ServeConfig, Server, wal_host
from tenure.server._config.settings import ConfigError
from tenure.server._http.admin import is_admin
from tenure.server._net.auth import Access, Token, Tokens
from tenure.server._net.token_rates import TokenRates, rates_of
from tenure.server._reload import reload, reload_logged

from .tenants import auth_text, token
from .wire import bound

Loaded = tuple[ssl.SSLContext | None, Tokens | None]


def rate(per_second: float) -> Quota:
    return Quota.from_mapping({"requests_per_second": per_second}, "test")


def test_retuned_rates_keep_a_drained_bucket_and_drop_a_removed_rate() -> None:
    rates = TokenRates({"a": rate(1.0), "b": rate(1.0)})
    rates.take("a", 0.0)
    rates.take("b", 0.0)
    rates.retune(rates_of({"a": rate(1.0), "b": NO_QUOTA, "c": rate(1.0)}))
    with pytest.raises(LimitExceededError, match="'a'"):
        rates.take("a", 0.0)  # a reload gives no fresh burst
    rates.take("b", 0.0)  # no rate any more
    rates.take("b", 0.0)
    rates.take("c", 0.0)  # a new token's rate holds
    with pytest.raises(LimitExceededError, match="'c'"):
        rates.take("c", 0.0)


async def test_a_reload_before_the_server_serves_is_refused_not_fatal() -> None:
    refusal = await reload_logged(None)  # (SIGHUP during a recovery: no server yet)
    assert isinstance(refusal, ConfigError)
    assert "not serving" in str(refusal)


def test_an_admin_token_is_read_write_on_every_node() -> None:
    assert is_admin(Token("root"))
    assert not is_admin(Token("reader", access=Access.READ_ONLY))
    assert not is_admin(Token("jobs", nodes=("jobs",)))


def made(config: ServeConfig, loaded: Loaded | None = None) -> Server:
    """A server of ``config`` on a data directory of its own, not started."""
    journal = Journal(DataDir(config.data_dir, FsyncMode.OFF))
    engine = journal.open(asyncio.get_running_loop().time())
    return Server(
        config, wal_host(config, journal, engine), bound(config), b"1" * 16, loaded=loaded
    )


async def serving(config: ServeConfig, loaded: Loaded | None = None) -> Server:
    server = made(config, loaded)
    await server.start()
    return server


def settings(tmp_path: Path, auth: Path, data: str = "data") -> ServeConfig:
    return ServeConfig(port=0, data_dir=tmp_path / data, auth_file=auth, fsync=FsyncMode.OFF)


async def test_reload_takes_the_new_quotas_and_a_broken_file_changes_nothing(
    tmp_path: Path,
) -> None:
    auth = tmp_path / "auth.toml"
    auth.write_text(auth_text(token("a", "sa"), token("b", "sb")))
    server = await serving(settings(tmp_path, auth))
    try:
        tokens = server.gate.tokens
        assert tokens is not None
        auth.write_text(auth_text(token("a", "sa", quota={"sessions": 3}), token("c", "sc")))
        done = await reload(server)
        assert (done.added, done.removed, done.changed) == (("c",), ("b",), ("a",))
        assert server.gate.tokens is tokens  # in place: every holder sees the new tokens
        assert tokens.names == ["a", "c"]
        assert server.host.engine.ledger.quotas["a"].sessions == 3
        assert tokens.authenticate("sb") is None
        auth.write_text("[[token]]\n")
        refusal = await reload_logged(server)
        assert isinstance(refusal, ConfigError)
        assert str(auth) in str(refusal)
        assert tokens.names == ["a", "c"]
        assert server.host.engine.ledger.quotas["a"].sessions == 3
    finally:
        server.stop()
        await server.wait()


async def test_a_next_term_keeps_what_was_loaded(tmp_path: Path) -> None:
    """A cluster member's next term is given the previous term's TLS and tokens: a
    file broken since does not stop it (without them, it would not start)."""
    auth = tmp_path / "auth.toml"
    auth.write_text(auth_text(token("a", "sa")))
    first = await serving(settings(tmp_path, auth))
    first.stop()
    await first.wait()
    auth.write_text("not toml [")
    with pytest.raises(ConfigError, match="not valid TOML"):
        made(settings(tmp_path, auth, "other"))
    second = await serving(settings(tmp_path, auth, "next"), (first.gate.tls, first.gate.tokens))
    try:
        assert second.gate.tokens is first.gate.tokens
        assert second.host.engine.ledger.quotas.keys() == {"a"}
    finally:
        second.stop()
        await second.wait()
