"""``celery beat`` on exactly one node: a scheduler that ticks only while it leads.

Run ``celery beat -S tenure.contrib.celery:LeaderScheduler`` on as many nodes as
you like (or set ``beat_scheduler``): each beat campaigns in the election
``tenure_beat_election`` (app setting; ``"celery-beat"`` by default) of the
default node, over the leader runner (``client.lead``, requeue on), and sends
periodic tasks only while its term lasts. The others wait in the election, in
arrival order, sending nothing. When the leader is stopped its term ends at once
(it resigns) and the next takes over; when it is killed with ``-9`` or cut off,
its session expires at the end of its recovery window
(``tenure_beat_recovery_window``; the node's default otherwise) and the next takes
over then. A leader that loses its term stops ticking at once (every send is
checked against the term first) and campaigns again.

``LeaderMixin`` does the same for another scheduler (django-celery-beat's
``DatabaseScheduler``, RedBeat...): ``class Scheduler(LeaderMixin,
DatabaseScheduler): pass``. A new term starts from the schedule as that scheduler
keeps it: with the default PersistentScheduler (a file per node), an entry that
fell due while this node did not lead is sent once at the start of the term, as
after a restart of ``celery beat``; a task that must not run twice for one slot
says so itself (a Singleton with ``mode="enqueue"``, or a claim).

A beat's election runs in a thread of its own, on a client of its own (of the
default backend): closing the scheduler closes it, which resigns at once.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import Any, Final

from celery.beat import PersistentScheduler

import tenure.sync
from tenure.errors import ClientClosedError

__all__ = ["DEFAULT_ELECTION", "LeaderMixin", "LeaderScheduler"]

log = logging.getLogger("tenure.contrib.celery")

#: The election beats campaign in, unless ``tenure_beat_election`` names another.
DEFAULT_ELECTION: Final = "celery-beat"
#: The longest wait, in seconds, for the election thread to end when beat stops.
_JOIN: Final = 10.0


class _Campaign:
    """A beat's candidacy: the leader runner in a thread, and the term it is in, if any."""

    def __init__(self, election: str, recovery_window: float | None) -> None:
        self.election = election
        self.recovery_window = recovery_window
        self._cond = threading.Condition()
        self._leadership: tenure.sync.Leadership | None = None
        self._new_term = False
        self._failure: BaseException | None = None
        self._client: tenure.sync.Client | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False

    def start(self) -> None:
        """Connect and campaign (once; later calls do nothing)."""
        with self._cond:
            if self._thread is not None or self._stopping:
                return
            settings = tenure.sync.configured()
            self._client = tenure.sync.connect(settings.url, **settings.connect_options())
            self._thread = threading.Thread(
                target=self._run, args=(self._client, settings.node), name="tenure beat election"
            )
            self._thread.daemon = True
            self._thread.start()

    def _run(self, client: tenure.sync.Client, node: str) -> None:
        try:
            client.lead(
                node,
                self.election,
                self._term,
                data=f"celery beat {socket.gethostname()} pid {os.getpid()}".encode(),
                requeue=True,
                recovery_window=self.recovery_window,
                description=f"celery beat {socket.gethostname()} pid {os.getpid()}",
            )
        except ClientClosedError as error:
            if not self._stopping:
                self._fail(error)
        except BaseException as error:
            self._fail(error)

    def _fail(self, error: BaseException) -> None:
        log.error(
            "tenure: beat's election %r ended: %s: %s", self.election, type(error).__name__, error
        )
        with self._cond:
            self._failure = error
            self._cond.notify_all()

    def _term(self, leadership: tenure.sync.Leadership) -> None:
        """One term: tick while it lasts (runs in the election thread)."""
        with self._cond:
            self._leadership = leadership
            self._new_term = True
            self._cond.notify_all()
        log.info(
            "tenure: beat leads %r with token %d: periodic tasks are sent from here",
            self.election,
            leadership.token,
        )
        leadership.lost.wait()
        with self._cond:
            self._leadership = None
        reason = leadership.lost_reason
        if reason is not None and not self._stopping:
            log.error(
                "tenure: beat lost the lead of %r (%s: %s): no task is sent from here until"
                " it leads again",
                self.election,
                type(reason).__name__,
                reason,
            )

    def leading(self) -> tenure.sync.Leadership | None:
        """The term in progress, or None."""
        leadership = self._leadership
        if leadership is None or leadership.lost.is_set():
            return None
        return leadership

    def wait_term(self, timeout: float) -> tuple[tenure.sync.Leadership | None, bool]:
        """Wait up to ``timeout`` for a term: it (or None), and whether it is new since the
        last call. Raises the election's failure (a missing node, a refused token...)."""
        with self._cond:
            self._cond.wait_for(lambda: self._failure is not None or self.leading(), timeout)
            if self._failure is not None:
                raise self._failure
            new, self._new_term = self._new_term, False
            return self.leading(), new

    def stop(self) -> None:
        """Resign and stop campaigning (closes the election's client)."""
        with self._cond:
            self._stopping = True
            client, thread = self._client, self._thread
        if client is not None:
            client.close()
        if thread is not None:
            thread.join(_JOIN)


class LeaderMixin:
    """Mixed into a celery beat ``Scheduler``: it ticks only while this beat leads.

    Settings (``app.conf``): ``tenure_beat_election``, the election's name
    (``"celery-beat"``); ``tenure_beat_recovery_window``, seconds the store keeps a
    lost leader's session (None: the node's default), which is how long after a
    ``kill -9`` the next beat takes over.
    """

    app: Any
    max_interval: float
    _heap: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        conf = self.app.conf
        self.tenure_campaign = _Campaign(
            str(conf.get("tenure_beat_election") or DEFAULT_ELECTION),
            conf.get("tenure_beat_recovery_window"),
        )

    @property
    def leadership(self) -> tenure.sync.Leadership | None:
        """This beat's term in progress (its ``token`` grows with each term), or None."""
        return self.tenure_campaign.leading()

    def tick(self, *args: Any, **kwargs: Any) -> float:
        """Send what is due while leading; else wait (up to ``max_interval``) for a term."""
        self.tenure_campaign.start()
        leadership, new = self.tenure_campaign.wait_term(float(self.max_interval))
        if leadership is None:
            return 0.0  # (beat calls tick again at once: the wait was the pause)
        if new:
            self._heap = None  # the entries' times as they are now, not at the last term
        interval: float = super().tick(*args, **kwargs)  # type: ignore[misc]
        return interval

    def apply_entry(self, entry: Any, producer: Any = None) -> None:
        """Send ``entry``'s task, unless the term ended since the tick began."""
        if self.tenure_campaign.leading() is None:
            log.warning("tenure: beat does not send %s: it no longer leads", entry.name)
            return
        super().apply_entry(entry, producer=producer)  # type: ignore[misc]

    def close(self) -> None:
        """Resign, then close the scheduler."""
        self.tenure_campaign.stop()
        super().close()  # type: ignore[misc]


class LeaderScheduler(LeaderMixin, PersistentScheduler):
    """Celery's default scheduler (a schedule file per beat), ticking only while it leads:
    ``celery beat -S tenure.contrib.celery:LeaderScheduler``."""
