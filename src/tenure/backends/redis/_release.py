"""A Redis session's releases: each with a request key, kept until it is answered.

The release rule is the session's (:mod:`tenure.backends._session`: sent until it
is answered). Here, each release carries a request key, so that one sent again
after its answer was lost is answered as the first try was, never applied twice:
the key is kept, by (name, hold), while the release is unanswered (the store's
connection could not say whether it arrived), and dropped once it is answered or
refused. :meth:`KeyedReleases.send_now` sends one in the caller's turn of the loop
(the store is an :class:`~tenure.backends._store.EagerRelease`): every call of the
client goes over one pipelined connection, so the release reaches Redis before
anything asked after it; :meth:`KeyedReleases.send` is the slow way the session
takes otherwise, and for every retry.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any, Protocol

from tenure.backends._store import SessionLosses, SessionView
from tenure.backends.redis._conn import FunctionReply, RedisFunctions
from tenure.errors import LostError, UnavailableError

__all__ = ["KeyMaker", "KeyedReleases", "KeyedReleasesHome"]


class KeyMaker(Protocol):
    """What makes the request keys of a session's calls (the client's shared part)."""

    def request_key(self) -> str:
        """A request key unique across clients (the answers kept for retries)."""


class ReleasingSession(SessionView, SessionLosses, Protocol):
    """The session whose releases these are: whether it lives, and to be told it was
    lost (a release that finds it gone)."""


class KeyedReleasesHome(Protocol):
    """What releases ask of their home, the session's store (a
    :class:`~tenure.backends.redis._store.RedisStore`)."""

    @property
    def session(self) -> ReleasingSession:
        """The session."""

    @property
    def backend(self) -> KeyMaker:
        """The client's shared part."""

    @property
    def conn(self) -> RedisFunctions:
        """The connection to Redis."""

    base: str
    sid_text: str
    fence: str

    async def invoke(self, op: str, key: str, *args: str | bytes | int) -> Any:
        """Call function ``op`` for the session (sent again until its deadline)."""

    def heard(self, reply: FunctionReply) -> None:
        """A call of the session was answered (its pushes taken)."""


class KeyedReleases:
    """The releases of one Redis session (module docstring)."""

    __slots__ = ("_keys", "_store")

    def __init__(self, store: KeyedReleasesHome) -> None:
        self._store = store
        #: The request key of each release sent and not answered yet, by (name, hold).
        self._keys: dict[tuple[str, int], str] = {}

    async def send(self, name: str, hold: int) -> bool:
        """Release hold ``hold`` of ``name``, with the key of an unanswered try if any;
        whether it released something."""
        place = (name, hold)
        key = self._keys.get(place)
        if key is None:  # kept while unanswered: a retry of the release is known by it
            key = self._keys[place] = self._store.backend.request_key()
        try:
            released = await self._store.invoke("release", key, name, hold)
        except UnavailableError:
            raise  # sent again, with the same key
        except BaseException:
            self._keys.pop(place, None)
            raise
        self._keys.pop(place, None)
        return bool(released)

    def send_now(self, name: str, hold: int) -> asyncio.Future[bool] | None:
        """The release sent now, in the caller's turn of the loop (module docstring);
        its answer's future. None if it cannot be sent now: the session then sends it
        from a task (:meth:`send`), with this key if this one went out unanswered."""
        store = self._store
        if store.session.ended is not None:
            return None
        key = store.backend.request_key()
        args = (store.sid_text, store.fence, key, name, hold)
        reply = store.conn.call_now("release", store.base, *args)
        if reply is None:
            return None
        place = (name, hold)
        self._keys[place] = key
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        reply.add_done_callback(partial(self._released, place, answer))
        return answer

    def _released(
        self,
        place: tuple[str, int],
        answer: asyncio.Future[bool],
        reply: asyncio.Future[FunctionReply],
    ) -> None:
        """The answer to :meth:`send_now`'s release, taken as the store takes any."""
        if reply.cancelled():
            answer.cancel()
            return
        error = reply.exception()
        if error is None:
            self._keys.pop(place, None)
            result = reply.result()
            self._store.heard(result)
            if not answer.done():
                answer.set_result(bool(result.result))
            return
        if not isinstance(error, UnavailableError):
            self._keys.pop(place, None)
        if isinstance(error, LostError):
            self._store.session.lose(error)
        if not answer.done():
            answer.set_exception(error)
