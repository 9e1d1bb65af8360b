"""The YDB face's pure parts: paths and node names, tickets and logins, the pipe's framing."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import pytest

from tenure.compat.ydb import _protos as pb
from tenure.compat.ydb.paths import Database, OutsideDatabaseError
from tenure.compat.ydb.pipe import Pipe, frame
from tenure.compat.ydb.tickets import TICKET_HEADER, Tickets, UnauthorizedError
from tenure.server._net.auth import Access, Token, Tokens
from tenure.server._net.throttle import Throttle


@pytest.mark.parametrize(
    ("path", "node"),
    [("/local/app", "app"), ("/local/team/jobs", "team/jobs"), ("app", "app"), ("a/b", "a/b")],
)
def test_a_path_inside_the_database_is_the_node_of_its_rest(path: str, node: str) -> None:
    database = Database("/local")
    assert database.node_of(path) == node
    assert database.path_of(node) == f"/local/{node}"


@pytest.mark.parametrize(
    "path", ["/other/app", "/local", "/local/", "/localapp", "", "/local/a//b", "a/", "/local/a/"]
)
def test_a_path_outside_the_database_or_with_an_empty_part_is_refused(path: str) -> None:
    with pytest.raises(OutsideDatabaseError):
        Database("/local").node_of(path)


def _tokens() -> Tokens:
    def token(name: str, secret: str, access: Access = Access.READ_WRITE) -> Token:
        return Token(name, hashlib.sha256(secret.encode()).digest(), access)

    return Tokens([token("deployer", "s3cret"), token("viewer", "look", Access.READ_ONLY)])


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_without_an_auth_file_every_call_is_anonymous_and_there_is_no_login() -> None:
    tickets = Tickets(None, b"k" * 32, 60)
    assert tickets.token_of([]) is None
    assert tickets.token_of([(TICKET_HEADER, "anything")]) is None
    with pytest.raises(UnauthorizedError, match="no auth file"):
        tickets.login("deployer", "s3cret")


def test_a_secret_is_its_token_and_a_login_ticket_is_the_named_token() -> None:
    tickets = Tickets(_tokens(), b"k" * 32, 60)
    token = tickets.token_of([("x-ydb-database", "/local"), (TICKET_HEADER, "look")])
    assert token is not None
    assert token.name == "viewer"
    ticket = tickets.login("deployer", "s3cret")
    assert "s3cret" not in ticket
    token = tickets.token_of([(TICKET_HEADER, ticket)])
    assert token is not None
    assert token.name == "deployer"


@pytest.mark.parametrize(
    ("user", "password"), [("deployer", "look"), ("nobody", "s3cret"), ("deployer", "")]
)
def test_a_login_needs_a_token_name_and_its_own_secret(user: str, password: str) -> None:
    with pytest.raises(UnauthorizedError, match="unknown user or wrong password"):
        Tickets(_tokens(), b"k" * 32, 60).login(user, password)


def test_a_call_without_a_good_ticket_is_refused() -> None:
    tickets = Tickets(_tokens(), b"k" * 32, 60)
    for metadata, why in [
        ([], "requires credentials"),
        ([(TICKET_HEADER, "")], "requires credentials"),
        ([(TICKET_HEADER, "wrong")], "unknown token"),
    ]:
        with pytest.raises(UnauthorizedError, match=why):
            tickets.token_of(metadata)


def test_a_ticket_expires_after_its_ttl_and_is_only_good_on_the_server_that_signed_it() -> None:
    clock = Clock()
    tickets = Tickets(_tokens(), b"k" * 32, 60, clock=clock)
    ticket = tickets.login("deployer", "s3cret")
    clock.now += 59
    assert tickets.token_of([(TICKET_HEADER, ticket)]) is not None
    clock.now += 1
    with pytest.raises(UnauthorizedError, match="expired"):
        tickets.token_of([(TICKET_HEADER, ticket)])
    other = Tickets(_tokens(), b"o" * 32, 60, clock=clock)  # another data directory's key
    with pytest.raises(UnauthorizedError, match="not made by this server"):
        other.token_of([(TICKET_HEADER, tickets.login("deployer", "s3cret"))])


def test_a_forged_ticket_is_refused() -> None:
    tickets = Tickets(_tokens(), b"k" * 32, 3600)
    ticket = tickets.login("viewer", "look")
    prefix, body = ticket[: ticket.index(".") + 1], ticket[ticket.index(".") + 1 :]
    name, expires, signature = body.split(".")
    forged = Tickets(_tokens(), b"k" * 32, 3600).login("deployer", "s3cret").split(".")[1]
    for bad in [
        f"{prefix}{forged}.{expires}.{signature}",  # another name, the viewer's signature
        f"{prefix}{name}.{int(expires) + 10**6}.{signature}",  # a later expiry
        f"{prefix}{name}.{expires}.",
        f"{prefix}garbage",
    ]:
        with pytest.raises(UnauthorizedError):
            tickets.token_of([(TICKET_HEADER, bad)])


def test_a_ticket_dies_with_its_token() -> None:
    key = b"k" * 32
    ticket = Tickets(_tokens(), key, 60).login("deployer", "s3cret")
    fewer = Tokens([t for t in _tokens().tokens if t.name != "deployer"])
    with pytest.raises(UnauthorizedError, match="no longer in the auth file"):
        Tickets(fewer, key, 60).token_of([(TICKET_HEADER, ticket)])


def test_a_ticket_dies_when_its_tokens_secret_changes() -> None:
    # Issue 37: the ticket was signed over the name only, so rotating a leaked
    # secret left the logins made with it good for up to --ydb-ticket-ttl.
    key = b"k" * 32
    ticket = Tickets(_tokens(), key, 60).login("deployer", "s3cret")
    rotated = Tokens(
        [
            Token("deployer", hashlib.sha256(b"n3w").digest(), Access.READ_WRITE)
            if t.name == "deployer"
            else t
            for t in _tokens().tokens
        ]
    )
    with pytest.raises(UnauthorizedError, match="secret changed"):
        Tickets(rotated, key, 60).token_of([(TICKET_HEADER, ticket)])
    # Another server with the same key and auth file (a cluster's member) takes it.
    assert Tickets(_tokens(), key, 60).token_of([(TICKET_HEADER, ticket)]) is not None


def test_good_logins_between_wrong_ones_do_not_forget_them() -> None:
    # Issue 37: a login with one's own token used to wipe the address's failures.
    tokens = _tokens()
    tokens.throttle = Throttle(3, 600.0)
    tickets = Tickets(tokens, b"k" * 32, 60)
    for guess in range(3):
        with pytest.raises(UnauthorizedError, match="wrong password"):
            tickets.login("deployer", f"guess-{guess}", peer="ipv4:10.0.0.9:5000")
        if guess < 2:
            tickets.login("viewer", "look", peer="ipv4:10.0.0.9:5001")
    with pytest.raises(UnauthorizedError, match="too many"):
        tickets.login("viewer", "look", peer="ipv4:10.0.0.9:5002")


def test_guesses_at_one_user_from_many_addresses_are_blocked_but_not_its_owner() -> None:
    # Issue 37: failures were counted per address only, so a guesser spreading its
    # guesses at one token's secret over many addresses was never blocked.
    tokens = _tokens()
    tokens.throttle = Throttle(3, 600.0, names=frozenset(tokens.names))
    tickets = Tickets(tokens, b"k" * 32, 60)
    tickets.login("deployer", "s3cret", peer="ipv4:10.0.0.1:5000")  # its owner, earlier
    for guesser in range(3):  # one guess per address: no address is blocked
        with pytest.raises(UnauthorizedError, match="wrong password"):
            tickets.login("deployer", f"guess-{guesser}", peer=f"ipv4:10.0.1.{guesser}:5000")
    with pytest.raises(UnauthorizedError, match="too many"):  # the name is: the right
        tickets.login("deployer", "s3cret", peer="ipv4:10.0.1.9:5000")  # secret too
    with pytest.raises(UnauthorizedError, match="too many"):
        tickets.login("deployer", "guess-9", peer="ipv4:10.0.1.10:5000")
    assert tickets.login("viewer", "look", peer="ipv4:10.0.1.9:5000")  # another name is not
    # Its owner's address, which logged in as it before, is still heard.
    assert tickets.login("deployer", "s3cret", peer="ipv4:10.0.0.1:5001")


class Call:
    """What a pipe writes to: the messages it was given, in order."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    async def write(self, message: bytes) -> None:
        self.written.append(message)


async def test_a_pipe_splits_the_outbox_bytes_into_messages_in_order_then_closes() -> None:
    pipe, call = Pipe(), Call()
    responses: list[Any] = [
        pb.coordination.SessionResponse(pong={"opaque": n}) for n in range(1, 4)
    ]
    pipe.write(frame(responses[0]) + frame(responses[1]))
    assert pipe.get_write_buffer_size() > 0
    assert not pipe.is_closing()
    draining = asyncio.ensure_future(pipe.drain(call))
    await asyncio.sleep(0)
    pipe.write(frame(responses[2]))
    pipe.close()
    await asyncio.wait_for(draining, 5)
    assert [pb.coordination.SessionResponse.FromString(m) for m in call.written] == responses
    assert pipe.get_write_buffer_size() == 0
    assert pipe.is_closing()
    assert pipe.get_extra_info("socket") is None


async def test_an_aborted_pipe_discards_what_is_queued() -> None:
    pipe, call = Pipe(), Call()
    pipe.write(frame(pb.coordination.SessionResponse(pong={"opaque": 1})))
    pipe.abort()
    await asyncio.wait_for(pipe.drain(call), 5)
    assert call.written == []
    assert pipe.is_closing()
