"""The synchronous face of tenure: the same API, with ``with`` instead of ``async with``::

    import tenure.sync

    with tenure.sync.connect("memory://") as client:
        client.create_node("my-app")
        with client.session("my-app", recovery_window=15.0) as session:
            with session.mutex("job") as lock:
                while not lock.lost.is_set():
                    do_some_work(fencing_token=lock.token)

There is one implementation, the asyncio one: each client runs it on an event
loop in a background thread (its :class:`Portal`), and every method here is a
blocking call through the portal. The loop keeps sessions and leases alive,
and delivers loss notices, while your thread blocks or computes.

Losses. Blocking code cannot be cancelled, so a loss is published instead:

* ``obj.lost`` is an :class:`EndSignal`, a :class:`threading.Event` set when a
  Session, Lease, Lock or Leadership ends, as the async ``obj.lost`` resolves:
  when it is lost, and when you release or close it yourself;
  ``obj.lost_reason`` tells which: the :class:`~tenure.errors.LostError`, or None
  after your own release or close;
* ``obj.check()`` raises that error; call it between steps of long work;
* ``obj.on_lost(callback)`` calls ``callback(error)`` on the portal thread: keep
  it quick and make no blocking tenure.sync calls from it;
* leaving a ``with`` block whose object was lost meanwhile raises the loss error,
  unless the body raised an exception of its own.

Errors are the :mod:`tenure.errors` classes; timeouts raise :class:`TimeoutError`.
For tests, pass ``clock=FakeClock()`` to ``memory://`` and move it with
``client.portal.call(clock.advance, seconds)``; :mod:`tenure.sync.testing` has
``disconnect``/``reconnect`` for sync sessions.

Processes. :func:`shared_client` is the process runtime: one client per process and
(URL, options), for integrations and libraries, closed at exit; the default client
(:func:`default_client`) is one of its entries. A client inherited by a child made by
``fork`` opens the child's own connection on its next call; the sessions and leases
the parent opened stay the parent's (ForkedClientError in the child).

Layer (CONTRIBUTING.md): its modules may import each other, tenure.client,
tenure.backends.__init__, tenure._core.values, tenure._core.why_report,
tenure._core.top_report, tenure._core.members, tenure.testing.__init__ and
tenure.errors; never tenure.sync._objects.

Layer (CONTRIBUTING.md): this module may also import tenure.sync._objects.
"""

from __future__ import annotations

from tenure.client import Defaults, configure, configured
from tenure.sync._barrier import Barrier
from tenure.sync._cache import Cache
from tenure.sync._claim import Claim
from tenure.sync._client import Client, SessionLoop, connect
from tenure.sync._counter import Counter
from tenure.sync._defaults import close_default_client, default_client, default_session
from tenure.sync._election import Election
from tenure.sync._group import Group, GroupMember, Partition
from tenure.sync._held import EndSignal
from tenure.sync._latch import Latch
from tenure.sync._leases import Leadership, Lease, Lock, ReadLock, WriteLock
from tenure.sync._lock_all import HeldLocks
from tenure.sync._locked import current_lock, locked
from tenure.sync._mutex import Mutex
from tenure.sync._objects import Session
from tenure.sync._portal import Portal
from tenure.sync._rate_limiter import RateLimiter
from tenure.sync._rwlock import RWLock
from tenure.sync._semaphore import Semaphore
from tenure.sync._shared import shared_client
from tenure.sync._stream import Stream

__all__ = [
    "Barrier",
    "Cache",
    "Claim",
    "Client",
    "Counter",
    "Defaults",
    "Election",
    "EndSignal",
    "Group",
    "GroupMember",
    "HeldLocks",
    "Latch",
    "Leadership",
    "Lease",
    "Lock",
    "Mutex",
    "Partition",
    "Portal",
    "RWLock",
    "RateLimiter",
    "ReadLock",
    "Semaphore",
    "Session",
    "SessionLoop",
    "Stream",
    "WriteLock",
    "close_default_client",
    "configure",
    "configured",
    "connect",
    "current_lock",
    "default_client",
    "default_session",
    "locked",
    "shared_client",
]
