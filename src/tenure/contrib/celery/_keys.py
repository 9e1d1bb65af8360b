"""The key a Singleton task holds: its name and the arguments its ``unique_on`` names.

``unique_on=None`` keys a task by every argument it is called with; a list of
parameter names (or one name) by those alone; ``[]`` by the task's name only (one
run of the task at a time, whatever its arguments). The arguments are bound to the
task's signature first (defaults applied), so ``rebuild(7)``, ``rebuild(report_id=7)``
and ``rebuild(7, force=False)`` are one key when ``force`` defaults to False and
``unique_on`` leaves it out.

The name is ``PREFIX + TASK + "/" + DIGEST``: the digest is SHA-256 of the chosen
arguments as canonical JSON (keys sorted; kombu's encoder, so datetimes, dates,
UUIDs and Decimals, which Celery's JSON serializer carries, key the same in the
producer and in the worker). An argument JSON cannot hold is refused with
InvalidArgumentError naming it: a key made of ``repr()`` would differ from process
to process and dedupe nothing.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from kombu.utils.json import JSONEncoder

from tenure.errors import InvalidArgumentError

__all__ = ["DIGEST_CHARS", "bound_arguments", "check_unique_on", "singleton_key"]

#: Hex digits of the arguments' SHA-256 kept in the key (128 bits).
DIGEST_CHARS: Final = 32


def check_unique_on(
    value: object, run: Callable[..., object] | None, task: str
) -> tuple[str, ...] | None:
    """``unique_on`` as a tuple of parameter names (None: every argument).

    ``run`` is the task's function, whose parameters the names must be (None: not
    known yet, as for an abstract base class).

    Raises:
        InvalidArgumentError: not None, a name, or a sequence of names; or a name
            that is no parameter of ``run``.
    """
    if value is None:
        return None
    names: tuple[object, ...]
    if isinstance(value, str):
        names = (value,)
    elif isinstance(value, Sequence):
        names = tuple(value)
    else:
        raise InvalidArgumentError(
            f"unique_on of task {task} must be None, a parameter name or a list of them,"
            f" got {value!r:.80}"
        )
    if not all(isinstance(name, str) and name for name in names):
        raise InvalidArgumentError(
            f"unique_on of task {task} must name parameters (non-empty strings), got {value!r:.80}"
        )
    checked = tuple(str(name) for name in names)
    if run is not None:
        parameters = inspect.signature(run).parameters
        missing = [name for name in checked if name not in parameters]
        if missing:
            raise InvalidArgumentError(
                f"unique_on of task {task} names {missing!r}, which are not parameters of"
                f" its function {sorted(parameters)!r}"
            )
    return checked


def bound_arguments(
    run: Callable[..., object], args: Sequence[object], kwargs: Mapping[str, object], task: str
) -> dict[str, Any]:
    """The call's arguments by parameter name, defaults applied.

    Raises:
        InvalidArgumentError: the arguments do not fit the task's signature.
    """
    try:
        bound = inspect.signature(run).bind(*args, **kwargs)
    except TypeError as error:
        raise InvalidArgumentError(f"the arguments do not fit task {task}: {error}") from error
    bound.apply_defaults()
    return dict(bound.arguments)


def singleton_key(
    prefix: str,
    task: str,
    run: Callable[..., object],
    unique_on: tuple[str, ...] | None,
    args: Sequence[object],
    kwargs: Mapping[str, object],
) -> str:
    """The name of the lock of the call ``task(*args, **kwargs)`` (module docstring).

    Raises:
        InvalidArgumentError: the arguments do not fit the task, or one of those the
            key is made of is not JSON.
    """
    if unique_on == ():
        return f"{prefix}{task}"
    arguments = bound_arguments(run, args, kwargs, task)
    unbound = [name for name in unique_on or () if name not in arguments]
    if unbound:  # (a bound task's ``self``: the call does not pass it)
        raise InvalidArgumentError(
            f"unique_on of task {task} names {unbound!r}, which a call does not pass"
        )
    chosen = arguments if unique_on is None else {name: arguments[name] for name in unique_on}
    try:
        canonical = json.dumps(
            chosen, cls=JSONEncoder, sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
    except (TypeError, ValueError) as error:
        culprit = next((name for name, value in chosen.items() if not _is_json(value)), None)
        raise InvalidArgumentError(
            f"argument {culprit!r} of task {task} cannot key it ({error}): name arguments"
            " that JSON can hold in unique_on, or override singleton_key()"
        ) from error
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:DIGEST_CHARS]
    return f"{prefix}{task}/{digest}"


def _is_json(value: object) -> bool:
    try:
        json.dumps(value, cls=JSONEncoder)
    except (TypeError, ValueError):
        return False
    return True
