"""The engine's fixed limits: the largest counts, names, pages and windows it accepts.

Each is named here once; the checks (:mod:`tenure._core.checks`), the engine and the
wire read them from here (or from :mod:`tenure._core.values`, which re-exports them).
"""

from __future__ import annotations

from typing import Final

#: The largest token count. An ephemeral semaphore has this limit, and a mutex
#: acquires this many tokens, so "exclusive" needs no special case anywhere.
MAX_COUNT: Final = 2**64 - 1

#: The largest hold number a session may give one of its holds on a semaphore.
MAX_HOLD: Final = 2**32 - 1

#: The longest ``max_hold`` an acquire or a node (its default) may ask, in seconds:
#: 366 days, as a claim's longest slot (``MAX_CLAIM_SECONDS``). Longer is taken for a
#: mistake (a timestamp passed for a duration, milliseconds for seconds).
MAX_HOLD_SECONDS: Final = 366 * 24 * 3600.0

#: The largest task number a client may give the task that asks (a uint on the wire).
MAX_TASK: Final = 2**64 - 1

#: The most semaphores one all-or-none acquire (AcquireAll, ``session.lock_all``) may
#: ask for: each is a waiter in its own queue, and every change to any of them looks
#: at all of them.
MAX_SET_NAMES: Final = 64

#: How many holds, queued requests and set members one deadlock check may look at, by
#: default (``EngineState.deadlock_search_limit``, :mod:`tenure._core.deadlocks`;
#: ``tenure serve --deadlock-search-limit``). Past it the request waits: no deadlock
#: is reported.
DEADLOCK_SEARCH_LIMIT: Final = 1_000

#: How many holds, waits and queue places one answer of who blocks a name (WhyName,
#: ``tenure why``: :mod:`tenure._core.blocking`) may look at, by default
#: (``EngineState.why_look_limit``; ``tenure serve --why-look-limit``). Past it the
#: chain stops where it is and says it was cut: one answer is a bounded step.
WHY_LOOK_LIMIT: Final = 10_000

#: Holders, waiters and chain links one answer of who blocks a name lists by default
#: (``client.why``, ``tenure why``): with descriptions and identities as long as
#: allowed (3 KiB each), the answer stays within a 1 MiB frame.
WHY_PAGE: Final = 100

#: How many prefix watches may be armed on one node, by default
#: (``EngineState.max_prefix_watches_per_node``; ``tenure serve
#: --max-prefix-watches-per-node``), whoever armed them. Each fires on every change
#: under its prefix (a prefix of "" on every change of the node): this bounds the
#: pushes one change of a node makes through them (docs/operations.md, "Prefix watches").
MAX_PREFIX_WATCHES_PER_NODE: Final = 1_000

#: How many watches (one-shot or repeating, not prefix watches) one quota owner (a
#: token; ``""`` without an auth file) may have armed on one semaphore name, by default
#: (``EngineState.max_watches_per_semaphore``; ``tenure serve
#: --max-watches-per-semaphore``). Every watch on a name may fire on each change of
#: it, in the changer's step: this bounds the pushes one token's watches add to
#: another's change (about 2 us each), and, counted per owner, no token's watches
#: can use up another's room on the name (docs/operations.md, "Prefix watches").
MAX_WATCHES_PER_SEMAPHORE: Final = 1_000

#: The most owners and waiters a watch firing lists, by default
#: (``EngineState.max_listed_per_firing``; ``tenure serve --max-listed-per-firing``).
#: A watch armed by a describe that lists them fires with them listed, built in the
#: step of whoever changed the semaphore: past this many (owners and waiters, as the
#: watch asked), the firing carries no description (nil: docs/protocol.md section 8)
#: and its watcher describes the semaphore itself, in a request of its own. So one
#: change's firings cost at most this much listing, however big the group and
#: whoever armed them (docs/operations.md, "Watches that list").
MAX_LISTED_PER_FIRING: Final = 1_000

#: The most broken deadlocks a node's description shows (the latest; the engine keeps
#: no more of them).
MAX_DEADLOCKS_SHOWN: Final = 8

#: The most waits of a cycle its text names (DeadlockError's message, a broken
#: deadlock's ``cycle``): the first ones from the refused request; a longer cycle's
#: text says how many more there are and how long it is.
MAX_DEADLOCK_LINKS: Final = 4

#: The most UTF-8 bytes of a semaphore's name a cycle's text shows (a longer name is
#: cut there, followed by ``...``). With :data:`MAX_DEADLOCK_LINKS`, a cycle's text is
#: at most about 1.5 KB (a few hundred bytes with plain names), and a node's broken
#: deadlocks at most :data:`MAX_DEADLOCKS_SHOWN` times that, however long the cycle
#: and its names.
MAX_DEADLOCK_NAME_BYTES: Final = 64

#: Longest node or semaphore name, in UTF-8 bytes.
MAX_NAME_BYTES: Final = 1024

#: Longest key of a node's annex, in UTF-8 bytes (checked like a name otherwise).
MAX_ANNEX_KEY_BYTES: Final = 64

#: Largest value one key of a node's annex holds, in bytes.
MAX_ANNEX_BYTES: Final = 4096

#: Most keys one node's annex holds. With the two limits above, a node's annex is at
#: most about 65 KiB: small enough for any snapshot, journal record and reply frame.
MAX_ANNEX_KEYS: Final = 16

#: Longest session description, in UTF-8 bytes.
MAX_DESCRIPTION_BYTES: Final = 1024

#: Largest process id a client identity carries (fits the wire's 32-bit field).
MAX_PID: Final = 2**32 - 1

#: Most entries one page of a listing (list_nodes, list_semaphores, list_sessions)
#: returns, so that no reply outgrows a frame.
MAX_PAGE: Final = 10_000

#: Longest recovery window a node or a session accepts, in seconds.
MAX_RECOVERY_WINDOW: Final = 24 * 3600.0
