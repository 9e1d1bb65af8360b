"""Public helpers for testing code that uses tenure.

* :class:`FakeClock` drives ``memory://`` expiry without sleeping.
* :func:`disconnect` / :func:`reconnect` make a ``memory://`` session behave as
  if its connection dropped or came back, so its recovery window can run out.
* :class:`Cable` does it for real against a server: a TCP forwarder between a
  client and its server, unplugged on demand.
* :class:`Recorder` records what clients acquire, hold and release, and asserts on
  it (``assert_never_overlap()``, ``assert_fifo()``); the pytest plugin's fixtures
  (``tenure_client``, ``tenure_clock``, ``tenure_recorder``...) hand it out, with a
  ``memory://`` client on a :class:`FakeClock` (docs/integrations.md, "Test fixtures").
* :mod:`tenure.testing.conformance` is the conformance kit: the API suite every
  backend must pass, runnable against any URL from an installed
  ``tenure[testing]``::

      python -m pytest --pyargs tenure.testing.conformance --tenure-url=memory://
      python -m pytest --pyargs tenure.testing.conformance --tenure-url=tenure://127.0.0.1:6388

  (docs/testing.md says what it checks and why a test skips).

Layer (CONTRIBUTING.md): this module may import anything.
"""

from __future__ import annotations

from tenure.testing._cable import Cable
from tenure.testing._clock import FakeClock
from tenure.testing._connection import disconnect, reconnect
from tenure.testing._recorder import RecordedAcquire, RecordedHold, Recorder

__all__ = [
    "Cable",
    "FakeClock",
    "RecordedAcquire",
    "RecordedHold",
    "Recorder",
    "disconnect",
    "reconnect",
]
