"""A URL's options: its query with keyword options over it, and durations in seconds.

Every URL tenure parses itself (the backends', ``etcd://`` and ``redis://`` and
``postgres://``, and a cluster's ``--cluster``) takes its options from its query and
from keyword arguments (the keywords win), refuses an option it does not know by
name, and reads durations as seconds within one bound (:data:`MAX_SECONDS`). The
options of each URL are its parser's; these are only the rules they share.

Layer (CONTRIBUTING.md): this module may import tenure.errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Final
from urllib.parse import SplitResult, parse_qsl

from tenure.errors import InvalidArgumentError

__all__ = ["MAX_SECONDS", "merged_settings", "seconds"]

#: The longest duration an option may name, in seconds.
MAX_SECONDS: Final = 3600.0


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
