"""Whose fault: the two ways a protocol operation can fail on *this* side. [compiled]

* :class:`tenure.errors.ProtocolError`: the **peer** broke the protocol (bad bytes,
  a message not allowed now, a reply to a request never made). ``next_event`` raises
  it; the connection is then unusable for receiving.
* :class:`LocalProtocolError`: **this side** tried to send something the protocol
  does not allow (wrong state, a field that cannot be encoded, a duplicate request
  id). ``send`` raises it *before* changing any state, so the connection is still
  good. It is an :class:`~tenure.errors.InvalidArgumentError` (hence a ValueError),
  because the argument to ``send`` is what is wrong, and *not* a ProtocolError, so
  ``except ProtocolError`` only ever catches the peer's faults.
* :class:`FrameTooLargeError`: the message is valid but its frame exceeds what the
  peer said it accepts. Also raised before any state changes.
"""

from __future__ import annotations

from tenure.errors import InvalidArgumentError, LimitExceededError

__all__ = ["FrameTooLargeError", "LocalProtocolError"]


class LocalProtocolError(InvalidArgumentError):
    """This side tried to send something the protocol does not allow; nothing was sent."""


class FrameTooLargeError(LimitExceededError):
    """The encoded frame is larger than the peer's ``max_frame_size``; nothing was sent."""
