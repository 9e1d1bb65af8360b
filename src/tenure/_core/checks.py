"""The validation of user input: each check answers the value or InvalidArgumentError.

Checks of names, prefixes, data, counts, holds, tasks, descriptions, page sizes,
durations, a hold's bound (``max_hold``) and a node's long-hold threshold
(``long_hold``) against the fixed limits
(:mod:`tenure._core.limits`); the engine, the backends and the client call them
before anything is sent or changed
(:mod:`tenure._core.values` re-exports them, with ``check_identity`` beside the type
it checks).
"""

from __future__ import annotations

import math
import unicodedata

from tenure._core.limits import (
    MAX_ANNEX_KEY_BYTES,
    MAX_COUNT,
    MAX_DESCRIPTION_BYTES,
    MAX_HOLD,
    MAX_HOLD_SECONDS,
    MAX_NAME_BYTES,
    MAX_PAGE,
    MAX_TASK,
)
from tenure.errors import InvalidArgumentError, LimitExceededError


def check_name(kind: str, name: object) -> str:
    """A node or semaphore name: a non-empty str, no control characters, bounded length."""
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"{kind} name must be a non-empty string, got {name!r}")
    if name.isascii() and name.isprintable() and len(name) <= MAX_NAME_BYTES:
        return name  # the common case, checked in C: printable ASCII has no Cc and no Cs
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise InvalidArgumentError(f"{kind} name is longer than {MAX_NAME_BYTES} bytes")
    # Control characters (Cc) confuse logs and terminals; lone surrogates (Cs) are
    # not text. Every other character, non-ASCII spaces included, is allowed.
    if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in name):
        raise InvalidArgumentError(
            f"{kind} name must not contain control characters or surrogates: {name!r}"
        )
    return name


def check_prefix(prefix: object, what: str = "prefix") -> str:
    """A prefix of semaphore names: ``""`` (every name), or what :func:`check_name`
    takes (a prefix that no name could start with is refused, not watched in vain)."""
    if prefix == "" and isinstance(prefix, str):
        return prefix
    if not isinstance(prefix, str):
        raise InvalidArgumentError(f"{what} must be a string, got {type(prefix).__name__}")
    return check_name(what, prefix)


def check_annex_key(key: object) -> str:
    """A key of a node's annex: a name (see :func:`check_name`) of at most MAX_ANNEX_KEY_BYTES."""
    key = check_name("annex key", key)  # no surrogates after this: it encodes
    # (Bytes, not characters: a key of 64 characters may be up to 256 bytes.)
    if len(key.encode("utf-8")) > MAX_ANNEX_KEY_BYTES:
        raise InvalidArgumentError(f"annex key is longer than {MAX_ANNEX_KEY_BYTES} bytes")
    return key


def check_data(what: str, data: object, limit: int, limit_name: str = "max_data_size") -> bytes:
    """Opaque user data: bytes of at most ``limit`` bytes (``limit_name`` names the limit)."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidArgumentError(f"{what} must be bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) > limit:
        raise LimitExceededError(f"{what} is {len(data)} bytes; {limit_name} is {limit}")
    return data


def check_count(count: object, *, allow_zero: bool = False, what: str = "count") -> int:
    """A token count: an int in [1, MAX_COUNT] (or 0 when allowed); ``what`` names it."""
    low = 0 if allow_zero else 1
    if type(count) is not int or not low <= count <= MAX_COUNT:
        raise InvalidArgumentError(f"{what} must be an integer in [{low}, 2**64-1], got {count!r}")
    # Every mutex holds MAX_COUNT: one shared int object instead of one per hold.
    return MAX_COUNT if count == MAX_COUNT else count


def check_hold(hold: object) -> int:
    """A hold number: an int in [0, MAX_HOLD]."""
    if type(hold) is not int or not 0 <= hold <= MAX_HOLD:
        raise InvalidArgumentError(f"hold must be an integer in [0, 2**32-1], got {hold!r}")
    return hold


def check_task(task: object) -> int:
    """A client's task number: an int in [0, MAX_TASK] (0: not known)."""
    if type(task) is not int or not 0 <= task <= MAX_TASK:
        raise InvalidArgumentError(f"task must be an integer in [0, 2**64-1], got {task!r}")
    return task


