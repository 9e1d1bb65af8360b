"""What a URL no backend takes was probably meant to be: the nearest scheme's form.

``tenure:/host`` (one slash), ``etcd//h:2379`` (no colon), ``tenur://h:1`` (a
letter short): :func:`url_refusal` names the URL given, the scheme nearest to what
it starts with and that scheme's form (``tenure://host:port``), and, where the
rest can be kept, the URL it was probably meant to be. Secrets are masked in both
(:func:`~tenure.backends._options.masked_url`, and the same rule for a URL whose
``//`` is missing).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Final

from tenure.backends._options import masked_url

__all__ = ["FORMS", "url_refusal"]

#: Each built-in scheme's form, as an error shows it.
FORMS: Final = {
    "memory": "memory://",
    "tenure": "tenure://host:port",
    "tenures": "tenures://host:port",
    "etcd": "etcd://host:2379",
    "etcds": "etcds://host:2379",
    "redis": "redis://host:6379/0",
    "rediss": "rediss://host:6379/0",
    "postgres": "postgres://user:password@host:5432/db",
    "postgresql": "postgresql://user:password@host:5432/db",
}

#: A scheme, what follows it in place of ``://``, and the rest.
_PARTS: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)(:?/*)(.*)", re.DOTALL)
#: ``host:port`` alone: a server's address given without a scheme.
_ADDRESS: Final = re.compile(r"[A-Za-z0-9.-]+:[0-9]+")
#: A password before ``@`` in a URL whose ``//`` may be missing.
_LOOSE_SECRET: Final = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*:/{0,3}[^/?#@]*?:)[^/?#@]*@")


def _shown(url: str) -> str:
    """``url`` quoted, its secrets masked even where its ``//`` is missing."""
    return repr(masked_url(_LOOSE_SECRET.sub(r"\1***@", url)))


def _nearest(word: str, schemes: Iterable[str]) -> str | None:
    """The scheme ``word`` is, or is nearest to (a typo's distance); None if none is."""
    known = sorted(schemes)
    word = word.lower()
    if word in known:
        return word
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return close[0] if close else None


def _form(scheme: str) -> str:
    """How a URL of ``scheme`` looks (a plug-in's scheme: ``scheme://...``)."""
    return FORMS.get(scheme, f"{scheme}://...")


def url_refusal(url: str, schemes: Iterable[str]) -> str:
    """Why ``url`` is no backend URL, with the nearest of ``schemes`` and its form.

    For a URL without ``://``, or whose scheme is none of ``schemes``.
    """
    schemes = list(schemes)
    parts = _PARTS.fullmatch(url)
    if _ADDRESS.fullmatch(url) and (parts is None or parts[1].lower() not in schemes):
        meant = f"tenure://{url}"
        return (
            f"expected a URL like 'tenure://host:port', got {_shown(url)} "
            f"(a server's address: did you mean {_shown(meant)}?)"
        )
    if parts is None:  # not even a scheme's first letter
        return f"expected a URL like 'tenure://host:port' or 'memory://', got {_shown(url)}"
    word, separator, rest = parts.groups()
    scheme = _nearest(word, schemes)
    if scheme is None:
        known = ", ".join(sorted(schemes))
        what = f"unknown backend scheme {word!r}" if ":" in separator else "no backend scheme"
        return (
            f"{what} in {_shown(url)}: expected a URL like 'tenure://host:port' or "
            f"'memory://' (known schemes: {known})"
        )
    meant = f"{scheme}://{rest.lstrip('/')}"
    return (
        f"expected a URL like {_form(scheme)!r}, got {_shown(url)} (did you mean {_shown(meant)}?)"
    )
