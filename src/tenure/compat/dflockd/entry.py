"""The dflockd face's entry in the server's face registry (:mod:`tenure.server._faces`).

An accepted face (:class:`tenure.server.plug.AcceptedFace`): the main port tells
dflockd's clients from native ones by their first byte, so it always runs, and
``--dflockd-port`` adds a port of its own. In a cluster, every member other than the
leader that serves its nodes relays its connections there (``relayed``). Its
settings are :mod:`.settings`'s, its counts :mod:`.metrics`'s; the face (:mod:`.face`)
is imported when the server makes it.
"""

from __future__ import annotations

from typing import Final

from tenure.compat.dflockd.holds import LOCK_NODE, SEMAPHORE_NODE
from tenure.compat.dflockd.metrics import DflockdCounts
from tenure.compat.dflockd.settings import SETTINGS, member_address
from tenure.server.plug import FaceEntry, FaceFactory


def _face() -> FaceFactory:
    from tenure.compat.dflockd.face import DflockdFace

    return DflockdFace.plugged


#: What the server's registry reads of the face.
ENTRY: Final = FaceEntry(
    SETTINGS,
    "dflockd_port",
    _face,
    accepted=True,
    advertise=member_address,
    observer=DflockdCounts,
    nodes=(LOCK_NODE, SEMAPHORE_NODE),
    relayed=True,
)
