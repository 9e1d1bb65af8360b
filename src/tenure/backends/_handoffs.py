"""Hand-offs: what another session needs to adopt a hold (``session.adopt``).

A :class:`Handoff` names the kind of backend, the node, the semaphore, the offering
session's hold (its session id, hold number and fencing token when offered) and
carries the offer's secret: random bytes made by the offering client, of which the
store keeps only what proves them (the engine a SHA-256 digest). Whoever has the
string can take the hold, once: it is a capability, to be passed as a secret is
(docs/recipes.md, "Handing a lease to another process"). Part of the backend
contract (re-exported by :mod:`tenure.backends`).
"""

from __future__ import annotations

import binascii
import re
from dataclasses import dataclass, field
from typing import Final

from tenure.backends._tickets import b64_bytes, b64_text
from tenure.errors import InvalidArgumentError

__all__ = ["HANDOFF_PREFIX", "MAX_HANDOFF_CHARS", "Handoff", "check_handoff"]

#: What every hand-off string starts with: the format's version.
HANDOFF_PREFIX: Final = "h1."
#: Longest hand-off string :meth:`Handoff.from_str` reads.
MAX_HANDOFF_CHARS: Final = 8192
#: The secret's length, in bytes, as made by the offering client (128 random bits);
#: a string whose secret is not 16 to 64 bytes is not a hand-off.
SECRET_BYTES: Final = 16
_MAX_SECRET_BYTES: Final = 64
_SCHEME: Final = re.compile(r"[a-z][a-z0-9+.-]{0,31}")
_NUMBER: Final = re.compile(r"[0-9]{1,20}")


@dataclass(frozen=True, slots=True)
class Handoff:
    """A hold offered for adoption (module docstring).

    ``scheme`` is the kind of backend (``memory``, ``tenure``...), ``node`` and
    ``name`` where the hold is, ``holder`` the offering session's id, ``holder_hold``
    its hold number, ``token`` the hold's fencing token when it was offered, and
    ``secret`` what adopts it (left out of ``repr``).
    """

    scheme: str
    node: str
    name: str
    holder: int
    holder_hold: int
    token: int
    secret: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.scheme, str) or not _SCHEME.fullmatch(self.scheme):
            raise InvalidArgumentError(f"a hand-off's scheme is not a URL scheme: {self.scheme!r}")
        for what in ("node", "name"):
            value = getattr(self, what)
            if not isinstance(value, str) or not value:
                raise InvalidArgumentError(f"a hand-off's {what} must be a non-empty string")
        for what in ("holder", "holder_hold", "token"):
            value = getattr(self, what)
            if type(value) is not int or not 0 <= value < 2**64:
                raise InvalidArgumentError(f"a hand-off's {what} must be an int in [0, 2**64)")
        if (
            not isinstance(self.secret, bytes)
            or not SECRET_BYTES <= len(self.secret) <= _MAX_SECRET_BYTES
        ):
            raise InvalidArgumentError(
                f"a hand-off's secret must be {SECRET_BYTES} to {_MAX_SECRET_BYTES} bytes"
            )

    def to_str(self) -> str:
        """The hand-off as URL-safe ASCII: ``h1.`` and dot-separated fields (base64url
        for the text and the secret)."""
        fields = (
            b64_text(self.scheme.encode("ascii")),
            b64_text(self.node.encode("utf-8", "surrogatepass")),
            b64_text(self.name.encode("utf-8", "surrogatepass")),
            str(self.holder),
            str(self.holder_hold),
            str(self.token),
            b64_text(self.secret),
        )
        return HANDOFF_PREFIX + ".".join(fields)

    @classmethod
    def from_str(cls, text: object) -> Handoff:
        """Read a string :meth:`to_str` wrote; InvalidArgumentError if it is not one."""
        if not isinstance(text, str):
            raise InvalidArgumentError(f"a hand-off is a string, got {type(text).__name__}")
        text = text.strip()
        if len(text) > MAX_HANDOFF_CHARS:
            raise InvalidArgumentError(
                f"a hand-off is at most {MAX_HANDOFF_CHARS} characters, got {len(text)}"
            )
        parts = text.removeprefix(HANDOFF_PREFIX).split(".")
        if not text.startswith(HANDOFF_PREFIX) or len(parts) != 7:
            raise InvalidArgumentError(
                "not a hand-off string (expected what lease.handoff() returns: "
                f"{HANDOFF_PREFIX}<scheme>.<node>.<name>.<holder>.<hold>.<token>.<secret>)"
            )
        scheme, node, name, holder, hold, token, secret = parts
        for what, number in (("holder", holder), ("hold", hold), ("token", token)):
            if not _NUMBER.fullmatch(number):
                raise InvalidArgumentError(f"a hand-off's {what} is not a number: {number[:40]!r}")
        try:
            return cls(
                b64_bytes(scheme).decode("ascii"),
                b64_bytes(node).decode("utf-8", "surrogatepass"),
                b64_bytes(name).decode("utf-8", "surrogatepass"),
                int(holder),
                int(hold),
                int(token),
                b64_bytes(secret),
            )
        except (ValueError, binascii.Error) as error:  # UnicodeDecodeError is a ValueError
            raise InvalidArgumentError(f"a hand-off's field is malformed: {error}") from None


def check_handoff(handoff: Handoff, scheme: str, node: str) -> None:
    """Refuse a hand-off of another kind of backend, or of another node
    (InvalidArgumentError): a session adopts only in its own node."""
    if handoff.scheme != scheme:
        raise InvalidArgumentError(
            f"the hand-off is of a {handoff.scheme}:// hold; this is a {scheme}:// session"
        )
    if handoff.node != node:
        raise InvalidArgumentError(
            f"the hand-off is of a hold in node {handoff.node!r}; this session is of {node!r}"
        )
