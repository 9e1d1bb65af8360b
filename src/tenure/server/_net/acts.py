"""What the native face asks of the server's own acts: ReadBackup and ReloadFiles.

An operator asks a server to act on itself (a backup read, its files reloaded:
:mod:`tenure._protocol.admin`) over the native protocol, as every other command. The
native face (:mod:`tenure.server._net.native`) hands such a request to the
:class:`ServerActs` it is given (:mod:`tenure.server._server_acts`, made where the
server is started: it reads the server's state and files, which the face's layer
does not), and tells it of each connection lost.
"""

from __future__ import annotations

from typing import Protocol

from tenure._protocol import Request
from tenure.server._net.gate import Conn

__all__ = ["ServerActs"]


class ServerActs(Protocol):
    """Answers the server's own acts for the native face."""

    def answer(self, conn: Conn, request: Request) -> None:
        """Answer ``request`` (a ReadBackup or ReloadFiles of ``conn``), now or later,
        with a Reply or a Failure in ``conn``'s outbox."""
        ...

    def forget(self, conn: Conn) -> None:
        """``conn`` is gone: give up what is kept for it (a backup being read)."""
        ...
