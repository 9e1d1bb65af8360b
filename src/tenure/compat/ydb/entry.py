"""The YDB face's entry in the server's face registry (:mod:`tenure.server._faces`).

A listening face (:class:`tenure.server.plug.ListeningFace`): ``--ydb-port`` turns it
on, and it runs a gRPC server of its own there. Its settings and checks are
:mod:`.settings`'s, its counts :mod:`.metrics`'s; neither imports grpc, so the
server lists its settings without the ``ydb`` extra. The face (:mod:`.face`, which
needs the extra) is imported when the server makes it.
"""

from __future__ import annotations

from typing import Final

from tenure.compat.ydb.metrics import YdbCounts
from tenure.compat.ydb.settings import SETTINGS, check, enabled, member_address
from tenure.server.plug import FaceEntry, FaceFactory


def _face() -> FaceFactory:
    from tenure.compat.ydb.face import YdbFace

    return YdbFace.plugged


#: What the server's registry reads of the face.
ENTRY: Final = FaceEntry(
    SETTINGS,
    "ydb_port",
    _face,
    enabled=enabled,
    check=check,
    advertise=member_address,
    observer=YdbCounts,
)
