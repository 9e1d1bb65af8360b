"""What the outboxes (:mod:`tenure.server._net.outbox`) write to: the shapes of a connection.

Apart from the outboxes because those are compiled (the compiled build,
CONTRIBUTING.md) and these are protocols, read by people: a compiled class keeps no
docstring, and :class:`Connection` is public to the faces through
:mod:`tenure.server.plug`. ``outbox`` exports them as before.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["Connection", "Transport", "ConnectionWriter"]


class Transport(Protocol):
    """What the outboxes ask of a connection's transport (an asyncio one, or what a
    listening face writes a stream of its own through)."""

    def is_closing(self) -> bool:
        """Whether nothing more can be written."""
        ...

    def get_write_buffer_size(self) -> int:
        """Bytes written and not yet sent (the client has not read them)."""
        ...

    def abort(self) -> None:
        """Drop the connection now, discarding what is unsent."""
        ...

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """The transport's ``name`` (the outboxes ask for its ``socket``)."""
        ...


class ConnectionWriter(Protocol):
    """What the outboxes write to (an asyncio.StreamWriter, or a YDB stream's pipe)."""

    @property
    def transport(self) -> Transport:
        """Its transport."""
        ...

    def write(self, data: bytes) -> None:
        """Queue ``data`` to be sent."""
        ...

    def close(self) -> None:
        """Close once what is queued is sent."""
        ...


class Connection(Protocol):
    """What the outboxes write to: a native connection, an accepted face's, or a
    listening face's stream."""

    @property
    def writer(self) -> ConnectionWriter:
        """Where its bytes go."""
        ...

    peer: str  # the client's address, for the log
    outbox: list[bytes]  # what it is owed, written after the next commit
    closing: bool  # close once the outbox is written
