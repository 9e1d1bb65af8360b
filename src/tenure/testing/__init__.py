"""Public helpers for testing code that uses tenure.

* :class:`FakeClock` drives ``memory://`` expiry without sleeping.
* :func:`disconnect` / :func:`reconnect` make a ``memory://`` session behave as
  if its connection dropped or came back, so its recovery window can run out.
"""

from __future__ import annotations

from tenure.testing._clock import FakeClock
from tenure.testing._connection import disconnect, reconnect

__all__ = ["FakeClock", "disconnect", "reconnect"]
