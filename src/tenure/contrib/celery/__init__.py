"""Celery on tenure: tasks that never run twice at once, and ``celery beat`` on one node.

``pip install 'tenure[celery]'`` (and your broker's client: ``'celery[redis]'``)::

    import tenure
    from tenure.contrib.celery import Singleton

    tenure.configure("tenure://coord-1:6388", node="billing")  # or TENURE_URL, TENURE_NODE

    @app.task(base=Singleton, unique_on=["report_id"], on_duplicate="return")
    def rebuild(report_id: int, force: bool = False) -> None: ...

    @app.task(base=Singleton, mode="enqueue", enqueue_at_most=600)
    def send_invoice(invoice_id: int) -> None: ...

    # celery beat -S tenure.contrib.celery:LeaderScheduler   (on every node: one ticks)

* :class:`Singleton`, a task base: a run holds its key (the task and the arguments
  ``unique_on`` names) in the worker process's session while it runs; a duplicate
  raises :class:`~tenure.errors.DuplicateTaskError`, returns the running task's
  id, or logs (``on_duplicate``). A worker killed with ``-9`` frees the key when
  its session's recovery window has passed (``recovery_window``). With
  ``mode="enqueue"`` the producer claims the key at ``apply_async`` and the worker
  releases the claim when the task ends, so a second enqueue while one is queued
  or running is the duplicate; ``enqueue_at_most`` bounds how long a lost task
  keeps the key.
* :class:`LeaderScheduler` (and :class:`LeaderMixin` for another scheduler): beat
  ticks only while it leads an election; the others wait and take over.
* Fork safety: each worker process (Celery's prefork children too) uses its own
  sessions over its own default client (``tenure.sync.default_client()``); a
  child never uses its parent's.

The backend and node are the process's default (``tenure.configure``, or
``TENURE_URL`` and ``TENURE_NODE``), as for ``@tenure.locked``. The node must
exist (``tenure node create billing``). docs/integrations.md, "Celery", has the
whole story, including what a task sees when its hold is lost while it runs.
"""

from __future__ import annotations

from tenure.errors import DuplicateTaskError

from ._beat import DEFAULT_ELECTION, LeaderMixin, LeaderScheduler
from ._enqueue import HEADER
from ._sessions import close_sessions, process_session
from ._singleton import ON_DUPLICATE, Singleton

__all__ = [
    "DEFAULT_ELECTION",
    "HEADER",
    "ON_DUPLICATE",
    "DuplicateTaskError",
    "LeaderMixin",
    "LeaderScheduler",
    "Singleton",
    "close_sessions",
    "process_session",
]
