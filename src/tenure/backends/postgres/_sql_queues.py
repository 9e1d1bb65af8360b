"""PL/pgSQL that serves queues: ``settle``, all-or-none requests, and the order of locks.

**All-or-none sets** (``acquire_all``, :mod:`._sql_sets`) wait in several
queues at once: a waiter row per member, sharing one arrival (``grp``) and placed
in the order of the request's names (``grp_place``). ``settle`` restates
:func:`tenure._core.shared_steps.settle`: a head that is a member is granted
only if every member heads its queue and fits there, and then all at once (in the
order of the names), the other members' queues served after; a member that cannot
go holds its queue back as any head does. ``withdraw_group`` restates
:func:`~tenure._core.shared_steps.withdraw_set`: a member that leaves its
queue takes the others with it. The column names ``grp`` and ``grp_place``, the
functions ``group_ready`` and ``withdraw_group`` and the indexes ``waiters_grouped``
and ``waiters_group`` keep the sets' old name: they are the database's, made by the
schemas in use (a migration replaces functions, never drops one).
Whatever grants or withdraws a request holds the rows of every member's semaphore
before it commits, so under one of them a request's members stay as they are.

**No cycle of waits.** Serving one queue may grant a request that waits in another,
whose semaphore's row must be locked too, possibly one named before a row already
held: waiting for it could close a cycle with a transaction that holds it and waits
for ours. So a transaction waits for a semaphore's row only while every row it
holds is named before it: its first lock statement (``lock_semaphores``, which
locks a set of rows in name order in one statement, or one row), and, holding one
row only, rows named after it (``lock_semaphore``). Any other row it locks with ``NOWAIT``
(``lock_also``): if another transaction holds it, this one fails with
``lock_not_available`` (55P03), is rolled back whole, and the client sends it again
(:mod:`tenure.backends.postgres._calls`). Every wait is then for a row named after
each row its waiter holds, so no chain of waits comes back to where it started.
To make those retries rare, the first lock statement takes, with the rows it
needs, those of the semaphores its queues' all-or-none requests wait on too
(whose grant or withdrawal it may come to). The node's row (``room_for_semaphore``)
is waited for only before any semaphore's (``watch`` holds it while it waits for
one), and the session's before both.
"""

from __future__ import annotations

from typing import Final

__all__ = ["QUEUE_FUNCTIONS"]

