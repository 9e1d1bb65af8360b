"""How the dashboard shows what clients wrote: as text that shows as itself.

Owner and waiter data leave as text (:func:`shown_data`): undecodable bytes and
invisible or control characters escaped, cut to a number of characters; every
other string of a view (names, descriptions, identities, keys) goes through
:func:`shown_text` (:func:`shown_view` walks a view), as the CLI escapes them.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_MAX_DATA_CHARS", "RAW_KEYS", "shown_data", "shown_text", "shown_view"]

#: Characters of owner data a view shows by default (``BoardLimits.max_data_chars``).
DEFAULT_MAX_DATA_CHARS: Final = 200
#: Characters that would not show as themselves in data: C0 and C1 controls, and the
#: invisible ones that reorder or hide text (bidi controls, zero-width characters,
#: line and paragraph separators, the byte-order mark, the soft hyphen).
_UNSEEN_RANGES: Final = (
    (0x00, 0x1F),
    (0x7F, 0x9F),
    (0xAD, 0xAD),
    (0x61C, 0x61C),
    (0x200B, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
)
#: Each of them as Python writes it (``\n``, ``\x1b``, ``\u202e``): a table for
#: ``str.translate``, which escapes a text in C (a view escapes up to megabytes).
_ESCAPES: Final = {
    code: chr(code).encode("unicode_escape").decode()
    for low, high in _UNSEEN_RANGES
    for code in range(low, high + 1)
}

#: The keys of a view whose strings are sent back as they are, never shown: a node's
#: name as the page's requests name it (``node``; its ``name`` is the one shown).
RAW_KEYS: Final = frozenset({"node"})


def shown_data(data: bytes, max_chars: int) -> tuple[str, bool]:
    """``data`` as text to show, and whether it was cut: UTF-8 (undecodable bytes as
    ``\\xNN``), cut to ``max_chars`` characters, then every character that would not
    show as itself (:data:`_UNSEEN_RANGES`) escaped as Python writes it (``\\n``, ``\\x1b``,
    ``\\u202e``): a leader's data cannot add a line or turn text around on the page."""
    # At most 4 bytes a character: no more than this is decoded, however big the data.
    text = data[: 4 * max_chars + 4].decode("utf-8", "backslashreplace")
    cut = len(text) > max_chars or len(data) > 4 * max_chars + 4
    return text[:max_chars].translate(_ESCAPES), cut


def shown_text(text: str) -> str:
    """``text`` with every character that would not show as itself escaped, as
    :func:`shown_data` does and as the CLI does (``tenure.cli._render.safe``: control
    characters, bidi marks and overrides, line separators; here zero-width ones too)."""
    if text.isascii() and text.isprintable():
        return text  # the common case, checked in C
    return text.translate(_ESCAPES)


def shown_view(value: object) -> object:
    """``value`` (a view: dicts, lists, scalars) with every string, keys included,
    through :func:`shown_text`, but for the values of :data:`RAW_KEYS`."""
    if isinstance(value, str):
        return shown_text(value)
    if isinstance(value, dict):
        return {
            shown_text(key): item if key in RAW_KEYS else shown_view(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [shown_view(item) for item in value]
    return value
