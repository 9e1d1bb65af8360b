"""The class of a backend's sessions: :class:`StoreSession` with the abilities it declares.

:class:`~tenure.backends._session.StoreSession` has every ability of the contract
(:data:`~tenure.backends._abilities.ABILITIES`); a backend that lacks a capability
must not offer its ability, or the client would call it. :func:`session_class`
makes, once per set of capabilities, the subclass that leaves those members out, so
that each built-in session implements exactly the abilities its backend declares
(``tests/backends/test_abilities.py`` checks every set a backend can declare).
"""

from __future__ import annotations

from functools import cache

from tenure.backends._abilities import ABILITY_MEMBERS
from tenure.backends._capability import Capability
from tenure.backends._session import StoreSession

__all__ = ["session_class"]


@cache
def session_class(capabilities: frozenset[Capability]) -> type[StoreSession]:
    """The class of a session whose backend declares ``capabilities``:
    :class:`StoreSession` without the members of the abilities it does not declare
    (:data:`~tenure.backends._abilities.ABILITY_MEMBERS`); one class per set."""
    # None is Python's "this class does not implement it" (as ``__hash__ = None``):
    # a runtime-checkable protocol's isinstance() then says no.
    lacking: dict[str, object] = {
        member: None
        for capability, members in ABILITY_MEMBERS.items()
        if capability not in capabilities
        for member in members
    }
    if not lacking:
        return StoreSession
    shown = ",".join(sorted(c.value for c in capabilities if c in ABILITY_MEMBERS))
    return type(f"StoreSession[{shown}]", (StoreSession,), lacking)
