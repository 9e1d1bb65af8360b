"""``SessionFactory``: :meth:`~tenure.backends._base.Backend.open_session` as every backend
of ours keeps it, its checks written once.

A closed client refuses (ClientClosedError); a ticket must be one of this backend's
scheme, of the node asked (:func:`~tenure.backends._tickets.check_ticket`); then the
backend either opens a session (:meth:`SessionFactory.create_session`, given what was
asked as a :class:`NewSession`) or takes the ticket's back
(:meth:`SessionFactory.resume_session`), each in its own way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from tenure._core.values import NO_IDENTITY, ClientIdentity
from tenure.backends._grants import SessionListener
from tenure.backends._session import StoreSession
from tenure.backends._tickets import SessionTicket, check_ticket
from tenure.errors import ClientClosedError

__all__ = ["NewSession", "SessionFactory"]


@dataclass(frozen=True, slots=True)
class NewSession:
    """What ``open_session`` was asked for a new session: its ``node``, its recovery
    window (``timeout``; None: the node's), ``description`` and ``identity``, as the
    caller gave them (each backend checks them where it checks them)."""

    node: str
    timeout: float | None
    description: str
    identity: ClientIdentity


class SessionFactory(ABC):
    """The ``open_session`` of a backend: the checks, then the backend's own opening."""

    #: The scheme of this backend's session tickets (``memory``, ``tenure``...).
    scheme: ClassVar[str]
    #: Whether the client has been closed (``aclose``): no session opens then.
    _closed: bool

    async def open_session(
        self,
        node: str,
        *,
        timeout: float | None,
        description: str,
        listener: SessionListener,
        resume: SessionTicket | None = None,
        identity: ClientIdentity = NO_IDENTITY,
    ) -> StoreSession:
        """See :meth:`tenure.backends._base.Backend.open_session`."""
        if self._closed:
            raise ClientClosedError("the client is closed")
        if resume is not None:
            check_ticket(resume, self.scheme, node)
            return await self.resume_session(node, resume, listener)
        return await self.create_session(NewSession(node, timeout, description, identity), listener)

    @abstractmethod
    async def create_session(self, asked: NewSession, listener: SessionListener) -> StoreSession:
        """Open the session ``asked`` for, told to ``listener``."""

    @abstractmethod
    async def resume_session(
        self, node: str, ticket: SessionTicket, listener: SessionListener
    ) -> StoreSession:
        """Take back the live session ``ticket`` names (checked: its scheme and
        ``node`` are this backend's), its news told to ``listener`` from now on."""
