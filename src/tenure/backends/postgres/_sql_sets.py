"""PL/pgSQL of all-or-none sets: ``acquire_all``, in one transaction.

It restates :func:`tenure._core.handlers.sets.acquire_all`: the names' checks in
their order (NotFound, a count above a limit, a hold or wait of the session there
already, then ``max_semaphores`` and ``max_waiters``); then every name granted at
once (a token each, in the names' order) if each is free and nobody waits there,
else busy for a timeout of 0, else a waiter row in every queue with one arrival
(``grp``), one deadline and its place among the names (``grp_place``); queues are
then served by ``settle`` (:mod:`._sql_queues`), which grants the members all at
once or not at all. (``grp`` and ``grp_place`` keep the sets' old name, "group":
they are columns of the schemas in use.)

Its locks: the session's row (``live``); if it makes ephemeral semaphores, the
node's row, exclusively (its creations are counted against ``max_semaphores``
exactly: ``room_for_semaphore``'s shared path allows one unseen creation per
connection, and this makes up to 64); then its semaphores' rows in name order in
one statement (made where missing, if ephemeral, by the same statement), so two
requests over overlapping names in any order never wait for each other in a cycle.

Its request ids (one per name, chosen by the client) make a call sent again after a
lost answer find its own rows and answer from them (``acquire_all_again``).
"""

from __future__ import annotations

from typing import Final

__all__ = ["SET_FUNCTIONS"]

