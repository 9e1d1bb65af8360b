"""The dflockd face's housekeeping: its nodes, keys, limits, recovery, stats.

* At start-up the two nodes are made (or given the dflockd limits), and the engine
  sessions an earlier run left are dealt with: closed, as their connections are
  gone, or, with auto-release off, kept with their leases running (their tokens
  still work, since the token secret is in the data directory).
* ``admit`` applies ``--dflockd-max-locks`` and ``--dflockd-max-locks-per-token``
  (keys count until the collector forgets them, against the token that registered
  them too) and the semaphore limit fixed by a key's first caller.
* The collector runs every ``--dflockd-gc-interval`` seconds and forgets keys idle
  for longer than ``--dflockd-gc-max-idle`` (deleting an idle dflockd semaphore, so
  that a later caller may choose another limit).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING

from tenure._core import (
    AlterNode,
    AttachSession,
    CloseSession,
    CreateNode,
    CreateSession,
    DeleteSemaphore,
    NodeConfig,
)
from tenure._core.node import Node
from tenure.compat.dflockd import codec as wire
from tenure.compat.dflockd.holds import (
    LOCK_NODE,
    SEMAPHORE_NODE,
    SESSION_DESCRIPTION,
    Hold,
    Registry,
    node_of,
)
from tenure.errors import TenureError
from tenure.server.plug import HostCalls

if TYPE_CHECKING:
    from tenure.compat.dflockd.settings import DflockdSettings

log = logging.getLogger("tenure.server")

#: Room the dflockd nodes get: every hold is a session, every key a semaphore.
NODE_ROOM = {"max_sessions": 1_000_000, "max_semaphores": 1_000_000}
NO_WAITER_LIMIT = 1_000_000
#: The description of the face's own session in each node (deletes idle semaphores);
#: the value is in every data directory's state: it never changes.
SERVICE_DESCRIPTION = "dflockd service"


def session_key(secret: bytes) -> bytes:
    """The protection key of the face's engine sessions (stable across restarts)."""
    return hmac.new(secret, b"dflockd sessions", hashlib.sha256).digest()[:16]


