"""Which process this is, as ``os.fork`` leaves it: a child never uses its parent's client.

A child made by ``fork`` inherits its parent's clients as memory: their sockets (the
same connections, shared with the parent), their sessions, their event loops (an
asyncio loop that does not run in the child; a sync client's loop thread, which did
not survive the fork). Were the child to use them, its requests would go out on the
parent's connections and its replies be read by whichever process reads first, and a
close in the child would end the parent's sessions.

So each client, session and sync portal remembers the process that opened it
(:data:`pid` then), and every call compares: in another process it raises
:class:`~tenure.errors.ForkedClientError` before anything is sent, and an inherited
session ends in the child alone (nothing sent; the parent keeps it). A
``tenure.sync.Client`` goes further (it has a loop thread of its own to replace): its
own calls in the child open the child's connection, on a new portal, and go on. :data:`pid` is
kept current by ``os.register_at_fork``, so the check is an attribute read, not a
``getpid()`` call. The process's defaults (the default clients, the shared
``memory://NAME`` portals, the sync face's shared clients) forget the parent's in the
child's fork handlers (:func:`after_fork_in_child`), so the child's next use opens its
own.

This module is the one fork rule of the library: every other module (the sync face's
shared clients, the integrations through them) asks it, never ``os.getpid()`` or
``os.register_at_fork`` itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from tenure.errors import ForkedClientError

__all__ = ["after_fork_in_child", "forked_error", "pid"]

#: This process's id, set again in each child ``os.fork`` makes.
pid: int = os.getpid()


def forked_error(what: str, opened_by: int) -> ForkedClientError:
    """The error a use of ``what`` (opened by process ``opened_by``) raises in a child."""
    return ForkedClientError(
        f"{what} was opened by process {opened_by}, before this process (pid {pid}) was "
        "forked from it: a child never uses its parent's connections or sessions. Open a "
        "new client in the child (tenure.connect, tenure.sync.connect), or use the default "
        "client (tenure.default_client(), tenure.sync.default_client()), which each "
        "process opens for itself; a tenure.sync.Client's own calls open the child's "
        "connection: open new sessions from it"
    )


def after_fork_in_child(forget: Callable[[], None]) -> None:
    """Call ``forget()`` in each child made by ``os.fork``, before it runs anything else.

    For state a module keeps for the whole process (its defaults, its registries and
    their locks): a lock some other thread of the parent held at the fork stays held
    for good in the child, so ``forget`` replaces it rather than taking it.
    """
    os.register_at_fork(after_in_child=forget)


def _in_child() -> None:
    global pid
    pid = os.getpid()


os.register_at_fork(after_in_child=_in_child)
