"""What the backends' URLs share: the ``withdraw_wait`` option, the
``max_prefix_watches_per_node`` option, and a URL quoted safely.

Every backend takes its options from the URL query and from keyword arguments of
:func:`tenure.connect` (the keywords win), refuses an option it does not know by
name, and reads durations as seconds within one named bound: the rules of
:mod:`tenure._url_options`, which the etcd client's URLs (a cluster's too) share.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from tenure._core.limits import MAX_PREFIX_WATCHES_PER_NODE
from tenure._url_options import seconds
from tenure.errors import InvalidArgumentError

__all__ = [
    "MOST_PREFIX_WATCHES_PER_NODE",
    "WITHDRAW_WAIT",
    "masked_url",
    "max_prefix_watches_per_node",
    "shown_url",
    "withdraw_wait",
]

#: The largest ``max_prefix_watches_per_node`` a URL may name (as ``tenure serve``'s).
MOST_PREFIX_WATCHES_PER_NODE: Final = 1_000_000

#: The default of every backend's ``withdraw_wait`` option: the most seconds the
#: caller of a cancelled (or unanswered) acquire waits for its withdrawal before
#: leaving it to finish in the background (``tenure.backends._session``).
WITHDRAW_WAIT: Final = 1.0

#: A URL's secrets: a password in its user part (``redis://:pw@h``), and the values
#: of its query's ``token``, ``password`` and ``secret`` options.
_USER_SECRET: Final = re.compile(r"(://[^/?#@]*?:)[^/?#@]*@")
_QUERY_SECRET: Final = re.compile(r"([?&](?:token|password|secret)=)[^&#]*", re.IGNORECASE)


def masked_url(url: str) -> str:
    """``url`` with its secrets replaced by ``***``: the one rule of what a URL may show
    (errors, log lines, reprs, span attributes; tenure's own and its integrations').

    Works on malformed URLs too (a pattern, not a parse), since those are the ones
    errors quote.
    """
    return _QUERY_SECRET.sub(r"\1***", _USER_SECRET.sub(r"\1***@", url))


def shown_url(url: object) -> str:
    """``repr(url)`` with its secrets replaced by ``***`` (:func:`masked_url`): what an
    error may quote."""
    if not isinstance(url, str):
        return repr(url)
    return repr(masked_url(url))


def withdraw_wait(settings: Mapping[str, object]) -> float:
    """The ``withdraw_wait`` option (every built-in backend takes it), in seconds."""
    return seconds(settings, "withdraw_wait", WITHDRAW_WAIT)


def max_prefix_watches_per_node(settings: Mapping[str, object]) -> int:
    """The ``max_prefix_watches_per_node`` option of a store that keeps a node's prefix
    watches where every change of the node looks at them (``redis://``, ``postgres://``):
    how many one node may have armed, by all its sessions; the engine's bound by
    default (``tenure serve --max-prefix-watches-per-node``), in [1, 1,000,000]. The
    client's own (sent with each arming), as a store's every client is trusted alike."""
    value = settings.get("max_prefix_watches_per_node")
    if value is None:
        return MAX_PREFIX_WATCHES_PER_NODE
    text = str(value)
    if (
        isinstance(value, bool)
        or not text.isdigit()
        or not 1 <= int(text) <= MOST_PREFIX_WATCHES_PER_NODE
    ):
        raise InvalidArgumentError(
            "max_prefix_watches_per_node must be an integer in "
            f"[1, {MOST_PREFIX_WATCHES_PER_NODE}], got {value!r}"
        )
    return int(text)