class Keeper:
    """See the module docstring."""

    def __init__(
        self,
        host: HostCalls,
        settings: DflockdSettings,
        holds: Registry,
        *,
        key: bytes,
        attach: Callable[[int], None],
        forget: Callable[[int], None],
    ) -> None:
        self.host = host
        self.settings = settings
        self.holds = holds
        self.key = key
        self._attach = attach
        self._forget = forget
        self._loop = asyncio.get_running_loop()
        self._admin: dict[str, int] = {}  # node -> the face's own session there
        self._timer: asyncio.TimerHandle | None = None

    # -- start and stop -----------------------------------------------------------------

    def start(self) -> None:
        """Settle what an earlier run left; the nodes are made when a client comes."""
        if LOCK_NODE in self.host.engine.nodes or SEMAPHORE_NODE in self.host.engine.nodes:
            self.ready()
            self._recover()

    def ready(self) -> None:
        """Make the nodes (with the dflockd limits) and start the collector, once."""
        if self._admin:
            return
        waiters = self.settings.max_waiters or NO_WAITER_LIMIT
        for name in (LOCK_NODE, SEMAPHORE_NODE):
            room = {**NODE_ROOM, "max_waiters": waiters}
            if name in self.host.engine.nodes:
                self.host.execute(AlterNode(name, room))
            else:
                self.host.execute(CreateNode(name, NodeConfig().replace(**room)))
            info = self.host.execute(CreateSession(name, self.key, None, SERVICE_DESCRIPTION))
            self._admin[name] = info.session_id
            self._attach(info.session_id)
        self._schedule()

    def stop(self) -> None:
        """Stop the collector."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _recover(self) -> None:
        engine = self.host.engine
        now = self._loop.time()
        for session in list(engine.sessions.values()):
            if session.node not in (LOCK_NODE, SEMAPHORE_NODE):
                continue
            if session.session_id in self._admin.values():
                continue  # made by ready() just now
            if session.description != SESSION_DESCRIPTION or self.settings.auto_release:
                if session.description in (SESSION_DESCRIPTION, SERVICE_DESCRIPTION):
                    self._close(session.session_id)
                continue
            node = engine.nodes[session.node]
            kept = self._kept_hold(node, session.session_id, session.held)
            if kept is None:
                self._close(session.session_id)
                continue
            self.host.execute(AttachSession(session.session_id, self.key, session.seq_no + 1))
            self._attach(session.session_id)
            self.holds.add(kept)
            self.holds.granted(kept, kept.fence or 0)
            self.holds.touch(kept.semaphore, kept.key, now)

    @staticmethod
    def _kept_hold(node: Node, session_id: int, names: AbstractSet[str]) -> Hold | None:
        """The grant a session of an earlier run still has, if any."""
        for name in names:
            owner = node.semaphores[name].owners.get(session_id)
            if owner is not None and owner.lease_ttl is not None:
                semaphore = node.name == SEMAPHORE_NODE
                hold = Hold(session_id, name, semaphore, int(owner.lease_ttl), 0)
                hold.fence = owner.token
                return hold
        return None

    def _close(self, session_id: int) -> None:
        with contextlib.suppress(TenureError):
            self.host.execute(CloseSession(session_id))

    # -- holds --------------------------------------------------------------------------

    def admit(
        self, semaphore: bool, key: str, limit: int, now: float, token: str = ""
    ) -> bytes | None:
        """None if a new hold on ``key`` (asked by a client of ``token``) may start, else
        the dflockd error line."""
        use = self.holds.keys.get((semaphore, key))
        if use is None:
            if len(self.holds.keys) >= self.settings.max_locks:
                return wire.ERROR_MAX_LOCKS
            share = self.settings.max_locks_per_token
            if share and self.holds.keys_of.get(token, 0) >= share:
                log.info(
                    "dflockd: token %r has registered %d keys (--dflockd-max-locks-per-token)",
                    token,
                    share,
                )
                return wire.ERROR_MAX_LOCKS
        if semaphore:
            found = self.host.engine.nodes[SEMAPHORE_NODE].semaphores.get(key)
            if found is not None and found.limit != limit:
                return wire.ERROR_LIMIT_MISMATCH
        self.holds.touch(semaphore, key, now, limit, token)
        return None

    def own(self, hold: Hold) -> None:
        """Route the hold's effects to the face."""
        self.holds.add(hold)
        self._attach(hold.session_id)

    def disown(self, hold: Hold) -> None:
        """The hold is over: its session's effects need no route."""
        self._forget(hold.session_id)

    def touch(self, hold: Hold) -> None:
        """Activity on the hold's key (a valid release or renew)."""
        self.holds.touch(hold.semaphore, hold.key, self._loop.time())

    # -- the idle-key collector ---------------------------------------------------------

    def _schedule(self) -> None:
        self._timer = self._loop.call_later(self.settings.gc_interval, self.collect)

    def collect(self) -> None:
        """Forget idle keys (and delete idle dflockd semaphores); then run again later."""
        now = self._loop.time()
        busy = self.holds.busy_keys()
        for (semaphore, key), use in list(self.holds.keys.items()):
            if (semaphore, key) in busy or now - use.last_active <= self.settings.gc_max_idle:
                continue
            node = self.host.engine.nodes[node_of(semaphore)]
            found = node.semaphores.get(key)
            if found is not None and (found.owners or found.waiters):
                continue  # native clients use it: not idle
            self.holds.forget_key(semaphore, key)
            if semaphore and found is not None:
                with contextlib.suppress(TenureError):
                    self.host.execute(DeleteSemaphore(self._admin[SEMAPHORE_NODE], key, False))
        self._schedule()

    # -- stats --------------------------------------------------------------------------

    def stats(self, connections: int) -> dict[str, object]:
        """The ``stats`` document (spec §10)."""
        now = self._loop.time()
        engine_now = self.host.engine.now
        doc: dict[str, list[dict[str, object]]] = {
            "locks": [],
            "semaphores": [],
            "idle_locks": [],
            "idle_semaphores": [],
        }
        conn_of = {hold.session_id: hold.conn_id for hold in self.holds.by_session.values()}
        for (semaphore, key), use in sorted(self.holds.keys.items()):
            found = self.host.engine.nodes[node_of(semaphore)].semaphores.get(key)
            owners = list(found.owners.values()) if found is not None else []
            waiting = len(found.waiters) if found is not None else 0
            is_lock = not semaphore or use.limit == 1
            if not owners and not waiting:
                kind = "idle_locks" if is_lock else "idle_semaphores"
                doc[kind].append({"key": key, "idle_s": round(now - use.last_active, 3)})
            elif is_lock:
                owner = owners[0] if owners else None
                deadline = owner.lease_deadline if owner is not None else None
                doc["locks"].append(
                    {
                        "key": key,
                        "owner_conn_id": conn_of.get(owner.session_id, 0) if owner else 0,
                        "lease_expires_in_s": round(max(0.0, deadline - engine_now), 3)
                        if deadline is not None
                        else 0.0,
                        "waiters": waiting,
                    }
                )
            else:
                doc["semaphores"].append(
                    {"key": key, "limit": use.limit, "holders": len(owners), "waiters": waiting}
                )
        return {"connections": connections, **doc}