SET_FUNCTIONS: Final = r"""
-- Room for p_more new semaphores on the node (max_semaphores), counted under the node
-- row's exclusive lock (which a watch's registration waits for too, _sql_watches);
-- p_nowait: taken without waiting (the caller holds semaphores' rows, and watch()
-- waits for those while it holds the node's), or failing with 55P03.
CREATE OR REPLACE FUNCTION @S.room_for_semaphores(p_node text, p_max bigint, p_more int,
                                                  p_nowait boolean)
RETURNS boolean LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
BEGIN
    IF p_nowait THEN
        PERFORM 1 FROM nodes WHERE name = p_node FOR NO KEY UPDATE NOWAIT;
    ELSE
        PERFORM 1 FROM nodes WHERE name = p_node FOR NO KEY UPDATE;
    END IF;
    RETURN (SELECT count(*) FROM semaphores WHERE node = p_node) + p_more <= p_max;
END $$;

-- The answer to an acquire_all sent again (its request ids found in the rows a first
-- call left), or NULL if none was applied. Granted: every grant. Waiting: queued (the
-- seconds left). Ended since (timed out, a semaphore deleted, a lease lost): none is
-- handed over; grants still held are released, and the answer says how one ended.
CREATE OR REPLACE FUNCTION @S.acquire_all_again(
    p_node text, p_sid bigint, p_names text[], p_holds bigint[], p_requests bigint[]
) RETURNS jsonb LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    n int := cardinality(p_names);
    owned int;
    waiting int;
    due timestamptz;
    answer jsonb;
    item text;
BEGIN
    SELECT count(o.token), count(w.arrival), min(w.deadline) INTO owned, waiting, due
    FROM unnest(p_names, p_holds, p_requests) m(name, hold, request)
    LEFT JOIN owners o ON o.node = p_node AND o.name = m.name AND o.sid = p_sid
        AND o.hold = m.hold AND o.request_id = m.request
    LEFT JOIN waiters w ON w.node = p_node AND w.name = m.name AND w.sid = p_sid
        AND w.hold = m.hold AND w.request_id = m.request;
    IF owned = n THEN
        SELECT jsonb_build_object('tokens', jsonb_agg(o.token ORDER BY m.i),
                                  'count', min(o.cnt), 'ttl', min(o.lease_ttl))
        INTO answer
        FROM unnest(p_names, p_holds, p_requests) WITH ORDINALITY m(name, hold, request, i)
        JOIN owners o ON o.node = p_node AND o.name = m.name AND o.sid = p_sid
            AND o.hold = m.hold AND o.request_id = m.request;
        RETURN answer;
    ELSIF waiting = n THEN
        RETURN jsonb_build_object('queued', seconds_until(due));
    END IF;
    SELECT jsonb_build_object('ended', r.code, 'message', r.message) INTO answer
    FROM unnest(p_names, p_holds, p_requests) WITH ORDINALITY m(name, hold, request, i)
    JOIN outcomes r ON r.sid = p_sid AND r.node = p_node AND r.name = m.name
        AND r.hold = m.hold AND r.request_id = m.request
    ORDER BY m.i LIMIT 1;
    IF owned = 0 AND waiting = 0 AND answer IS NULL THEN
        RETURN NULL;  -- not applied: apply it now
    END IF;
    PERFORM lock_semaphores(p_node, p_names);
    DELETE FROM outcomes r USING unnest(p_names, p_holds, p_requests) m(name, hold, request)
    WHERE r.sid = p_sid AND r.node = p_node AND r.name = m.name AND r.hold = m.hold
        AND r.request_id = m.request;
    FOR item IN
        DELETE FROM waiters w USING unnest(p_names, p_holds, p_requests) m(name, hold, request)
        WHERE w.node = p_node AND w.name = m.name AND w.sid = p_sid AND w.hold = m.hold
            AND w.request_id = m.request
        RETURNING w.name
    LOOP
        PERFORM settle(p_node, item, true);
    END LOOP;
    FOR item IN
        DELETE FROM owners o USING unnest(p_names, p_holds, p_requests) m(name, hold, request)
        WHERE o.node = p_node AND o.name = m.name AND o.sid = p_sid AND o.hold = m.hold
            AND o.request_id = m.request
        RETURNING o.name
    LOOP
        PERFORM settle(p_node, item, true);
    END LOOP;
    RETURN coalesce(answer, jsonb_build_object('ended', 'cancelled'));
END $$;

-- p_count tokens of every semaphore of p_names, all or none (module docstring): the
-- grants' tokens, busy, or queued (the seconds of the timeout).
CREATE OR REPLACE FUNCTION @S.acquire_all(
    p_sid bigint, p_secret bytea, p_seq int, p_names text[], p_holds bigint[],
    p_count numeric, p_data bytea, p_timeout float8, p_ephemeral boolean,
    p_requests bigint[]
) RETURNS jsonb LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    s sessions := live(p_sid, p_secret, p_seq);
    cfg jsonb := config(s.node);
    n int := coalesce(cardinality(p_names), 0);
    ttl float8 := (cfg ->> 'default_lease')::float8;
    answer jsonb;
    missing int := 0;
    room boolean := true;
    made text[] := '{}';
    sem semaphores;
    at_once boolean := true;
    behind boolean[] := '{}';  -- whether others wait in each queue already
    token bigint;
    tokens jsonb := '[]';
    ends timestamptz;
    arrival bigint;
    deadline timestamptz;
BEGIN
    IF n NOT BETWEEN 1 AND 64 OR cardinality(p_holds) IS DISTINCT FROM n
       OR cardinality(p_requests) IS DISTINCT FROM n
       OR (SELECT count(DISTINCT x) FROM unnest(p_names) x) <> n THEN
        PERFORM fail('TN400', 'names must be 1 to 64 distinct semaphore names, with a hold '
                              'and a request id each');
    END IF;
    answer := acquire_all_again(s.node, p_sid, p_names, p_holds, p_requests);
    IF answer IS NOT NULL THEN  -- sent again: it was applied
        RETURN answer;
    END IF;
    IF length(p_data) > (cfg ->> 'max_data_size')::bigint THEN
        PERFORM check_data('owner data', p_data, s.node);  -- raises, saying why
    END IF;
    IF p_ephemeral THEN
        SELECT n - count(*) INTO missing FROM semaphores
        WHERE node = s.node AND name = ANY (p_names);
        IF missing > 0 THEN
            room := room_for_semaphores(s.node, (cfg ->> 'max_semaphores')::bigint, missing,
                                        false);
        END IF;
        -- Made or locked, in name order, in one statement: a row that is there is
        -- locked as by FOR UPDATE (the WHERE of DO UPDATE updates none, locks each),
        -- and one dropped meanwhile (an idle ephemeral semaphore) is made again.
        WITH x AS (
            INSERT INTO semaphores AS t
            SELECT s.node, y, 18446744073709551615, '', true
            FROM unnest(p_names) y ORDER BY y
            ON CONFLICT (node, name) DO UPDATE SET lim = t.lim WHERE false
            RETURNING t.name)
        SELECT array_agg(x.name) INTO made FROM x;
        made := coalesce(made, '{}');
        IF cardinality(made) > missing THEN
            -- One was dropped since it was counted (it was free), and made again:
            -- counted again, its own made ones included.
            room := room_for_semaphores(s.node, (cfg ->> 'max_semaphores')::bigint, 0, true);
        END IF;
    ELSE
        PERFORM lock_semaphores(s.node, p_names);
    END IF;
    FOR i IN 1 .. n LOOP
        SELECT * INTO sem FROM semaphores WHERE node = s.node AND name = p_names[i];
        IF NOT FOUND THEN
            PERFORM fail('TN404', format('semaphore %L does not exist (create it or use '
                                         'ephemeral)', p_names[i]));
        ELSIF p_count > sem.lim THEN
            PERFORM fail('TN413', format('count %s exceeds the limit %s of %L',
                                         p_count, sem.lim, p_names[i]));
        ELSIF EXISTS (SELECT 1 FROM owners WHERE node = s.node AND name = p_names[i]
                      AND sid = p_sid AND hold = p_holds[i])
              OR EXISTS (SELECT 1 FROM waiters WHERE node = s.node AND name = p_names[i]
                         AND sid = p_sid AND hold = p_holds[i]) THEN
            PERFORM fail('TN412', format('session %s already holds or waits for %L as hold %s',
                                         p_sid, p_names[i], p_holds[i]));
        END IF;
        behind := behind || EXISTS (SELECT 1 FROM waiters
                                    WHERE node = s.node AND name = p_names[i]);
        at_once := at_once AND (p_names[i] = ANY (made) OR (
            NOT behind[i] AND NOT coalesce(sem.blocked_until > clock_timestamp(), false)
            AND (SELECT coalesce(sum(cnt), 0) FROM owners
                 WHERE node = s.node AND name = p_names[i]) + p_count <= sem.lim));
    END LOOP;
    IF NOT room AND cardinality(made) > 0 THEN
        PERFORM fail('TN413', format('max_semaphores (%s) reached on node %L',
                                     cfg ->> 'max_semaphores', s.node));
    END IF;
    IF NOT at_once AND p_timeout IS DISTINCT FROM 0 THEN
        FOR i IN 1 .. n LOOP
            IF (SELECT count(*) FROM waiters WHERE node = s.node AND name = p_names[i])
               >= (cfg ->> 'max_waiters')::bigint THEN
                PERFORM fail('TN413', format('max_waiters (%s) reached on semaphore %L',
                                             cfg ->> 'max_waiters', p_names[i]));
            END IF;
        END LOOP;
    END IF;
    -- Checked: from here on the call succeeds. Endings of the holds not read are old.
    DELETE FROM outcomes r USING unnest(p_names, p_holds) m(name, hold)
    WHERE r.sid = p_sid AND r.node = s.node AND r.name = m.name AND r.hold = m.hold;
    IF NOT at_once AND p_timeout = 0 THEN
        DELETE FROM semaphores WHERE node = s.node AND name = ANY (made);
        RETURN jsonb_build_object('busy', true);
    END IF;
    IF at_once THEN
        ends := grant_end(s.node, NULL, NULL);  -- (the node's max_hold, if any)
        IF ends IS NOT NULL THEN
            PERFORM pg_notify(channel(s.node), 't');  -- a new deadline: reap then
        END IF;
        FOR i IN 1 .. n LOOP
            token := next_token();
            INSERT INTO owners (node, name, sid, hold, cnt, data, token, request_id,
                                lease_ttl, lease_deadline, granted_at, ends_at)
            VALUES (s.node, p_names[i], p_sid, p_holds[i], p_count, p_data,
                token, p_requests[i], ttl,
                least(clock_timestamp() + make_interval(secs => ttl), ends),
                clock_timestamp(), ends);
            tokens := tokens || to_jsonb(token);
            -- Nobody was queued: settle would serve no one and drop nothing.
            IF watched(s.node, p_names[i]) THEN
                PERFORM pg_notify(channel(s.node), 's' || p_names[i]);
            END IF;
        END LOOP;
        RETURN jsonb_build_object('tokens', tokens, 'count', p_count, 'ttl', ttl);
    END IF;
    arrival := nextval('arrivals');
    deadline := clock_timestamp() + make_interval(secs => p_timeout);  -- one for all
    FOR i IN 1 .. n LOOP
        INSERT INTO waiters (node, name, sid, hold, cnt, data, arrival, deadline, request_id,
                             queued_at, grp, grp_place)
        VALUES (s.node, p_names[i], p_sid, p_holds[i], p_count, p_data, arrival, deadline,
                p_requests[i], clock_timestamp(), CASE WHEN n > 1 THEN arrival END,
                CASE WHEN n > 1 THEN i - 1 END);
    END LOOP;
    FOR i IN 1 .. n LOOP
        IF behind[i] THEN
            -- Its head is as it was (see acquire): only the watches are told.
            IF watched(s.node, p_names[i]) THEN
                PERFORM pg_notify(channel(s.node), 's' || p_names[i]);
            END IF;
        ELSE
            PERFORM settle(s.node, p_names[i], true);
        END IF;
    END LOOP;
    RETURN jsonb_build_object('queued', p_timeout);
END $$;
"""
