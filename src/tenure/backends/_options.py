"""URL options shared by the backends that parse their own URLs.

Every backend takes its options from the URL query and from keyword arguments of
:func:`tenure.connect` (the keywords win), refuses an option it does not know by
name, and reads durations as seconds within one named bound.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Set
from typing import Final
from urllib.parse import SplitResult, parse_qsl

from tenure.errors import InvalidArgumentError

__all__ = [
    "MAX_SECONDS",
    "WITHDRAW_WAIT",
    "merged_settings",
    "seconds",
    "shown_url",
    "withdraw_wait",
]

#: The longest duration an option may name, in seconds.
MAX_SECONDS: Final = 3600.0
#: The default of every backend's ``withdraw_wait`` option: the most seconds the
#: caller of a cancelled (or unanswered) acquire waits for its withdrawal before
#: leaving it to finish in the background (``tenure.backends._session``).
WITHDRAW_WAIT: Final = 1.0

#: A URL's secrets: a password in its user part (``redis://:pw@h``), and the values
#: of its query's ``token``, ``password`` and ``secret`` options.
_USER_SECRET: Final = re.compile(r"(://[^/?#@]*?:)[^/?#@]*@")
_QUERY_SECRET: Final = re.compile(r"([?&](?:token|password|secret)=)[^&#]*", re.IGNORECASE)


def shown_url(url: object) -> str:
    """``repr(url)`` with its secrets replaced by ``***``: what an error may quote.

    Works on malformed URLs too (a pattern, not a parse), since those are the ones
    errors quote.
    """
    if not isinstance(url, str):
        return repr(url)
    return repr(_QUERY_SECRET.sub(r"\1***", _USER_SECRET.sub(r"\1***@", url)))


def merged_settings(
    scheme: str, parts: SplitResult, options: Mapping[str, object], known: Set[str]
) -> dict[str, object]:
    """The URL's query with ``options`` over it; InvalidArgumentError naming every
    option not in ``known`` (``scheme`` says whose options they are)."""
    query: dict[str, object] = dict(parse_qsl(parts.query, keep_blank_values=True))
    settings = {**query, **options}
    unknown = sorted(set(settings) - set(known))
    if unknown:
        raise InvalidArgumentError(f"unknown {scheme}:// option(s): {', '.join(unknown)}")
    return settings


def seconds(settings: Mapping[str, object], option: str, default: float) -> float:
    """The duration ``option`` in seconds (``default`` if absent), in (0, MAX_SECONDS]."""
    try:
        value = float(settings.get(option, default))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{option} must be a number of seconds") from None
    if not 0 < value <= MAX_SECONDS:
        raise InvalidArgumentError(
            f"{option} must be in (0, {MAX_SECONDS:g}] seconds, got {value:g}"
        )
    return value


def withdraw_wait(settings: Mapping[str, object]) -> float:
    """The ``withdraw_wait`` option (every built-in backend takes it), in seconds."""
    return seconds(settings, "withdraw_wait", WITHDRAW_WAIT)