def check_description(description: object, what: str = "description") -> str:
    """A session description: a str of at most MAX_DESCRIPTION_BYTES UTF-8 bytes."""
    if not isinstance(description, str):
        raise InvalidArgumentError(f"{what} must be a string, got {type(description).__name__}")
    try:
        size = len(description.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: not text, and no wire can carry it
        raise InvalidArgumentError(f"{what} must not contain surrogates: {description!r}") from None
    if size > MAX_DESCRIPTION_BYTES:
        raise InvalidArgumentError(f"{what} is longer than {MAX_DESCRIPTION_BYTES} bytes")
    return description


def check_page_limit(limit: object) -> int:
    """A listing page's size: an int in [1, MAX_PAGE]."""
    if type(limit) is not int or not 1 <= limit <= MAX_PAGE:
        raise InvalidArgumentError(f"limit must be an integer in [1, {MAX_PAGE}], got {limit!r}")
    return limit


def check_duration(
    what: str, value: object, *, allow_zero: bool = False, maximum: float = math.inf
) -> float:
    """A finite, positive (or zero when allowed) number of seconds, at most ``maximum``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgumentError(f"{what} must be a number of seconds, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise InvalidArgumentError(f"{what} must be a finite positive number, got {value!r}")
    if value > maximum:
        raise InvalidArgumentError(f"{what} must be at most {maximum} seconds, got {value!r}")
    return value


def check_max_hold(max_hold: object) -> float | None:
    """A hold's most seconds (``max_hold``): ``None`` (no bound), or a finite number
    of seconds above 0 and at most MAX_HOLD_SECONDS (366 days)."""
    if max_hold is None:
        return None
    if isinstance(max_hold, bool) or not isinstance(max_hold, int | float):
        raise InvalidArgumentError(f"max_hold must be a number of seconds, got {max_hold!r}")
    value = float(max_hold)
    if not math.isfinite(value) or value <= 0:
        raise InvalidArgumentError(
            f"max_hold must be a finite number of seconds above 0, got {max_hold!r}"
        )
    if value > MAX_HOLD_SECONDS:
        raise InvalidArgumentError(
            f"max_hold must be at most {MAX_HOLD_SECONDS:g} seconds (366 days, "
            f"MAX_HOLD_SECONDS), got {max_hold!r}"
        )
    return value


def check_long_hold(long_hold: object) -> float | None:
    """A node's long-hold threshold (``long_hold``): ``None`` (the server's
    ``--long-hold-seconds`` applies), ``0`` (none of its holds is told of), or a finite
    number of seconds above 0 and at most MAX_HOLD_SECONDS (366 days: a hold told of
    later than that is a mistake, as a ``max_hold`` that long is)."""
    if long_hold is None:
        return None
    if isinstance(long_hold, bool) or not isinstance(long_hold, int | float):
        raise InvalidArgumentError(f"long_hold must be a number of seconds, got {long_hold!r}")
    value = float(long_hold)
    if not math.isfinite(value) or value < 0:
        raise InvalidArgumentError(
            f"long_hold must be a finite number of seconds, 0 or more, got {long_hold!r}"
        )
    if value > MAX_HOLD_SECONDS:
        raise InvalidArgumentError(
            f"long_hold must be at most {MAX_HOLD_SECONDS:g} seconds (366 days, "
            f"MAX_HOLD_SECONDS), got {long_hold!r}"
        )
    return value


def check_timeout(timeout: object) -> float | None:
    """An acquire timeout: ``None`` waits forever, ``0`` only tries, else seconds."""
    if timeout is None:
        return None
    return check_duration("timeout", timeout, allow_zero=True)


def check_acquire(
    name: object,
    count: object,
    data: object,
    limit: int,
    timeout: object,
    hold: object,
    task: object,
) -> tuple[str, int, bytes, float | None, int, int]:
    """An acquire's arguments, each as its own check answers it (:func:`check_name`
    of a semaphore, :func:`check_count`, :func:`check_data` of owner data under
    ``limit``, :func:`check_timeout`, :func:`check_hold`, :func:`check_task`), in that
    order: the first that fails raises. The usual ones (a short printable ASCII name,
    an int count, bytes, no timeout, int hold and task in range) are taken here in
    one call: the hot path's, once per acquire."""
    if (
        type(name) is str
        and 0 < len(name) <= MAX_NAME_BYTES
        and name.isascii()
        and name.isprintable()
        and type(count) is int
        and 1 <= count <= MAX_COUNT
        and type(data) is bytes
        and len(data) <= limit
        and timeout is None
        and type(hold) is int
        and 0 <= hold <= MAX_HOLD
        and type(task) is int
        and 0 <= task <= MAX_TASK
    ):
        return name, MAX_COUNT if count == MAX_COUNT else count, data, None, hold, task
    return (
        check_name("semaphore", name),
        check_count(count),
        check_data("owner data", data, limit),
        check_timeout(timeout),
        check_hold(hold),
        check_task(task),
    )


def check_place(name: object, hold: object) -> tuple[str, int]:
    """A semaphore's name and a hold number (:func:`check_name`, :func:`check_hold`, in
    that order), the usual ones in one call: a release's, on the hot path."""
    if (
        type(name) is str
        and 0 < len(name) <= MAX_NAME_BYTES
        and name.isascii()
        and name.isprintable()
        and type(hold) is int
        and 0 <= hold <= MAX_HOLD
    ):
        return name, hold
    return check_name("semaphore", name), check_hold(hold)
