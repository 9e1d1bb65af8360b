"""The sync face of the leader runner: ``client.lead(node, name, work)`` with a plain ``work``.

The runner's policy is the async one's (:mod:`tenure.client._leader`: its
:class:`~tenure.client._leader.Terms` open the sessions, campaign, and retry through
the portal); only ``work`` runs here, in the calling thread, inside ``with
leadership:``. Blocking code cannot be cancelled, so a loss reaches ``work`` the
way every loss reaches sync code (:mod:`tenure.sync._held`): ``leadership.lost`` is
set (a :class:`threading.Event`), ``leadership.check()`` raises the loss, and
``on_lost`` callbacks run. ``work`` must watch for it (``while not
leadership.lost.is_set(): step()``, or ``leadership.lost.wait()``): the runner
campaigns again only once ``work`` has returned, so one process never runs two.
A ``work`` that returns after its leadership was lost ran a while unprotected:
the block's end raises the loss, the term counts as lost, and the runner
campaigns again (with or without ``requeue``), as the async runner does.

Layer (CONTRIBUTING.md): this module may also import tenure.sync._objects.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from tenure import client as aio
from tenure.client import _leader
from tenure.client._args import Data
from tenure.errors import ClientClosedError, LostError
from tenure.sync._calls import opened
from tenure.sync._leases import Leadership
from tenure.sync._objects import Session
from tenure.sync._portal import Portal


class _Faces:
    """The sync Session and Leadership of each term (made on the portal thread, so
    that they hear of the async objects' end before anything else can happen)."""

    def __init__(self, portal: Portal, terms: _leader.Terms) -> None:
        self._portal = portal
        self._terms = terms
        self._session: Session | None = None

    def leadership(self, leadership: aio.Leadership) -> Leadership:
        session = self._terms.session
        assert session is not None  # a leadership came from it
        if self._session is None or self._session._session is not session:
            self._session = Session(self._portal, session)
        return self._session.keep_lease(Leadership(self._session, leadership))


def lead(
    portal: Portal,
    client: aio.Client,
    node: str,
    name: str,
    work: Callable[[Leadership], object],
    *,
    data: Data,
    requeue: bool,
    recovery_window: float | None,
    description: str,
) -> None:
    """Lead term after term, running ``work`` in this thread (see the module docstring)."""
    terms, checked_work, again = _leader.checked(
        client, node, name, work, data, requeue, recovery_window, description
    )
    faces = _Faces(portal, terms)
    try:
        while True:
            leadership = portal.call(opened, terms.next, faces.leadership)
            try:
                with leadership:
                    checked_work(leadership)
            except LostError as error:
                if not _leader.is_loss_of(leadership.lost_reason, error):
                    raise
                continue
            if not again:
                return
    finally:
        # The portal may be gone (the client closed under the runner): its close
        # closed the session already.
        with contextlib.suppress(ClientClosedError):
            portal.call(terms.aclose)
