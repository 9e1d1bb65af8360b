"""The link's own error, apart from the link's compiled modules.

:class:`DisconnectedError` lives here, in a module mypyc does not compile (the
compiled build, CONTRIBUTING.md): a class that derives from an exception defined in
Python (``UnavailableError``) cannot be a native class. ``_link_conn`` and ``_link``
import it from here, and export it as before.
"""

from __future__ import annotations

from tenure.errors import UnavailableError

__all__ = ["DisconnectedError"]


class DisconnectedError(UnavailableError):
    """The connection was lost before the answer came: the request may or may not have run."""
