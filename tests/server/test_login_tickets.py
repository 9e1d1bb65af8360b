"""The dashboard's login tickets (:mod:`tenure.server._http.login_tickets`), on a
clock of the test's: expiry, a token gone or with a new secret, logout, a forged or
altered ticket, another server's secret, and the bounded set of logged-out ids."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tenure.server._http import login_tickets
from tenure.server._http.login_tickets import LoginTickets
from tenure.server._net.auth import Access, Token, Tokens

SECRET = b"s" * 32


def token(name: str, secret: str) -> Token:
    return Token(name, hashlib.sha256(secret.encode()).digest(), Access.READ_ONLY)


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


OPS = token("ops", "ops-secret")
TOKENS = Tokens([OPS, token("other", "other-secret")])


def test_a_ticket_names_its_token_and_never_holds_the_secret() -> None:
    tickets = LoginTickets(SECRET, 60, Clock())
    ticket = tickets.issue(OPS)
    assert "ops-secret" not in ticket
    assert tickets.check(ticket, TOKENS) == OPS


def test_a_ticket_is_refused_once_expired() -> None:
    clock = Clock()
    tickets = LoginTickets(SECRET, 60, clock)
    ticket = tickets.issue(OPS)
    clock.now += 59
    assert tickets.check(ticket, TOKENS) == OPS
    clock.now += 1
    assert tickets.check(ticket, TOKENS) is None


def test_a_ticket_dies_with_its_token_or_its_secret() -> None:
    tickets = LoginTickets(SECRET, 60, Clock())
    ticket = tickets.issue(OPS)
    assert tickets.check(ticket, Tokens([token("other", "other-secret")])) is None
    assert tickets.check(ticket, Tokens([token("ops", "a-new-secret")])) is None


def test_forged_altered_or_foreign_tickets_are_refused() -> None:
    clock = Clock()
    tickets = LoginTickets(SECRET, 60, clock)
    ticket = tickets.issue(OPS)
    body, _, signature = ticket.rpartition(".")
    prefix, name, expires, issued, ticket_id = body.split(".")
    longer = f"{prefix}.{name}.{int(expires) + 3600}.{issued}.{ticket_id}.{signature}"
    assert tickets.check(longer, TOKENS) is None
    assert tickets.check(body + ".AAAA", TOKENS) is None
    assert LoginTickets(b"t" * 32, 60, clock).check(ticket, TOKENS) is None
    for junk in (None, "", "ops-secret", "tdt1.", "tdt1.!!.x.y.z.w", ticket[:-1]):
        assert tickets.check(junk, TOKENS) is None


def test_a_logout_revokes_that_ticket_only() -> None:
    tickets = LoginTickets(SECRET, 60, Clock())
    first, second = tickets.issue(OPS), tickets.issue(OPS)
    assert tickets.revoke(first, TOKENS)
    assert tickets.check(first, TOKENS) is None
    assert tickets.check(second, TOKENS) == OPS
    assert not tickets.revoke("tdt1.nonsense", TOKENS)


def test_the_logged_out_ids_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(login_tickets, "MAX_REVOKED", 3)
    clock = Clock()
    tickets = LoginTickets(SECRET, 60, clock)
    for _ in range(3):
        assert tickets.revoke(tickets.issue(OPS), TOKENS)
    other = tickets.issue(token("other", "other-secret"))
    clock.now += 1
    kept = tickets.issue(OPS)
    # Full of live ids: this logout cuts every ticket of the token issued until now.
    assert tickets.revoke(kept, TOKENS)
    assert tickets.check(kept, TOKENS) is None
    assert tickets.check(other, TOKENS) is not None
    assert len(tickets._revoked) == 3
    clock.now += 61  # the old ids expired: pruned at the next logout
    fresh = tickets.issue(OPS)
    assert tickets.check(fresh, TOKENS) == OPS
    assert tickets.revoke(fresh, TOKENS)
    assert len(tickets._revoked) == 1


async def test_logouts_are_kept_in_their_file_and_read_back(tmp_path: Path) -> None:
    clock, file = Clock(), tmp_path / "logouts.json"
    tickets = LoginTickets(SECRET, 60, clock, logouts=file)
    gone, kept = tickets.issue(OPS), tickets.issue(OPS)
    assert await tickets.log_out(gone, TOKENS)
    assert not await tickets.log_out("tdt1.nonsense", TOKENS)
    again = LoginTickets(SECRET, 60, clock, logouts=file)  # a restart
    assert again.check(gone, TOKENS) is None
    assert again.check(kept, TOKENS) == OPS
    clock.now += 61  # expired ids are not carried on
    assert LoginTickets(SECRET, 60, clock, logouts=file)._revoked == {}


def test_an_unreadable_logouts_file_refuses_every_earlier_login(tmp_path: Path) -> None:
    clock, file = Clock(), tmp_path / "logouts.json"
    earlier = LoginTickets(SECRET, 60, clock).issue(OPS)
    file.write_bytes(b"{not json")
    tickets = LoginTickets(SECRET, 60, clock, logouts=file)
    assert tickets.check(earlier, TOKENS) is None
    clock.now += 2
    assert tickets.check(tickets.issue(OPS), TOKENS) == OPS
