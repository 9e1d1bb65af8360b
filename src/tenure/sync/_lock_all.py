"""The sync all-or-none locks: ``with session.lock_all(["acct/1", "acct/7"]) as held:``."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from tenure import client as aio
from tenure.errors import PreconditionFailedError
from tenure.sync._held import Held, end_block
from tenure.sync._leases import LeaseSession, Lock


class HeldLocks(Held):
    """The mutexes of several names, taken together (see :class:`tenure.HeldLocks`).

    ``tokens[name]`` is each one's fencing token, ``locks[name]`` its sync
    :class:`Lock`. ``with held:`` releases them all at the end, raising the loss
    error if any was lost while the block ran (which ends them all).
    """

    def __init__(
        self, session: LeaseSession, held: aio.HeldLocks, locks: Mapping[str, Lock]
    ) -> None:
        super().__init__(session.portal, held.lost)
        self._held = held
        #: The session that holds them (a :class:`tenure.sync.Session`).
        self.session = session
        #: Each name's lock, in the order the names were asked for.
        self.locks: Mapping[str, Lock] = MappingProxyType(dict(locks))
        #: Each name's fencing token.
        self.tokens: Mapping[str, int] = held.tokens

    def __repr__(self) -> str:
        return f"<sync {self._held!r}>"

    @property
    def held(self) -> bool:
        """Whether every one is still held."""
        return not self.ended

    def release(self) -> None:
        """Release every one (idempotent); returns once the backend applied them.

        After leaving ``with``, whose releases are under way, it waits for them.
        """
        # Ended, each may still have a release under way: the async release waits.
        if self.ended and self._portal.closed:
            return  # the client closed: every release ended with it
        self._portal.call(self._held.release)

    def _check_enter(self) -> None:
        if self.ended and self.lost_reason is None:
            raise PreconditionFailedError(f"{self!r} was released; lock them again")

    def _finish(self) -> None:
        if not self.ended:
            self._portal.call(end_block, self._held)
