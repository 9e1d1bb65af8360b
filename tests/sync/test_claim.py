"""Sync claims: a portal over the async ones (claim, with-block release, release by id)."""

from __future__ import annotations

import tenure.sync
from tenure.testing import FakeClock

from .conftest import NODE


def test_a_claim_is_held_at_least_after_its_with_block_and_ends_at_at_most(
    client: tenure.sync.Client,
    session: tenure.sync.Session,
    other: tenure.sync.Session,
    clock: FakeClock,
) -> None:
    claim = session.claim("nightly", at_least=60.0, at_most=600.0, data=b"host-a")
    assert isinstance(claim, tenure.sync.Claim)
    assert (claim.name, claim.node, claim.data) == ("nightly", NODE, b"host-a")
    assert other.claim("nightly", at_least=60.0, at_most=600.0) is None
    with claim:
        pass  # released at the end of the block
    assert other.claim("nightly", at_least=60.0, at_most=600.0) is None  # at_least holds it
    client.portal.call(clock.advance, 60.0)
    again = other.claim("nightly", at_least=0.0, at_most=30.0)
    assert again is not None
    assert again.token > claim.token
    client.portal.call(clock.advance, 30.0)  # its at_most: ended, whatever its holder
    assert not again.release()


def test_any_client_releases_a_claim_by_its_id(
    client: tenure.sync.Client, session: tenure.sync.Session
) -> None:
    claim = session.claim("task/17", at_least=0.0, at_most=600.0)
    assert claim is not None
    assert client.release_claim(NODE, "task/17", claim.id)
    assert not client.release_claim(NODE, "task/17", claim.id)
    assert session.claim("task/17", at_least=0.0, at_most=600.0) is not None
