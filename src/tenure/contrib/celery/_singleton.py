"""``Singleton``: a Celery task base whose runs of one key never overlap.

A run holds the task's key (:mod:`._keys`) as a mutex of this worker process's
session (:mod:`._sessions`) from the moment the task starts in the worker until
it ends; a run that finds the key held is a *duplicate*, and ``on_duplicate``
says what it does: ``"raise"`` :class:`~tenure.errors.DuplicateTaskError` (the
task fails, naming the running task's id), ``"return"`` the running task's id as
its result, or ``"log"`` a warning and return None. Never dropped silently.

A task delivered again while its old hold lives (``acks_late`` with
``reject_on_worker_lost``: its worker died mid-run, and the broker hands the task
to another) is no duplicate of itself: it waits for that hold to end with the dead
worker's session (its window, and a little slack), then runs. If the old hold
outlives that wait, the first delivery is alive (a Redis visibility timeout
delivered a running task again), and this delivery is ignored (a warning; Celery
stores nothing for it, so the running delivery's result stands).

With ``mode="enqueue"`` the key is also claimed by the producer at
``apply_async`` (:mod:`._enqueue`), so a second enqueue while one is queued or
running is the duplicate, answered at once in the producer.

A worker killed with ``-9`` frees the key when its session's recovery window has
passed (``recovery_window``; the node's default otherwise): no TTL of hours.

**A hold lost while the task runs** (the worker cut off from the store past the
window, an operator's ``kill-session``): the store frees the key, so a duplicate
may start meanwhile. Sync code cannot be cancelled, so the task goes on; it is
told: an error is logged at once, ``self.singleton_lock.lost`` is set (a
``threading.Event``: a long task checks it between steps, or calls
``self.singleton_lock.check()``), and when the task ends the loss is raised
(the task fails with the :class:`~tenure.errors.LostError`) unless
``raise_on_loss=False``. ``self.singleton_lock.token`` is the hold's fencing
token: writes fenced with it refuse the late run (docs/fencing.md).
"""

from __future__ import annotations

import contextvars
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Final

from celery import Task
from celery.exceptions import Ignore, Reject, Retry
from kombu.utils.uuid import uuid

import tenure.sync
from tenure import MAX_CLAIM_SECONDS
from tenure.errors import DuplicateTaskError, InvalidArgumentError

from . import _enqueue
from ._keys import check_unique_on, singleton_key
from ._sessions import process_session

__all__ = ["ON_DUPLICATE", "Singleton"]

log = logging.getLogger("tenure.contrib.celery")

#: What a duplicate may do.
ON_DUPLICATE: Final = ("raise", "return", "log")
#: When the key is taken: when the task runs, or already when it is enqueued.
MODES: Final = ("run", "enqueue")
#: How many times a busy key whose holder ended meanwhile is tried again.
_TRIES: Final = 3
#: Seconds past a dead holder's window that a redelivered task waits for its key
#: (the store's expiry check runs a little after the window ends).
_EXPIRY_SLACK: Final = 5.0

#: The lock of the Singleton run in progress in this thread (or context).
_current_lock: contextvars.ContextVar[tenure.sync.Lock | None] = contextvars.ContextVar(
    "tenure_singleton_lock", default=None
)