QUEUE_FUNCTIONS: Final = r"""
-- The first lock of a transaction that may serve queues: the rows of p_names and of
-- the semaphores the all-or-none requests waiting in their queues wait on too, in
-- name order, in one statement (sorted, then locked: it waits only for a row named
-- after every row it holds). Missing names are skipped.
CREATE OR REPLACE FUNCTION @S.lock_semaphores(p_node text, p_names text[])
RETURNS void LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
BEGIN
    PERFORM 1 FROM semaphores
    WHERE node = p_node AND name IN (
        SELECT unnest(p_names)
        UNION
        SELECT m.name FROM waiters g
        JOIN waiters m ON m.node = g.node AND m.sid = g.sid AND m.grp = g.grp
        WHERE g.node = p_node AND g.name = ANY (p_names) AND g.grp IS NOT NULL)
    ORDER BY name FOR UPDATE;
END $$;

-- lock_semaphores of one name (most calls: no all-or-none request waits there, and one
-- row is locked as before); whether the semaphore exists.
CREATE OR REPLACE FUNCTION @S.lock_semaphore(p_node text, p_name text)
RETURNS boolean LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    in_sets boolean := EXISTS (SELECT 1 FROM waiters WHERE node = p_node AND name = p_name
                                                       AND grp IS NOT NULL);
BEGIN
    IF in_sets THEN
        PERFORM lock_semaphores(p_node, ARRAY[p_name]);
    END IF;
    PERFORM 1 FROM semaphores WHERE node = p_node AND name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF NOT in_sets AND EXISTS (SELECT 1 FROM waiters WHERE node = p_node AND name = p_name
                               AND grp IS NOT NULL) THEN
        -- One joined while this waited: holding this row only, it may wait for the
        -- rows named after it (those before, lock_also tries if it comes to them).
        PERFORM 1 FROM semaphores
        WHERE node = p_node AND name > p_name AND name IN (
            SELECT m.name FROM waiters g
            JOIN waiters m ON m.node = g.node AND m.sid = g.sid AND m.grp = g.grp
            WHERE g.node = p_node AND g.name = p_name AND g.grp IS NOT NULL)
        ORDER BY name FOR UPDATE;
    END IF;
    RETURN true;
END $$;

-- Another semaphore's row, locked while this transaction holds some: never waited
-- for (module docstring); held by another transaction, this one fails (55P03) and
-- its client sends it again. A row this transaction holds is locked at once.
CREATE OR REPLACE FUNCTION @S.lock_also(p_node text, p_name text)
RETURNS void LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
BEGIN
    PERFORM 1 FROM semaphores WHERE node = p_node AND name = p_name FOR UPDATE NOWAIT;
END $$;

-- Grant a queued request whose semaphore is locked: its hold gets a new token (an
-- upgrade replaces the hold: a new token, at the back of grant order), its waiter row
-- goes, and only its client is woken (its waiters read their grants), not every waiter
-- of the semaphore. p_ttl: the node's default_lease (NULL: as long as the session).
-- A grant with an end (its max_hold, the node's: grant_end) is a new deadline of the
-- node: its clients are told to reap ('t'), and so arm a timer for it.
CREATE OR REPLACE FUNCTION @S.grant_waiter(w @S.waiters, p_ttl float8)
RETURNS void LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    ends timestamptz;
BEGIN
    ends := grant_end(w.node, w.max_hold, (SELECT ends_at FROM owners
        WHERE node = w.node AND name = w.name AND sid = w.sid AND hold = w.hold));
    DELETE FROM owners
    WHERE node = w.node AND name = w.name AND sid = w.sid AND hold = w.hold;
    INSERT INTO owners (node, name, sid, hold, cnt, data, token, request_id, lease_ttl,
                        lease_deadline, granted_at, ends_at)
    VALUES (w.node, w.name, w.sid, w.hold, w.cnt, w.data, next_token(),
                               w.request_id, p_ttl,
                               least(clock_timestamp() + make_interval(secs => p_ttl), ends),
                               clock_timestamp(), ends);
    DELETE FROM waiters
    WHERE node = w.node AND name = w.name AND sid = w.sid AND hold = w.hold;
    PERFORM pg_notify(channel(w.node), 'g' || w.sid);
    IF ends IS NOT NULL THEN
        PERFORM pg_notify(channel(w.node), 't');
    END IF;
END $$;

-- Whether all-or-none set p_grp of session p_sid can be granted now: each member
-- heads its queue (nothing arrived before it there) and fits (EngineState._ready_set).
-- Its member in p_name's queue is the caller's, found so; the others' rows are locked
-- here (lock_also).
CREATE OR REPLACE FUNCTION @S.group_ready(p_node text, p_sid bigint, p_grp bigint,
                                          p_name text)
RETURNS boolean LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    m waiters;
    sem semaphores;
    total numeric;
    held numeric;
BEGIN
    FOR m IN SELECT * FROM waiters WHERE node = p_node AND sid = p_sid AND grp = p_grp
             ORDER BY grp_place
    LOOP
        CONTINUE WHEN m.name = p_name;
        PERFORM lock_also(p_node, m.name);
        SELECT * INTO sem FROM semaphores WHERE node = p_node AND name = m.name;
        IF coalesce(sem.blocked_until > clock_timestamp(), false)
           OR EXISTS (SELECT 1 FROM waiters WHERE node = p_node AND name = m.name
                      AND arrival < m.arrival) THEN
            RETURN false;
        END IF;
        SELECT coalesce(sum(cnt), 0),
               coalesce(sum(cnt) FILTER (WHERE sid = m.sid AND hold = m.hold), 0)
        INTO total, held FROM owners WHERE node = p_node AND name = m.name;
        IF total - held + m.cnt > sem.lim THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN true;
END $$;

-- Serve the queue of a semaphore its caller has locked (EngineState.settle): grant from
-- the head for as long as the head fits (nobody behind it is granted while it does
-- not: FIFO), a member of an all-or-none request only with all its members; drop an
-- idle ephemeral semaphore; tell listeners when anything changed; then serve the
-- queues of the other members granted, in turn.
CREATE OR REPLACE FUNCTION @S.settle(p_node text, p_name text, p_changed boolean)
RETURNS void LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    sem semaphores;
    w waiters;
    m waiters;
    total numeric;
    held numeric;
    holders bigint;
    ttl float8;
    others text[] := '{}';
    other text;
BEGIN
    SELECT * INTO sem FROM semaphores WHERE node = p_node AND name = p_name;
    IF FOUND AND sem.blocked_until > clock_timestamp() THEN
        NULL;  -- lock-delay: nothing is granted (nor an idle ephemeral dropped) yet
    ELSIF FOUND THEN
        SELECT coalesce(sum(cnt), 0), count(*) INTO total, holders FROM owners
        WHERE node = p_node AND name = p_name;
        -- Nobody queued (most calls): no cursor over the queue.
        IF EXISTS (SELECT 1 FROM waiters WHERE node = p_node AND name = p_name) THEN
            -- NULL: as long as the session.
            ttl := (config(p_node) ->> 'default_lease')::float8;
            FOR w IN SELECT * FROM waiters WHERE node = p_node AND name = p_name ORDER BY arrival
            LOOP
                SELECT cnt INTO held FROM owners
                WHERE node = p_node AND name = p_name AND sid = w.sid AND hold = w.hold;
                held := coalesce(held, 0);
                EXIT WHEN total - held + w.cnt > sem.lim;
                IF w.grp IS NULL THEN
                    PERFORM grant_waiter(w, ttl);
                ELSE
                    EXIT WHEN NOT group_ready(p_node, w.sid, w.grp, p_name);
                    FOR m IN SELECT * FROM waiters
                             WHERE node = p_node AND sid = w.sid AND grp = w.grp
                             ORDER BY grp_place
                    LOOP
                        PERFORM grant_waiter(m, ttl);
                        IF m.name <> p_name THEN
                            others := others || m.name;
                        END IF;
                    END LOOP;
                END IF;
                total := total - held + w.cnt;
                p_changed := true;
                holders := holders + 1;  -- says only whether anyone holds
            END LOOP;
        END IF;
        IF sem.ephemeral AND holders = 0
           AND NOT EXISTS (SELECT 1 FROM waiters WHERE node = p_node AND name = p_name) THEN
            DELETE FROM semaphores WHERE node = p_node AND name = p_name;
            p_changed := true;
        END IF;
    END IF;
    -- Only for a registered watch of the name or of a prefix of it (watch() and
    -- watch_prefix(), which lock what a change locks first, so a change either sees
    -- its row here or is committed before its first read):
    -- a NOTIFY holds a database-wide lock until the commit is flushed.
    IF p_changed AND watched(p_node, p_name) THEN
        PERFORM pg_notify(channel(p_node), 's' || p_name);
    END IF;
    FOREACH other IN ARRAY others LOOP  -- their heads changed: serve them too
        PERFORM settle(p_node, other, true);
    END LOOP;
END $$;

-- A member of all-or-none set p_grp (NULL: a request of one semaphore, nothing to
-- do) of session p_sid left its queue, removed by the caller, who holds its semaphore:
-- the others leave theirs too (EngineState.withdraw_set), all before any queue is
-- served, so none of them is granted. Each ends with outcome p_code for its client to
-- read (NULL: none, the client withdrew it itself), and their queues are served in
-- the order of the request's names.
CREATE OR REPLACE FUNCTION @S.withdraw_group(p_node text, p_sid bigint, p_grp bigint,
                                             p_code text, p_message text)
RETURNS void LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    names text[];
    member text;
BEGIN
    IF p_grp IS NULL THEN
        RETURN;
    END IF;
    SELECT array_agg(name ORDER BY grp_place) INTO names FROM waiters
    WHERE node = p_node AND sid = p_sid AND grp = p_grp;
    IF names IS NULL THEN
        RETURN;
    END IF;
    FOREACH member IN ARRAY names LOOP
        PERFORM lock_also(p_node, member);
    END LOOP;
    IF p_code IS NOT NULL THEN
        INSERT INTO outcomes
        SELECT sid, node, name, hold, request_id, p_code, p_message FROM waiters
        WHERE node = p_node AND sid = p_sid AND grp = p_grp
        ON CONFLICT (sid, node, name, hold) DO UPDATE
            SET request_id = excluded.request_id, code = excluded.code,
                message = excluded.message;
        PERFORM pg_notify(channel(p_node), 'g' || p_sid);  -- its client reads why
    END IF;
    DELETE FROM waiters WHERE node = p_node AND sid = p_sid AND grp = p_grp;
    FOREACH member IN ARRAY names LOOP
        PERFORM settle(p_node, member, true);
    END LOOP;
END $$;

-- End a session (expired, closed, dropped, killed) as EngineState's end_session does:
-- every wait withdrawn (so every all-or-none request of it leaves whole), every hold
-- released (a failed holder's with lock-delay), then the queues it waited in served
-- and those it only held, each in name order; and say so. Its semaphores are locked
-- first, in name order (lock_semaphores); p_nowait when the caller holds rows already
-- (reap, which locked them in the same statement as its own).
CREATE OR REPLACE FUNCTION @S.finish_session(p_sid bigint, p_reason text, p_nowait boolean)
RETURNS void LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    s sessions;
    waited text[];
    held text[];
    touched text[];
    item text;
    delay float8;
BEGIN
    UPDATE sessions SET ended = p_reason, ended_at = clock_timestamp()
    WHERE id = p_sid AND ended IS NULL RETURNING * INTO s;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    delay := coalesce((config(s.node) ->> 'lock_delay')::float8, 0);
    -- Its rows change no more (its calls share-lock it; grants by others change a
    -- wait into a hold of the same semaphore): what it touches is known before the
    -- locks, and read again under them.
    SELECT array_agg(x.name) INTO touched FROM (
        SELECT name FROM owners WHERE sid = p_sid
        UNION SELECT name FROM waiters WHERE sid = p_sid) x;
    IF touched IS NULL THEN
        touched := '{}';
    ELSIF p_nowait THEN
        FOREACH item IN ARRAY touched LOOP
            PERFORM lock_also(s.node, item);
        END LOOP;
    ELSE
        PERFORM lock_semaphores(s.node, touched);
    END IF;
    SELECT array_agg(DISTINCT name ORDER BY name) INTO waited FROM waiters WHERE sid = p_sid;
    SELECT array_agg(DISTINCT name ORDER BY name) INTO held FROM owners WHERE sid = p_sid;
    DELETE FROM waiters WHERE sid = p_sid;
    FOREACH item IN ARRAY coalesce(held, '{}') LOOP
        DELETE FROM owners WHERE node = s.node AND name = item AND sid = p_sid;
        -- A holder that failed (expired, or ended by an operator as if it had; not
        -- closed) holds the semaphore back for the node's lock_delay (Chubby's
        -- lock-delay), on the database's clock.
        IF p_reason IN ('expired', 'killed') AND delay > 0 THEN
            UPDATE semaphores SET blocked_until = greatest(
                coalesce(blocked_until, clock_timestamp()),
                clock_timestamp() + make_interval(secs => delay))
            WHERE node = s.node AND name = item;
        END IF;
    END LOOP;
    waited := coalesce(waited, '{}');
    FOREACH item IN ARRAY waited || array(SELECT x FROM unnest(held) x
                                          WHERE x <> ALL (waited) ORDER BY x)
    LOOP
        PERFORM settle(s.node, item, true);
    END LOOP;
    DELETE FROM outcomes WHERE sid = p_sid;
    DELETE FROM watches WHERE sid = p_sid;
    DELETE FROM prefix_watches WHERE sid = p_sid;
    PERFORM pg_notify(channel(s.node), 'x' || p_sid);
END $$;

-- End a session whose caller holds no semaphore's row (heartbeat, close, kill).
CREATE OR REPLACE FUNCTION @S.end_session(p_sid bigint, p_reason text)
RETURNS void LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
BEGIN
    PERFORM finish_session(p_sid, p_reason, false);
END $$;
"""
