"""The faces of other lock services one server runs: made, started, stopped and counted.

:class:`FaceSet` makes each face from a plug the server lends it (whose ``attach``
routes a session's effects to that face), and sorts them by kind
(:mod:`tenure.server.plug`): the one accepted face, which the main port hands the
connections whose first byte is not a native frame's, and the listening faces. The
server runs the connections of the accepted face itself (:mod:`tenure.server._serve`);
everything else about the faces' lives is here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Protocol

from tenure.server._observe import ServerObserver
from tenure.server.plug import (
    AcceptedFace,
    Face,
    FaceFactory,
    FaceObserver,
    ListeningFace,
    Plug,
    Reloading,
)


class Lend(Protocol):
    """Makes the plug the server lends one face: its ``attach`` and its ``observer``."""

    def __call__(self, attach: Callable[[int], None], *, observer: FaceObserver | None) -> Plug:
        """The plug (see :class:`~tenure.server.plug.Plug`)."""
        ...


class FaceSet:
    """The faces made by ``makers`` (by name), each from the plug ``lend(attach,
    observer=...)`` makes, with what ``observer`` has it count its requests in;
    ``route(session_id, face)`` sends a session's effects to ``face`` from now on.

    Raises (at construction):
        ValueError: two of them are accepted faces: the main port tells only native
            clients from one other protocol, by the first byte.
    """

    def __init__(
        self,
        makers: Mapping[str, FaceFactory],
        lend: Lend,
        route: Callable[[int, Face], object],
        observer: ServerObserver | None = None,
    ) -> None:
        #: The face the main port hands its other connections to; None: none.
        self.accepted: AcceptedFace[Any] | None = None
        #: The faces with a listener of their own.
        self.listening: list[ListeningFace] = []
        self._by_name: dict[str, Face] = {}
        self._names: dict[Face, str] = {}
        self._route = route
        for name, make in makers.items():
            counts = None if observer is None else observer.face(name)
            face = make(lend(partial(self._attach, name), observer=counts))
            self._by_name[name] = face
            self._names[face] = name
            if not isinstance(face, AcceptedFace):
                self.listening.append(face)
            elif self.accepted is None:
                self.accepted = face
            else:
                raise ValueError(
                    f"faces {self.accepted.protocol!r} and {name!r} would both take the "
                    "main port's connections that are not native"
                )

    def _attach(self, name: str, session_id: int) -> None:
        self._route(session_id, self._by_name[name])

    def name_of(self, face: Face) -> str:
        """The name ``face`` was made under (its registry entry's)."""
        return self._names[face]

    def reloading(self) -> list[Reloading]:
        """The faces a reload tells of (:class:`Reloading`)."""
        return [face for face in self._by_name.values() if isinstance(face, Reloading)]

    def start(self) -> None:
        """The server listens: the accepted face starts its background work."""
        if self.accepted is not None:
            self.accepted.start()

    async def listen(self, binding: Callable[[str], None]) -> None:
        """Start the listening faces, in order; ``binding(name)`` is told of each first.

        Raises:
            OSError: a face's port cannot be bound.
        """
        for face in self.listening:
            binding(self._names[face])
            await face.start()

    def stop(self) -> None:
        """The server is stopping: every face refuses new work."""
        for face in (self.accepted, *self.listening):
            if face is not None:
                face.stop()

    async def close(self, grace: float) -> None:
        """Wait up to ``grace`` seconds for each listening face's streams to end, then
        have it stop listening."""
        for face in self.listening:
            await face.close(grace)

    def abort(self) -> None:
        """The journal failed: the listening faces drop every stream unanswered."""
        for face in self.listening:
            face.abort()

    def connections(self) -> dict[str, int]:
        """The listening faces' streams open now, by face (the accepted face's
        connections are the server's to count)."""
        return {face.protocol: face.connections() for face in self.listening}

    def ports(self) -> dict[str, int]:
        """The port of each face with one of its own, by name."""
        ports = {face.protocol: face.port for face in self.listening}
        if self.accepted is not None and self.accepted.port:
            ports[self.accepted.protocol] = self.accepted.port
        return ports
