"""What a tooz URL says to the driver, and how tooz's ids become tenure's names.

``tenure://host:6388?node=cinder&timeout=30`` (``tenures://`` for TLS; several
``host:port`` separated by commas for a cluster or a list of servers). The driver
takes ``node``, ``timeout`` and ``max_members``; every other option is the
``tenure://`` URL's own (``token``, ``ca``, ``cert``, ``key``, ``connect_timeout``...)
and goes to :func:`tenure.connect`. An option neither knows is refused: a typo
must not pass silently.

tooz's ids (group ids, member ids, lock names) are bytes, or str at run time. A
tenure name is text with no control characters, so an id is written as
percent-encoding of its bytes that leaves printable ASCII as it is (but ``%`` and
space): ``b"cinder-volume"`` is ``cinder-volume``, ``b"h\\xc3\\xa9"`` is ``h%C3%A9``.
It reads back to the same bytes, whatever they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, unquote_to_bytes, urlencode

import tooz
from tooz import utils

from tenure.backends import shown_url

__all__ = [
    "DEFAULT_MAX_MEMBERS",
    "DEFAULT_NODE",
    "DEFAULT_TIMEOUT",
    "GROUPS",
    "LEADERS",
    "LOCKS",
    "ToozSettings",
    "as_id",
    "decode_capabilities",
    "encode_capabilities",
    "id_of",
    "name_of",
]

#: The node a URL without ``?node=`` uses.
DEFAULT_NODE: Final = "tooz"
#: Seconds a member lives past its last heartbeat when the URL has no ``?timeout=``
#: (tooz's Redis and memcached drivers' default too).
DEFAULT_TIMEOUT: Final = 30.0
#: The most members of a group the driver makes, when the URL has no ``?max_members=``.
DEFAULT_MAX_MEMBERS: Final = 1000

#: Where each kind of tooz object lives in the node.
GROUPS: Final = "tooz/group/"
LEADERS: Final = "tooz/leader/"
LOCKS: Final = "tooz/lock/"

#: Options of the driver itself (the rest are the tenure:// URL's).
_OWN: Final = frozenset({"node", "timeout", "max_members"})
#: Options of tenure:// URLs (tenure.backends.remote), passed through.
_TENURE: Final = frozenset(
    {
        "token",
        "ca",
        "cert",
        "key",
        "server_hostname",
        "connect_timeout",
        "request_timeout",
        "client_name",
        "sharded",
        "withdraw_wait",
        "close_wait",
        "max_staleness",
    }
)
#: Printable ASCII but ``%`` (the escape) and space: kept as they are in names.
_KEPT: Final = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")


@dataclass(frozen=True, slots=True)
class ToozSettings:
    """A tooz URL, read: where to connect, which node, a member's window, a group's size."""

    #: The ``tenure://`` URL to connect to (its own options only).
    url: str
    node: str
    #: Seconds a member (and all it holds) lives past its last heartbeat; also the
    #: recovery window of its sessions (how long a dropped connection is waited for).
    timeout: float
    #: The limit of the groups this driver makes (``GroupMember``'s ``max_members``).
    max_members: int

    def __repr__(self) -> str:
        # (tooz and its users log their drivers' settings: the URL's token masked.)
        return (
            f"ToozSettings(url={shown_url(self.url)}, node={self.node!r}, "
            f"timeout={self.timeout!r}, max_members={self.max_members!r})"
        )

    @classmethod
    def of(cls, parsed_url: Any, options: dict[str, Any]) -> ToozSettings:
        """Read tooz's parsed URL and its options (the query, collapsed to one value
        each, with the caller's keyword arguments over it); ToozError naming a bad one."""
        unknown = sorted(set(options) - _OWN - _TENURE)
        if unknown:
            raise tooz.ToozError(
                f"unknown option(s) {', '.join(unknown)} in the tenure tooz URL "
                f"(the driver's: {', '.join(sorted(_OWN))}; tenure://'s: "
                f"{', '.join(sorted(_TENURE))})"
            )
        if not parsed_url.netloc:
            raise tooz.ToozError("a tenure tooz URL names its server(s): tenure://host:port")
        own = {key: str(value) for key, value in options.items() if key in _OWN}
        passed = {key: str(value) for key, value in options.items() if key in _TENURE}
        query = f"?{urlencode(sorted(passed.items()))}" if passed else ""
        return cls(
            url=f"{parsed_url.scheme}://{parsed_url.netloc}{query}",
            node=own.get("node", DEFAULT_NODE),
            timeout=_number("timeout", own.get("timeout"), DEFAULT_TIMEOUT),
            max_members=int(_number("max_members", own.get("max_members"), DEFAULT_MAX_MEMBERS)),
        )


def _number(option: str, given: str | None, default: float) -> float:
    if given is None:
        return default
    try:
        value = float(given)
    except ValueError:
        raise tooz.ToozError(f"option {option} must be a number, got {given!r}") from None
    if not 0 < value < float("inf") or (option == "max_members" and value != int(value)):
        raise tooz.ToozError(f"option {option} must be a positive number, got {given!r}")
    return value


def as_id(value: bytes | str) -> bytes:
    """A tooz id as bytes (a str one in UTF-8, as tooz's Redis driver encodes it)."""
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def name_of(value: bytes | str) -> str:
    """A tooz id (bytes, or str) as tenure text (module docstring)."""
    return quote(as_id(value), safe=_KEPT)


def id_of(name: str) -> bytes:
    """The tooz id (bytes) :func:`name_of` wrote as ``name``."""
    return unquote_to_bytes(name)


def encode_capabilities(capabilities: Any) -> bytes:
    """A member's capabilities as its data: tooz's own msgpack (``b""`` for None)."""
    return b"" if capabilities is None else utils.dumps(capabilities)


def decode_capabilities(data: bytes) -> Any:
    """What :func:`encode_capabilities` wrote (data that is not msgpack: ToozError)."""
    return None if not data else utils.loads(data)
