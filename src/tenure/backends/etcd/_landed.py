"""Whether a put of a semaphore's record made by this call reached etcd: its history says.

The etcd client sends a Txn again when its answer was lost (:mod:`tenure._etcd.client`),
and a Txn applied the first time fails its compare the second. So a call whose Txn
failed its compare cannot tell from the answer whether its put was applied, and
neither "it was not" (a swap answered False, an update put again, after another
client's change, undoing it) nor "it was" would be true every time.

Every put of a record (create, update, swap, a rate limiter's reservation) carries a
random id of its call (``w``, :func:`put_id`). A put whose Txn compared the record's
mod_revision read at revision ``after`` can only be the first change of the record
after it; a create, the first version of the record. :func:`landed` reads the
record's versions back from now (a Range at each earlier revision) to the first one
after ``after``, and says whether it is that put. A history compacted meanwhile, or
more than :data:`MAX_VERSIONS` changes since, leave it unknown: UnavailableError.
"""

from __future__ import annotations

import secrets
from typing import Any, Final

from aetcd.rpc import rpc_pb2

from tenure._etcd.client import EtcdClient
from tenure.backends.etcd._keys import decode
from tenure.errors import UnavailableError

__all__ = ["MAX_VERSIONS", "landed", "put_id"]

#: Versions of a record read back at most to find the first after a revision.
MAX_VERSIONS: Final = 64


def put_id() -> str:
    """A new id of one call's put (the ``w`` of the record's value)."""
    return secrets.token_hex(8)


def _writer(kv: Any) -> str:
    try:
        writer = decode(kv.value).get("w", "")
    except (TypeError, ValueError):
        return ""
    return writer if isinstance(writer, str) else ""


async def landed(conn: EtcdClient, key: bytes, put: str, after: int) -> bool:
    """Whether the first version of record ``key`` after revision ``after`` is the put
    ``put`` (module docstring); UnavailableError when its history cannot tell."""
    revision, first = 0, None  # 0: the version of now
    for _ in range(MAX_VERSIONS):
        reply = await conn.range(rpc_pb2.RangeRequest(key=key, revision=revision))
        if not reply.kvs:
            break  # none then (deleted): the versions after are another record's
        kv = reply.kvs[0]
        if int(kv.mod_revision) <= after:
            break
        first, revision = kv, int(kv.mod_revision) - 1
    else:
        raise UnavailableError(
            f"{key!r} changed more than {MAX_VERSIONS} times since this call read it: "
            "whether its change was applied is unknown"
        )
    return first is not None and _writer(first) == put
