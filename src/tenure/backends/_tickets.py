"""Session tickets: what a later process needs to take a live session back (``resume=``).

A ticket names the kind of backend, the node and the session, and carries the
backend's own proof of ownership; :meth:`SessionTicket.to_str` writes it as URL-safe
ASCII and :meth:`SessionTicket.from_str` reads it back. Part of the backend contract
(re-exported by :mod:`tenure.backends._base` and :mod:`tenure.backends`).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from typing import Final

from tenure.errors import InvalidArgumentError

__all__ = [
    "MAX_TICKET_CHARS",
    "MAX_TICKET_SECRET_BYTES",
    "TICKET_PREFIX",
    "SessionTicket",
    "b64_bytes",
    "b64_text",
    "check_ticket",
]

#: Longest ticket string :meth:`SessionTicket.from_str` reads (a node name of 1 KiB
#: and a secret of 1 KiB fit well within it).
MAX_TICKET_CHARS: Final = 8192
#: Longest secret a ticket carries, in bytes.
MAX_TICKET_SECRET_BYTES: Final = 1024
#: What every ticket string starts with: the format's version.
TICKET_PREFIX: Final = "t1."
_SCHEME: Final = re.compile(r"[a-z][a-z0-9+.-]{0,31}")


@dataclass(frozen=True, slots=True)
class SessionTicket:
    """What a later process needs to take a live session back (``resume=``).

    ``scheme`` names the kind of backend that made it (``memory``, ``tenure``,
    ``etcd``...; TLS or not is the URL's business, not the ticket's), ``node`` the
    session's node, ``session_id`` the backend's id of the session. ``secret`` is
    the backend's own proof of ownership (a protection key, a lease's secret...),
    opaque to the client: whoever has the ticket can take the session, and
    everything it holds, away from its owner, so keep it as you would a password
    (it is left out of ``repr``).

    :meth:`to_str` writes it as URL-safe ASCII (for a file, an environment
    variable, a command line); :meth:`from_str` reads it back.
    """

    scheme: str
    node: str
    session_id: int
    secret: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.scheme, str) or not _SCHEME.fullmatch(self.scheme):
            raise InvalidArgumentError(
                f"a ticket's scheme must be a lower-case URL scheme, got {self.scheme!r}"
            )
        if not isinstance(self.node, str) or not self.node:
            raise InvalidArgumentError(
                f"a ticket's node must be a non-empty string, got {self.node!r}"
            )
        if type(self.session_id) is not int or self.session_id < 0:
            raise InvalidArgumentError(
                f"a ticket's session_id must be a non-negative int, got {self.session_id!r}"
            )
        if (
            not isinstance(self.secret, bytes)
            or not 0 < len(self.secret) <= MAX_TICKET_SECRET_BYTES
        ):
            raise InvalidArgumentError(
                f"a ticket's secret must be 1 to {MAX_TICKET_SECRET_BYTES} bytes "
                f"(MAX_TICKET_SECRET_BYTES)"
            )

    def to_str(self) -> str:
        """The ticket as URL-safe ASCII (``t1.`` and dot-separated base64url fields)."""
        fields = (
            b64_text(self.scheme.encode("ascii")),
            str(self.session_id),
            b64_text(self.node.encode("utf-8", "surrogatepass")),
            b64_text(self.secret),
        )
        return TICKET_PREFIX + ".".join(fields)

    @classmethod
    def from_str(cls, text: str) -> SessionTicket:
        """Read a ticket written by :meth:`to_str`; InvalidArgumentError if it is not one."""
        if not isinstance(text, str):
            raise InvalidArgumentError(f"a session ticket is a string, got {type(text).__name__}")
        if len(text) > MAX_TICKET_CHARS:
            raise InvalidArgumentError(
                f"a session ticket is at most {MAX_TICKET_CHARS} characters (MAX_TICKET_CHARS), "
                f"got {len(text)}"
            )
        parts = text.strip().removeprefix(TICKET_PREFIX).split(".")
        if not text.strip().startswith(TICKET_PREFIX) or len(parts) != 4:
            raise InvalidArgumentError(
                "not a session ticket (expected what SessionTicket.to_str() writes: "
                f"{TICKET_PREFIX}<scheme>.<id>.<node>.<secret>)"
            )
        scheme, session_id, node, secret = parts
        if not session_id.isascii() or not session_id.isdigit() or len(session_id) > 20:
            raise InvalidArgumentError(f"a session ticket's id is not a number: {session_id!r}")
        try:
            return cls(
                b64_bytes(scheme).decode("ascii"),
                b64_bytes(node).decode("utf-8", "surrogatepass"),
                int(session_id),
                b64_bytes(secret),
            )
        except (ValueError, binascii.Error) as error:  # UnicodeDecodeError is a ValueError
            raise InvalidArgumentError(f"a session ticket's field is malformed: {error}") from None


def check_ticket(ticket: SessionTicket, scheme: str, node: str) -> None:
    """Refuse a ticket of another kind of backend, or of another node (InvalidArgumentError).

    What every backend's ``open_session(..., resume=ticket)`` checks first.
    """
    if not isinstance(ticket, SessionTicket):
        raise InvalidArgumentError(f"resume must be a SessionTicket, got {type(ticket).__name__}")
    if ticket.scheme != scheme:
        raise InvalidArgumentError(
            f"the ticket is of a {ticket.scheme}:// session; this is a {scheme}:// backend"
        )
    if ticket.node != node:
        raise InvalidArgumentError(
            f"the ticket is of a session of node {ticket.node!r}, not of {node!r}"
        )


def b64_text(raw: bytes) -> str:
    """``raw`` as unpadded base64url: a field of a ticket's or a hand-off's string."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def b64_bytes(text: str) -> bytes:
    """The bytes of a field :func:`b64_text` wrote.

    Raises:
        ValueError: ``text`` is not unpadded base64url (or empty).
    """
    if not text or not text.isascii() or not re.fullmatch(r"[A-Za-z0-9_-]*", text):
        raise ValueError(f"{text[:40]!r} is not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
