"""The claim step of the linearizable workload's clients (:class:`ClaimSteps`).

``claim-slot``: a client claims one of the config's claim names,
``session.claim(name, at_least, at_most, data=label)`` with ``at_least`` drawn from
:data:`AT_LEAST` and ``at_most`` that plus :data:`AT_MOST_MORE` (seconds about a hold's
own: claims end by themselves, are released early and late, and are refused often).
It is recorded in the worker's ``claim`` file: a ``claim`` invoked with ``[at_least,
at_most]``, ``ok`` with ``[token, id]`` when granted, ``fail`` when answered None (the
name is claimed), ``info`` when its answer was lost (sent again, as a new process, as
every request: :mod:`tenure.testing.workload._recording`; a new call is a new claim id).

A granted claim is worked on a while (the config's hold), then ended one of
:data:`ENDINGS`' ways: ``claim.release()``; ``client.release_claim(node, name, id)``
(by its id, as a worker handed the id does, through no session); or not at all
(``at_most`` ends it). A release is a ``release`` invoked with the id and ``ok`` with
``[id, whether it shortened the claim]``. A claim does not end with its session: the
step records no loss. :func:`~tenure.testing.workload.check_claims` holds the file to
the store's promises with time in them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final

import tenure
from tenure.testing.workload._books import CLAIM
from tenure.testing.workload._recording import LinRecorder

__all__ = ["AT_LEAST", "AT_MOST_MORE", "ENDINGS", "ClaimSteps"]

#: Seconds a claim's ``at_least`` is, at random between the two (0: a release ends it).
AT_LEAST: Final = (0.0, 0.3)
#: Seconds its ``at_most`` is past its ``at_least``, at random between the two.
AT_MOST_MORE: Final = (0.05, 0.5)
#: How a granted claim ends, with the weights of each (module docstring).
ENDINGS: Final = {"release": 2, "release-by-id": 1, "at-most": 1}


class ClaimSteps(LinRecorder):
    """The claim step (module docstring), over :class:`LinRecorder`'s recording."""

    #: The client the steps' sessions are of (what a release by id goes through).
    client: tenure.Client | None = None

    async def claim_slot(self, session: tenure.Session) -> None:
        """Claim a name, work a while, end it one of :data:`ENDINGS`' ways."""
        key = self.rng.choice(self.config.claims)
        at_least = round(self.rng.uniform(*AT_LEAST), 3)
        at_most = round(at_least + self.rng.uniform(*AT_MOST_MORE), 3)
        asked: list[object] = [at_least, at_most]

        def take() -> Awaitable[tenure.Claim | None]:
            return session.claim(key, at_least, at_most, data=self.label.encode())

        def judged(claim: tenure.Claim | None) -> tuple[bool, list[object]]:
            return (False, asked) if claim is None else (True, [claim.token, claim.id])

        claim = await self._call(CLAIM, "claim", key, asked, take, judged)
        if claim is None:
            return
        await asyncio.sleep(self.rng.uniform(*self.config.hold))  # (the slot's work)
        ending = self.rng.choices(list(ENDINGS), list(ENDINGS.values()))[0]
        release: Callable[[], Awaitable[bool]]
        if ending == "at-most":
            return
        if ending == "release-by-id" and self.client is not None:
            client, node, claim_id = self.client, self.config.node, claim.id

            def release() -> Awaitable[bool]:
                return client.release_claim(node, key, claim_id)

        else:
            release = claim.release
        await self._call(
            CLAIM, "release", key, claim.id, release, lambda done: (True, [claim.id, done])
        )
