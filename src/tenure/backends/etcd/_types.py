"""What one etcd session's parts share of its watches: each armed watch, as the session's
end sees it. (The parts are given what they call in their constructors:
:func:`~tenure.backends.etcd._store.compose`.)"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Armed"]


class Armed(Protocol):
    """An armed watch of a session (a semaphore's or a prefix's), as the session's end
    sees it: counted against max_watches_per_session, failed when the session ends."""

    def fail(self, error: BaseException) -> None:
        """The session ended: the watch's consumer hears ``error``."""
