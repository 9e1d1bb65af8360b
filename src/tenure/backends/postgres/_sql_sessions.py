"""PL/pgSQL of nodes and sessions: one function per operation, one round trip each.

Expiry is judged by ``clock_timestamp()`` on the database. Clients only *trigger*
it: ``reap(node)`` ends what the database's clock says is due (a bounded batch)
and answers when the next deadline comes, and each client with sessions on the
node calls it by a timer at that moment (:mod:`tenure.backends.postgres._reaper`).

A node's ``config`` jsonb keeps the setting names it was first stored with:
``session_timeout`` is NodeConfig's ``recovery_window`` (see
:mod:`tenure._core.stored_config`), and ``create_session`` reads it by that name.
"""

from __future__ import annotations

from typing import Final

__all__ = ["SESSION_FUNCTIONS"]

SESSION_FUNCTIONS: Final = r"""
CREATE OR REPLACE FUNCTION @S.create_node(p_name text, p_config jsonb) RETURNS void
LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
BEGIN
    INSERT INTO nodes (name, config) VALUES (p_name, p_config) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        PERFORM fail('TN409', format('node %L already exists', p_name));
    END IF;
END $$;

CREATE OR REPLACE FUNCTION @S.describe_node(p_name text) RETURNS jsonb
LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    n nodes;
BEGIN
    SELECT * INTO n FROM nodes WHERE name = p_name;
    IF NOT FOUND THEN
        PERFORM fail('TN404', format('node %L does not exist', p_name));
    END IF;
    RETURN jsonb_build_object(
        'config', n.config, 'version', n.version,
        'sessions', (SELECT count(*) FROM sessions
                     WHERE node = p_name AND ended IS NULL AND deadline >= clock_timestamp()),
        'semaphores', (SELECT count(*) FROM semaphores WHERE node = p_name));
END $$;

-- Compare-and-set of the settings (the client validates the new ones).
CREATE OR REPLACE FUNCTION @S.alter_node(p_name text, p_config jsonb, p_version bigint)
RETURNS boolean LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
BEGIN
    UPDATE nodes SET config = p_config, version = version + 1
    WHERE name = p_name AND version = p_version;
    IF FOUND THEN
        PERFORM pg_notify(channel(p_name), 'n');
    END IF;
    RETURN FOUND;
END $$;

CREATE OR REPLACE FUNCTION @S.drop_node(p_name text, p_force boolean) RETURNS void
LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    live bigint;
BEGIN
    PERFORM 1 FROM nodes WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM fail('TN404', format('node %L does not exist', p_name));
    END IF;
    SELECT count(*) INTO live FROM sessions
    WHERE node = p_name AND ended IS NULL AND deadline >= clock_timestamp();
    IF live > 0 AND NOT p_force THEN
        PERFORM fail('TN412', format('node %L has %s live session(s); use force=True',
                                     p_name, live));
    END IF;
    -- Waits for every operation of the node's sessions in flight (they share-lock
    -- their session); after it, they find their session ended.
    UPDATE sessions SET ended = 'dropped', ended_at = clock_timestamp()
    WHERE node = p_name AND ended IS NULL;
    DELETE FROM owners WHERE node = p_name;
    DELETE FROM waiters WHERE node = p_name;
    DELETE FROM outcomes WHERE node = p_name;
    DELETE FROM watches WHERE node = p_name;
    DELETE FROM prefix_watches WHERE node = p_name;
    DELETE FROM claims WHERE node = p_name;
    DELETE FROM claim_locks WHERE node = p_name;
    DELETE FROM semaphores WHERE node = p_name;
    DELETE FROM nodes WHERE name = p_name;
    PERFORM pg_notify(channel(p_name), 'n');
END $$;

-- Version 2 takes the client's identity too (the version-1 function of four
-- arguments stays for clients of that version still running: its sessions have none).
CREATE OR REPLACE FUNCTION @S.open_session(
    p_node text, p_secret bytea, p_window float8, p_description text,
    p_host text, p_pid bigint, p_client_name text
) RETURNS jsonb LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    cfg jsonb;
    win float8;
    live bigint;
    new_id bigint;
BEGIN
    -- The node row's lock makes the count and the insert one step for max_sessions.
    SELECT config INTO cfg FROM nodes WHERE name = p_node FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        PERFORM fail('TN404', format('node %L does not exist', p_node));
    END IF;
    win := coalesce(p_window, (cfg ->> 'session_timeout')::float8);
    SELECT count(*) INTO live FROM sessions
    WHERE node = p_node AND ended IS NULL AND deadline >= clock_timestamp();
    IF live >= (cfg ->> 'max_sessions')::bigint THEN
        PERFORM fail('TN413', format('max_sessions (%s) reached on node %L',
                                     cfg ->> 'max_sessions', p_node));
    END IF;
    INSERT INTO sessions (node, secret, win, description, deadline, host, pid, client_name,
                          created_at)
    VALUES (p_node, p_secret, win, p_description,
            clock_timestamp() + make_interval(secs => win * 1.02), p_host, p_pid,
            p_client_name, clock_timestamp())
    RETURNING id INTO new_id;
    RETURN jsonb_build_object('id', new_id, 'window', win, 'next', next_due(p_node));
END $$;

-- The client is alive: move the session's deadline a window (2% long: the client
-- gives up a window after it *sent* this) past now. A session already past its
-- deadline is ended here, by the database's clock, and the answer says so.
CREATE OR REPLACE FUNCTION @S.heartbeat(p_sid bigint, p_secret bytea, p_seq int)
RETURNS jsonb LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    s sessions;
BEGIN
    SELECT * INTO s FROM sessions WHERE id = p_sid FOR NO KEY UPDATE;
    IF NOT FOUND OR s.secret <> p_secret THEN
        RETURN jsonb_build_object('ended', 'expired');
    ELSIF s.ended IS NOT NULL THEN
        RETURN jsonb_build_object('ended', s.ended);
    ELSIF s.seq <> p_seq THEN
        RETURN jsonb_build_object('ended', 'taken');
    ELSIF s.deadline < clock_timestamp() THEN
        PERFORM end_session(p_sid, 'expired');
        RETURN jsonb_build_object('ended', 'expired');
    END IF;
    UPDATE sessions SET deadline = clock_timestamp() + make_interval(secs => win * 1.02)
    WHERE id = p_sid;
    RETURN jsonb_build_object('next', next_due(s.node));
END $$;

CREATE OR REPLACE FUNCTION @S.close_session(p_sid bigint, p_secret bytea, p_seq int)
RETURNS void LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
BEGIN
    PERFORM 1 FROM sessions WHERE id = p_sid AND secret = p_secret AND seq = p_seq
    FOR NO KEY UPDATE;
    IF FOUND THEN
        PERFORM end_session(p_sid, 'closed');
    END IF;
END $$;

-- Take back a live session from a ticket: bump its fence (the old client is
-- refused from now on and hears so), withdraw its waits, keep its holds.
CREATE OR REPLACE FUNCTION @S.resume_session(p_sid bigint, p_secret bytea, p_node text)
RETURNS jsonb LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    s sessions;
    sem record;
    waited text[];
BEGIN
    SELECT * INTO s FROM sessions WHERE id = p_sid FOR NO KEY UPDATE;
    IF NOT FOUND OR s.secret <> p_secret OR s.node <> p_node THEN
        PERFORM fail('TN001', format('session %s of node %L does not exist here (expired, '
                                     'closed, or a wrong ticket)', p_sid, p_node));
    ELSIF s.ended IS NOT NULL OR s.deadline < clock_timestamp() THEN
        PERFORM fail('TN001', format('session %s has ended (%s)', p_sid,
                                     coalesce(s.ended, 'expired')));
    END IF;
    UPDATE sessions SET seq = seq + 1,
        deadline = clock_timestamp() + make_interval(secs => win * 1.02)
    WHERE id = p_sid RETURNING * INTO s;
    -- Its waits go queue by queue in name order, each queue served as it goes (the
    -- engine's order); the semaphores are locked first (lock_semaphores).
    SELECT array_agg(DISTINCT name) INTO waited FROM waiters WHERE sid = p_sid;
    IF waited IS NOT NULL THEN
        PERFORM lock_semaphores(s.node, waited);
        FOR sem IN SELECT DISTINCT name FROM waiters WHERE sid = p_sid ORDER BY name LOOP
            DELETE FROM waiters WHERE node = s.node AND name = sem.name AND sid = p_sid;
            PERFORM settle(s.node, sem.name, true);
        END LOOP;
    END IF;
    DELETE FROM outcomes WHERE sid = p_sid;
    DELETE FROM watches WHERE sid = p_sid;  -- the old client's: its watches end
    DELETE FROM prefix_watches WHERE sid = p_sid;
    PERFORM pg_notify(channel(s.node), 'r' || p_sid);
    RETURN jsonb_build_object('seq', s.seq, 'window', s.win, 'description', s.description,
                              'next', next_due(s.node));
END $$;

-- End what the database's clock says is due on a node: at most one expired session,
-- 64 timed-out waiters, 64 leases past their TTL, 64 ended lock-delays and 64 ended
-- claims per call
-- (the caller calls again while 'more'; what is left is due at once in 'next').
-- What it may change is chosen first and its semaphores locked in name order in one
-- statement (lock_semaphores): the phases below lock nothing more but what serving
-- their queues may reach (lock_also); something due only since is the next call's.
CREATE OR REPLACE FUNCTION @S.reap(p_node text) RETURNS jsonb
LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    due bigint;
    w waiters;
    o owners;
    blocked record;
    c claims;
    more boolean := false;
    n int := 0;
    names text[];
BEGIN
    SELECT id INTO due FROM sessions
    WHERE node = p_node AND ended IS NULL AND deadline < clock_timestamp()
    ORDER BY deadline LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED;
    SELECT array_agg(x.name) INTO names FROM (
        SELECT name FROM owners WHERE sid = due
        UNION SELECT name FROM waiters WHERE sid = due
        UNION (SELECT name FROM waiters WHERE node = p_node AND deadline < clock_timestamp()
               ORDER BY name, arrival LIMIT 65)
        UNION (SELECT name FROM owners
               WHERE node = p_node AND lease_deadline < clock_timestamp()
               ORDER BY name LIMIT 64)
        UNION (SELECT name FROM semaphores
               WHERE node = p_node AND blocked_until <= clock_timestamp()
               ORDER BY name LIMIT 64)
        UNION (SELECT name FROM claims
               WHERE node = p_node AND ends_at <= clock_timestamp()
               ORDER BY name LIMIT 64)) x;
    IF names IS NOT NULL THEN
        PERFORM lock_semaphores(p_node, names);
    END IF;
    IF due IS NOT NULL THEN
        PERFORM finish_session(due, 'expired', true);
        more := EXISTS (SELECT 1 FROM sessions WHERE node = p_node AND ended IS NULL
                        AND deadline < clock_timestamp());
    END IF;
    FOR w IN SELECT * FROM waiters WHERE node = p_node AND deadline < clock_timestamp()
             AND name = ANY (names) ORDER BY name, arrival LIMIT 65
    LOOP
        n := n + 1;
        IF n > 64 THEN
            more := true;
            EXIT;
        END IF;
        DELETE FROM waiters WHERE node = p_node AND name = w.name AND sid = w.sid
            AND hold = w.hold AND request_id = w.request_id;
        IF FOUND THEN
            INSERT INTO outcomes VALUES (w.sid, p_node, w.name, w.hold, w.request_id,
                'timeout', 'timed out')
            ON CONFLICT (sid, node, name, hold) DO UPDATE
                SET request_id = excluded.request_id, code = excluded.code,
                    message = excluded.message;
            -- One deadline for an all-or-none request: its members time out together.
            PERFORM withdraw_group(p_node, w.sid, w.grp, 'timeout', 'timed out');
            PERFORM settle(p_node, w.name, true);
            PERFORM pg_notify(channel(p_node), 'g' || w.sid);  -- its client reads why
        END IF;
    END LOOP;
    -- Leases whose TTL ran out.
    FOR o IN SELECT * FROM owners WHERE node = p_node AND lease_deadline < clock_timestamp()
             AND name = ANY (names) ORDER BY name LIMIT 64
    LOOP
        PERFORM lease_ran_out(x) FROM owners x
        WHERE x.node = p_node AND x.name = o.name AND x.sid = o.sid AND x.hold = o.hold
            AND x.token = o.token AND x.lease_deadline < clock_timestamp();
    END LOOP;
    -- Lock-delays that ended: serve their queues (grants the waiters' clients hear).
    FOR blocked IN SELECT name FROM semaphores
                   WHERE node = p_node AND blocked_until <= clock_timestamp()
                   AND name = ANY (names) ORDER BY name LIMIT 64
    LOOP
        UPDATE semaphores SET blocked_until = NULL
        WHERE node = p_node AND name = blocked.name AND blocked_until <= clock_timestamp();
        IF FOUND THEN
            PERFORM settle(p_node, blocked.name, true);
        END IF;
    END LOOP;
    -- Claims that ended (version 5): their semaphores go (tenure._core.claims).
    FOR c IN SELECT * FROM claims WHERE node = p_node AND ends_at <= clock_timestamp()
             AND name = ANY (names) ORDER BY name LIMIT 64
    LOOP
        PERFORM claim_due(c);
    END LOOP;
    more := more OR EXISTS (SELECT 1 FROM claims WHERE node = p_node
                            AND ends_at <= clock_timestamp() AND NOT (name = ANY (names)));
    -- Ended sessions are kept an hour (a late client hears why), then go.
    DELETE FROM sessions WHERE id IN (
        SELECT id FROM sessions WHERE ended IS NOT NULL
        AND ended_at < clock_timestamp() - interval '1 hour' LIMIT 64);
    RETURN jsonb_build_object('more', more, 'next', next_due(p_node));
END $$;
"""
