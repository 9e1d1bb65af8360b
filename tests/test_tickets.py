"""SessionTicket as a value (its checks, its string form, its limits), and resume's refusals
that need no particular backend."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import tenure
from tenure import SessionTicket
from tenure._core import Engine
from tenure._runtime.clock import LoopClock
from tenure._runtime.host import Host
from tenure.backends import Capability
from tenure.backends._base import MAX_TICKET_CHARS, MAX_TICKET_SECRET_BYTES
from tenure.backends.memory import CAPABILITIES, MemoryBackend
from tenure.errors import InvalidArgumentError, UnsupportedError

TICKET = SessionTicket("tenure", "app/ü", 12345678901234567890, b"\x00\xffsecret")


def test_a_ticket_round_trips_through_url_safe_ascii() -> None:
    text = TICKET.to_str()

    assert text.startswith("t1.")
    assert text.isascii()
    assert all(c.isalnum() or c in "-_." for c in text)
    assert SessionTicket.from_str(text) == TICKET
    assert SessionTicket.from_str(f"  {text}\n") == TICKET  # as read from a file


def test_the_secret_stays_out_of_the_repr() -> None:
    assert "secret" not in repr(TICKET).replace("SessionTicket", "")
    assert TICKET.secret.hex() not in repr(TICKET)
    assert "app/ü" in repr(TICKET)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("scheme", ""),
        ("scheme", "Tenure"),
        ("scheme", "a b"),
        ("node", ""),
        ("node", 7),
        ("session_id", -1),
        ("session_id", True),
        ("session_id", "1"),
        ("secret", b""),
        ("secret", "text"),
        ("secret", b"x" * (MAX_TICKET_SECRET_BYTES + 1)),
    ],
)
def test_a_ticket_checks_its_fields(field: str, value: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        dataclasses.replace(TICKET, **{field: value})


def test_the_longest_secret_fits_and_the_string_limit_is_enforced() -> None:
    longest = dataclasses.replace(TICKET, secret=b"s" * MAX_TICKET_SECRET_BYTES, node="n" * 1024)
    assert len(longest.to_str()) <= MAX_TICKET_CHARS
    assert SessionTicket.from_str(longest.to_str()) == longest
    with pytest.raises(InvalidArgumentError, match="MAX_TICKET_CHARS"):
        SessionTicket.from_str("t1." + "a" * MAX_TICKET_CHARS)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "t1.",
        "t2.dGVudXJl.1.bg.cw",  # another format version
        "t1.dGVudXJl.1.bg",  # a field short
        "t1.dGVudXJl.x1.bg.cw",  # an id that is not a number
        "t1.dGVudXJl.1.bg.c w",  # not base64url
        "t1.dGVudXJl.1.bg.",  # an empty secret
        "t1.//8.1.bg.cw",  # a scheme that is not ASCII
        "t1.dGVudXJl.1.gA.cw",  # a node that is not UTF-8
    ],
)
def test_garbage_is_not_a_ticket(text: str) -> None:
    with pytest.raises(InvalidArgumentError):
        SessionTicket.from_str(text)


def test_from_str_takes_only_a_string() -> None:
    with pytest.raises(InvalidArgumentError):
        SessionTicket.from_str(TICKET.to_str().encode())  # type: ignore[arg-type]


class _NoRecovery(MemoryBackend):
    """memory:// as a backend that cannot resume sessions would declare itself."""

    @property
    def capabilities(self) -> frozenset[Capability]:
        return CAPABILITIES - {Capability.SESSION_RECOVERY}


async def test_resume_on_a_backend_without_session_recovery_is_unsupported() -> None:
    async with tenure.Client(
        _NoRecovery(Host(Engine(), LoopClock()), owns_host=True), "x://"
    ) as client:
        await client.create_node("n")
        ticket = dataclasses.replace(TICKET, scheme="memory", node="n")
        with pytest.raises(UnsupportedError, match="SESSION_RECOVERY"):
            client.session("n", resume=ticket)
