"""The layout of an engine snapshot: its version, its flat lists' widths, and their history.

Layout (version 4): a server restarts by loading one of these, so it is made to
load fast. Sessions, and each node's semaphores, owners and waiters, are *flat*
lists of fields (``SESSION_FIELDS`` values per session, and so on), rather than a
list or dict per object: msgpack then makes no container per lock, and loading
walks each list once. A semaphore's fields end with how many of the owners and
waiters lists that follow are its own. ``missed`` holds what each session keeps of
the endings it did not cause (:attr:`tenure._core.state.Session.missed`),
``MISSED_FIELDS`` values each (new in version 3). Version 4 adds the hold number
to owners, waiters and missed endings (a session may hold a semaphore more than
once). Version 5 adds each session's client identity (host, pid, name) and
creation time, each owner's grant time and each waiter's queue time. Version 6
adds each node's annex (``"annex"``: key -> bytes, only on a node that has one;
absent: none); the version changed so that an older server refuses such a snapshot
instead of loading it without the annex. Version 7 adds each waiter's arrival
number and the timeout it asked for, and the engine's last arrival number
(``last_order``). Version 8 adds each node's all-or-none sets (under ``"groups"``,
the sets' old name, kept for the snapshots written with it: the sets queued, each
its arrival number, its session, then a name and a hold number per semaphore; only
on a node that has one), and changed so that an older server refuses such a
snapshot rather than serve a set's members one by one. Version 9
adds the client's task number of each owner and waiter (``"tasks"``: ``[owner
tasks, waiter tasks]``, two lists parallel to ``owners`` and ``waiters``; only on a
node where one is not 0: deadlock detection reads them) and each node's live claims
(``"claims"``: per claim its semaphore's name, id, token, and the engine times its
``at_least`` and its end fall at, flat, ``CLAIM_FIELDS`` values each; only on a node
that has one; :mod:`tenure._core.claims`), and changed so that an older server
refuses such a snapshot rather than keep its claims forever. Version 10 adds who
owns each session, node and semaphore (``"owners"``: flat lists of ``sessions``
(id, owner), ``nodes`` (name, owner) and ``semaphores`` (node, name, owner), only
of those whose owner is a token; :mod:`tenure._core.ownership`), and changed so
that an older server refuses such a snapshot rather than forget whose they are (and
so the quotas). Version 11 adds each node's max_holds (``"max_holds"``: ``[owner
ends, waiter bounds]``, two lists parallel to ``owners`` and ``waiters``: each
owner's end in engine time and each waiter's max_hold in seconds, nil where there
is none; only on a node where one is set), and changed so that an older server
refuses such a snapshot rather than let a bounded grant outlive its bound. Version
12 keeps each session's protection key as its SHA-256 digest
(:func:`tenure._core.session.digest_key`) where the key was, and changed so that an
older server refuses such a snapshot rather than take a digest for a key; versions 1
to 11 hold the keys themselves, and load with each hashed. Version 13 adds the
nodes frozen for a move between cells (``"moving"``: per node its name, the other
cell's and the engine time it froze; only when one is; :mod:`tenure._core.node_moves`),
and changed so that an older server refuses such a snapshot rather than serve a node
another cell may be serving already. Any
version may carry each node's hand-off offers (``"offers"``: per offered hold its
semaphore's name, session id, hold number and the digest of its secret, flat; only
on a node that has one; :mod:`tenure._core.handlers.handoffs`): added without a new
version, since a server that ignores them only makes the outstanding hand-off
strings fail to adopt (a clear LeaseLostError), never a hold wrong. Any version may
carry a node's ``long_hold`` setting in its ``"config"`` (the stored names of
:mod:`tenure._core.stored_config`, which leave it out while it is None, as they do
``max_hold``): added without a new version, since a node that does not set it reads
as before, and an older server refuses a snapshot with a node that does (a setting
it does not know: malformed) rather than drop it. Versions 1 to 10
load with no max_hold. Versions 1 to 9 load with every object nobody's. Versions 1
(a dict per semaphore), 2 and 3 still load, every hold 0; versions 1 to 4 load with no
identities and every time at the snapshot's ``now``; versions 1 to 5 load with no
annex; versions 1 to 7 with no sets; versions 1 to 8 with every task 0 (not known:
no deadlock is found through them) and no claims; versions 1 to 6 number their
waiters 1, 2, 3... in the order the snapshot lists them (each queue's in its order),
each with the timeout its deadline was set from (a deadline less the time it was
queued: no older version restated a wait).
"""

from __future__ import annotations

from typing import Any

#: Bumped when the layout changes; :func:`load` refuses layouts it does not know.
SNAPSHOT_VERSION = 13

#: Values per object in the flat lists (see the module docstring).
# id, node, timeout, description, protection key (its digest since version 12),
# seq_no, expires_at, host, pid, client name, created_at (the last four new in version 5)
SESSION_FIELDS = 11
SEMAPHORE_FIELDS = 7  # name, limit, data, ephemeral, blocked_until, #owners, #waiters
# session id, count, data, token, lease ttl, lease deadline, hold, since (version 5)
OWNER_FIELDS = 8
# session id, request id, count, data, deadline, lease ttl, hold, since (version 5),
# order, timeout (version 7)
WAITER_FIELDS = 10
#: Widths before version 7 (no arrival numbers) and before version 5 (no times).
V6_WAITER_FIELDS = 8
V4_SESSION_FIELDS, V4_OWNER_FIELDS, V4_WAITER_FIELDS = 7, 7, 7
CLAIM_FIELDS = 5  # name, id, token, least_until, ends_at (version 9)
MISSED_FIELDS = 7  # session id, kind (1 failed, 2 lost), name, id, code, message, hold
#: The kinds of a missed ending: an acquire that failed, a lease lost.
MISSED_FAILED, MISSED_LOST = 1, 2

Plain = dict[str, Any]
