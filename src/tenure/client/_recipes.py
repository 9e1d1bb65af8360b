"""The recipes, one line each: what the rest of the project reads of a recipe.

A recipe is its file here (``client/_barrier.py``: a short class over
``session.acquire`` and a semaphore's data compare-and-set, its data format in one
``_core`` module when it has one), its sync twin (``sync/_barrier.py``), and one line
of :data:`RECIPES`: its class, where it is made, its conformance-kit module, and its
row in docs/recipes.md's table of recipes by backend.

Read from here: the table (``tools/recipes_table.py``), the sync face's parity test
(``tests/sync/test_parity.py``: each recipe class against its sync twin), and
``tests/test_recipe_registry.py``, which checks each line against the code: the
class exported by ``tenure``, ``tenure.client`` and ``tenure.sync``, its maker a
method of both faces, its kit module there, its rows in the docs, and no recipe
maker of a session without its line. The makers themselves stay explicit, typed
methods of ``Session`` and ``tenure.sync.Session`` (what an IDE shows a user); the
exports stay explicit imports for the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["RECIPES", "Recipe"]


@dataclass(frozen=True, slots=True)
class Recipe:
    """One recipe: ``cls`` (its class's name in ``tenure``, ``tenure.client`` and
    ``tenure.sync``; None if it makes none), ``maker`` (``Owner.method``, the method
    of either face that makes or runs it), ``kit`` (its module of the conformance
    kit) and ``row`` (its row in docs/recipes.md's table; None: a primitive every
    backend has, not in that table)."""

    cls: str | None
    maker: str
    kit: str
    row: str | None


#: Every recipe; the recipes with a row in docs/recipes.md's table in its order.
RECIPES: Final = (
    Recipe("Mutex", "Session.mutex", "test_mutex", None),
    Recipe("Semaphore", "Session.semaphore", "test_semaphore", None),
    Recipe("Election", "Session.election", "test_election", None),
    Recipe("RWLock", "Session.rwlock", "test_rwlock", "readers-writer lock"),
    Recipe("Counter", "Session.counter", "test_counter", "counter, compare-and-set"),
    Recipe("Latch", "Session.latch", "test_latch", "latch"),
    Recipe("Barrier", "Session.barrier", "test_barrier", "barrier"),
    Recipe("HeldLocks", "Session.lock_all", "test_lock_all", "all-or-none locks"),
    Recipe("RateLimiter", "Session.rate_limiter", "test_rate_limiter", "rate limiter"),
    Recipe("Group", "Session.group", "test_group", "group"),
    Recipe("Partition", "Group.partition", "test_partition", "partition"),
    Recipe("Mutex", "Session.mutex", "test_reentrant", "reentrant mutex"),
    Recipe(None, "Client.lead", "test_lead", "leader runner"),
    Recipe("Cache", "Client.cache", "test_cache", "prefix cache"),
    Recipe(None, "Client.describe_node", "test_deadlock", "deadlock detection"),
    Recipe("Claim", "Session.claim", "test_claim", "claims"),
)