class Singleton(Task):
    """A task whose runs of one key never overlap (module docstring).

    ``@app.task(base=Singleton, unique_on=["report_id"], on_duplicate="return")``;
    every attribute below can be given so, or set on a subclass for a whole project.
    The backend and node are the process's default (``tenure.configure(url,
    node=...)``, or ``TENURE_URL`` and ``TENURE_NODE``).
    """

    #: The parameters that make the key: None, all of them; ``[]``, none (one run of
    #: the task at a time); a name or a list of names.
    unique_on: ClassVar[str | Sequence[str] | None] = None
    #: What a duplicate does: ``"raise"`` DuplicateTaskError, ``"return"`` the running
    #: task's id, or ``"log"`` a warning (and return None).
    on_duplicate: ClassVar[str] = "raise"
    #: ``"run"``: the key is held while the task runs; ``"enqueue"``: also claimed from
    #: ``apply_async`` on, so a second enqueue while one is queued is the duplicate.
    mode: ClassVar[str] = "run"
    #: Seconds the store keeps a worker's session after its connection is lost: a
    #: worker killed with -9 frees the key this long after. None: the node's default.
    recovery_window: ClassVar[float | None] = None
    #: ``mode="enqueue"``: the most seconds a claim keeps the key after the enqueue,
    #: whatever becomes of the task (queued behind others, its worker killed).
    enqueue_at_most: ClassVar[float] = 3600.0
    #: Whether a run whose hold was lost while it ran fails at its end with the loss.
    raise_on_loss: ClassVar[bool] = True
    #: Prefix of the keys' names in the node.
    key_prefix: ClassVar[str] = "celery/"
    #: Celery logs these as expected failures (one line, no traceback).
    throws: ClassVar[tuple[type[BaseException], ...]] = (DuplicateTaskError,)

    _unique_on: ClassVar[tuple[str, ...] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Check the settings where the task is declared (``app.task`` makes a subclass)."""
        super().__init_subclass__(**kwargs)
        task = str(getattr(cls, "name", None) or cls.__name__)
        run = None if cls.run is Task.run else cls.run
        cls._unique_on = check_unique_on(cls.unique_on, run, task)
        _check_choice("on_duplicate", cls.on_duplicate, ON_DUPLICATE, task)
        _check_choice("mode", cls.mode, MODES, task)
        window = cls.recovery_window
        if window is not None and not _positive(window, math.inf):
            raise InvalidArgumentError(
                f"recovery_window of task {task} must be None or positive seconds, got {window!r}"
            )
        if not _positive(cls.enqueue_at_most, MAX_CLAIM_SECONDS):
            raise InvalidArgumentError(
                f"enqueue_at_most of task {task} must be positive seconds, at most"
                f" {MAX_CLAIM_SECONDS:g} (MAX_CLAIM_SECONDS), got {cls.enqueue_at_most!r}"
            )
        if not isinstance(cls.key_prefix, str):
            raise InvalidArgumentError(f"key_prefix of task {task} must be a str")

    @property
    def singleton_lock(self) -> tenure.sync.Lock | None:
        """The hold of the key by the run in progress (in this thread): its ``token``
        fences writes, its ``lost`` is set if the hold is lost. None outside a run."""
        return _current_lock.get()

    def singleton_key(self, args: Sequence[object], kwargs: Mapping[str, object]) -> str:
        """The name of the key of the call ``(args, kwargs)`` (override to choose your own)."""
        return singleton_key(self.key_prefix, self.name, self.run, self._unique_on, args, kwargs)

    # -- in the worker: hold the key while the task runs ---------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the task holding its key; a duplicate does what ``on_duplicate`` says."""
        claim = _enqueue.carried_claim(self.request)
        keep_claim = False
        try:
            return self._run_holding(args, kwargs)
        except (Retry, _SecondDelivery):
            keep_claim = True  # the retried message (or the running delivery) has it
            raise
        except Reject as rejected:
            keep_claim = bool(rejected.requeue)
            raise
        finally:
            if claim is not None and not keep_claim:
                _enqueue.release(claim, self.name, self.request.id)

    def _run_holding(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        key = self.singleton_key(args, kwargs)
        mutex = process_session(self.recovery_window).mutex(key)
        data = _enqueue.owner_data(self.request.id, self.name)
        lock: tenure.sync.Lock | None = None
        running: str | None = None
        for _ in range(_TRIES):
            lock = mutex.try_lock(data=data)
            if lock is not None:
                break
            holder = mutex.describe().owner
            if holder is not None:
                running = _enqueue.task_id_in(holder.data)
                if running is not None and running == self.request.id:
                    lock = _own_hold_back(mutex, data, holder.session_id)
                    if lock is None:
                        raise self._second_delivery(key)
                break
        if lock is None:
            return self._duplicate(key, running)
        lock.on_lost(_loss_logger(self.name, self.request.id, key))
        entered = _current_lock.set(lock)
        try:
            result = super().__call__(*args, **kwargs)
        except BaseException:
            _release_after_failure(lock)
            raise
        finally:
            _current_lock.reset(entered)
        lost = lock.lost_reason
        lock.release()
        if lost is not None and self.raise_on_loss:
            raise lost
        return result

    def _second_delivery(self, key: str) -> Ignore:
        """This very task holds its key, alive: the broker delivered it twice (a Redis
        visibility timeout). The running delivery reports; this one is dropped, loudly."""
        log.warning(
            "tenure: %s[%s] is delivered again while it runs (it holds %r): this delivery"
            " is ignored",
            self.name,
            self.request.id,
            key,
        )
        return _SecondDelivery()

    def _duplicate(self, key: str, running: str | None) -> str | None:
        """A run that found its key held: what ``on_duplicate`` says."""
        error = DuplicateTaskError(self.name, key, running)
        if self.on_duplicate == "raise":
            raise error
        if self.on_duplicate == "return":
            log.info("tenure: %s[%s]: %s; returning its id", self.name, self.request.id, error)
            return running
        log.warning("tenure: %s[%s]: %s; not run", self.name, self.request.id, error)
        return None

    # -- in the producer: mode="enqueue" claims the key ---------------------------------

    def apply_async(
        self,
        args: Sequence[object] | None = None,
        kwargs: Mapping[str, object] | None = None,
        task_id: str | None = None,
        producer: Any = None,
        link: Any = None,
        link_error: Any = None,
        shadow: str | None = None,
        **options: Any,
    ) -> Any:
        """Send the task; with ``mode="enqueue"``, claim its key first (a duplicate does
        what ``on_duplicate`` says, here: raise, or return the queued task's result)."""
        headers = options.get("headers") or {}
        if self.mode != "enqueue" or _enqueue.claim_of(headers) is not None:
            # (A retry's message carries its claim on: not claimed again.)
            return super().apply_async(
                args, kwargs, task_id, producer, link, link_error, shadow, **options
            )
        task_id = task_id or uuid()
        key = self.singleton_key(tuple(args or ()), dict(kwargs or {})) + _enqueue.QUEUED_SUFFIX
        taken = _enqueue.take_claim(
            key, self.enqueue_at_most, self.recovery_window, _enqueue.owner_data(task_id, self.name)
        )
        if not isinstance(taken, tenure.sync.Claim):
            return self._duplicate_enqueued(key, taken)
        ref = {"node": taken.node, "name": taken.name, "id": taken.id}
        try:
            return super().apply_async(
                args,
                kwargs,
                task_id,
                producer,
                link,
                link_error,
                shadow,
                **{**options, "headers": {**headers, _enqueue.HEADER: ref}},
            )
        except BaseException:
            taken.release()  # never sent: the key is free again
            raise

    def _duplicate_enqueued(self, key: str, running: str | None) -> Any:
        error = DuplicateTaskError(self.name, key, running)
        if self.on_duplicate == "raise" or running is None:
            raise error
        if self.on_duplicate == "return":
            log.info("tenure: %s: %s; returning its result", self.name, error)
        else:
            log.warning("tenure: %s: %s; not sent", self.name, error)
        return self.AsyncResult(running)


class _SecondDelivery(Ignore):
    """Celery's Ignore (no state is stored) for a task delivered again while it runs."""


def _own_hold_back(
    mutex: tenure.sync.Mutex, data: bytes, session_id: int
) -> tenure.sync.Lock | None:
    """Take the key this very task holds in ``session_id``, waiting at most that
    session's window (and the store's slack): a redelivery after its worker died
    (``acks_late``) gets it once the dead session expires; None if the holder lives."""
    node = tenure.sync.configured().node
    sessions = tenure.sync.default_client().list_sessions(node)
    window = next((s.timeout for s in sessions if s.session_id == session_id), 0.0)
    try:
        return mutex.lock(timeout=window + _EXPIRY_SLACK, data=data)
    except TimeoutError:
        return None


def _release_after_failure(lock: tenure.sync.Lock) -> None:
    """Release the hold of a run that raised: a failure to release is logged, never
    raised over the task's own error."""
    try:
        lock.release()
    except Exception as error:
        log.error("tenure: releasing %r after the task failed: %s", lock.name, error)


def _loss_logger(task: str, task_id: str | None, key: str) -> Callable[[BaseException], None]:
    def told(error: BaseException) -> None:
        log.error(
            "tenure: %s[%s] lost its hold of %r (%s: %s) while it runs: a duplicate may start now",
            task,
            task_id,
            key,
            type(error).__name__,
            error,
        )

    return told


def _check_choice(setting: str, value: object, choices: tuple[str, ...], task: str) -> None:
    if value not in choices:
        raise InvalidArgumentError(
            f"{setting} of task {task} must be one of {', '.join(map(repr, choices))},"
            f" got {value!r}"
        )


def _positive(value: object, most: float) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 < value <= most
    )
