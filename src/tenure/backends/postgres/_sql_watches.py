"""PL/pgSQL of watches, and of the lock a semaphore's creation takes (version 3).

A change of a semaphore notifies ``s<name>`` only when a watch of it is
registered (a row of ``watches``), or a prefix watch of a prefix of its name (a
row of ``prefix_watches``, version 5): :func:`watched` says which, one index probe
of each table (and one comparison per prefix watch of the node). A NOTIFY takes a
lock of the whole database that its transaction holds until its commit is flushed,
so notifying every grant and release made every change of every client wait for one
WAL flush each.

Why no watched change is missed: ``watch`` registers the row, then locks what a
change locks before it looks for that row. A change of an existing semaphore
holds its row ``FOR UPDATE``; one that creates it holds the node's row (shared,
:func:`room_for_semaphore`) before it inserts. ``watch`` takes the node's row
exclusively and the semaphore's ``FOR SHARE``. If a change took its lock first,
``watch`` waits for its commit, so the watch's first read (after ``watch``
commits) sees it; if ``watch`` did, the change waits for it, and its look for
watches (a later statement, so a later snapshot under READ COMMITTED) finds the row.

``watch_prefix`` does the same for every name under its prefix: it registers its
row, then takes the node's row exclusively (against creations) and every semaphore
under the prefix ``FOR SHARE`` (against changes of existing ones), so a change
either finds the registration or is committed before the watcher lists the prefix.

``@S`` stands for the quoted schema (:mod:`._ddl`).
"""

from __future__ import annotations

from typing import Final

__all__ = ["WATCH_FUNCTIONS"]

WATCH_FUNCTIONS: Final = r"""
-- Room for one more semaphore on the node (max_semaphores), and the node row's lock
-- that a watch's registration waits for. Far from the limit the lock is shared, so
-- creations do not wait for each other's commits: this transaction counted fewer
-- than p_max - max_connections semaphores under it, and no exclusive holder can
-- come between; the creations it could not see are those of transactions holding
-- the shared lock with it, at most one per other connection. Near the limit the
-- lock is exclusive and the count exact.
CREATE OR REPLACE FUNCTION @S.room_for_semaphore(p_node text, p_max bigint) RETURNS void
LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    far bigint := p_max - current_setting('max_connections')::bigint;
BEGIN
    IF far > 0 AND (SELECT count(*) FROM (SELECT 1 FROM semaphores WHERE node = p_node
                                          LIMIT far) x) < far THEN
        PERFORM 1 FROM nodes WHERE name = p_node FOR SHARE;
        IF (SELECT count(*) FROM (SELECT 1 FROM semaphores WHERE node = p_node
                                  LIMIT far) x) < far THEN
            RETURN;
        END IF;
        -- Near the limit since the first count: a shared lock made exclusive would
        -- deadlock with others doing the same. Rolled back and sent again by the
        -- client (40001), whose first count then takes the exclusive path.
        RAISE EXCEPTION USING ERRCODE = '40001',
            MESSAGE = format('node %L neared max_semaphores: counting again', p_node);
    END IF;
    PERFORM 1 FROM nodes WHERE name = p_node FOR NO KEY UPDATE;
    IF (SELECT count(*) FROM semaphores WHERE node = p_node) >= p_max THEN
        PERFORM fail('TN413', format('max_semaphores (%s) reached on node %L', p_max, p_node));
    END IF;
END $$;

-- Whether a change of p_name must notify s<p_name>: a watch of it, or of a prefix of
-- it, is registered. Both the name's watches and the node's prefix watches are found
-- by an index; with no prefix watch on the node, the second costs one probe.
CREATE OR REPLACE FUNCTION @S.watched(p_node text, p_name text) RETURNS boolean
LANGUAGE sql STABLE SET search_path = @S, pg_catalog AS $$
    SELECT EXISTS (SELECT 1 FROM watches WHERE node = p_node AND name = p_name)
        OR EXISTS (SELECT 1 FROM prefix_watches
                   WHERE node = p_node AND starts_with(p_name, prefix))
$$;

-- Register prefix watch p_watch of p_prefix before the watcher lists it (module
-- docstring): its row, then the node's row exclusively and every semaphore under the
-- prefix shared (in name order, as every transaction that takes several of them).
-- Refused past p_max prefix watches on the node (max_prefix_watches_per_node, the
-- client's: every change of the node compares its name with each, in watched()),
-- counted under the node's row, so two armings at once are counted one after the other.
CREATE OR REPLACE FUNCTION @S.watch_prefix(
    p_sid bigint, p_secret bytea, p_seq int, p_prefix text, p_watch bigint, p_max bigint
) RETURNS void LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    s sessions := live(p_sid, p_secret, p_seq);
BEGIN
    INSERT INTO prefix_watches VALUES (s.node, p_prefix, p_sid, p_watch) ON CONFLICT DO NOTHING;
    PERFORM 1 FROM nodes WHERE name = s.node FOR NO KEY UPDATE;
    IF (SELECT count(*) FROM prefix_watches WHERE node = s.node) > p_max THEN
        PERFORM fail('TN413', format('max_prefix_watches_per_node (%s) reached on node %L',
            p_max, s.node));
    END IF;
    PERFORM 1 FROM semaphores
    WHERE node = s.node AND starts_with(name COLLATE "C", p_prefix)
    ORDER BY name COLLATE "C" FOR SHARE;
END $$;

-- The prefix watch was closed (a row left behind costs notifications nobody hears,
-- until its session ends).
CREATE OR REPLACE FUNCTION @S.unwatch_prefix(
    p_sid bigint, p_secret bytea, p_watch bigint
) RETURNS void LANGUAGE sql SET search_path = @S, pg_catalog AS $$
    DELETE FROM prefix_watches w USING sessions x
    WHERE x.id = p_sid AND x.secret = p_secret AND w.sid = p_sid AND w.node = x.node
        AND w.watch = p_watch
$$;

-- Register watch p_watch of p_name before its first read (module docstring).
CREATE OR REPLACE FUNCTION @S.watch(
    p_sid bigint, p_secret bytea, p_seq int, p_name text, p_watch bigint
) RETURNS void LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    s sessions := live(p_sid, p_secret, p_seq);
BEGIN
    INSERT INTO watches VALUES (s.node, p_name, p_sid, p_watch) ON CONFLICT DO NOTHING;
    PERFORM 1 FROM nodes WHERE name = s.node FOR NO KEY UPDATE;
    PERFORM 1 FROM semaphores WHERE node = s.node AND name = p_name FOR SHARE;
END $$;

-- The watch was closed. A row left behind (the call failed) costs only
-- notifications nobody hears, until its session ends (end_session deletes it).
CREATE OR REPLACE FUNCTION @S.unwatch(
    p_sid bigint, p_secret bytea, p_name text, p_watch bigint
) RETURNS void LANGUAGE sql SET search_path = @S, pg_catalog AS $$
    DELETE FROM watches w USING sessions x
    WHERE x.id = p_sid AND x.secret = p_secret AND w.sid = p_sid AND w.node = x.node
        AND w.name = p_name AND w.watch = p_watch
$$;
"""
