"""PL/pgSQL of semaphores: acquire, check, withdraw, release, and administration.

Each takes the acting session's id, secret and ``seq`` (its fence: a session
taken over by a resume ticket is refused), locks the semaphore's row (with those
of the all-or-none requests waiting there: ``lock_semaphore``, :mod:`._sql_queues`),
changes it, serves the queue (``settle``) and notifies the node's channel with the
semaphore's name, all in the one transaction of its call.

An acquire carries a request id chosen by the client: a call sent again because
its answer was lost finds its own owner or waiter row and answers from it, so it
never applies twice.
"""

from __future__ import annotations

from typing import Final

__all__ = ["SEMAPHORE_FUNCTIONS"]

SEMAPHORE_FUNCTIONS: Final = r"""
-- (Schema version 6 added p_max_hold: the signature before it goes, so that no call
-- can reach a function that ignores it.)
DROP FUNCTION IF EXISTS @S.acquire(bigint, bytea, int, text, bigint, numeric, bytea, float8,
                                   boolean, bigint);
-- p_max_hold: the grant ends that many seconds after it (NULL: the node's max_hold,
-- if any, which it may only shorten: grant_end).
CREATE OR REPLACE FUNCTION @S.acquire(
    p_sid bigint, p_secret bytea, p_seq int, p_name text, p_hold bigint, p_count numeric,
    p_data bytea, p_timeout float8, p_ephemeral boolean, p_request bigint,
    p_max_hold float8
) RETURNS jsonb LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    s sessions := live(p_sid, p_secret, p_seq);
    cfg jsonb := config(s.node);
    sem semaphores;
    o owners;
    w waiters;
    total numeric;
    queued bigint;
    token bigint;
    changed boolean := false;
    answer jsonb;
    ends timestamptz;
BEGIN
    SELECT * INTO sem FROM semaphores WHERE node = s.node AND name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        IF NOT p_ephemeral THEN
            PERFORM fail('TN404', format('semaphore %L does not exist (create it or use '
                                         'ephemeral)', p_name));
        END IF;
        IF length(p_data) > (cfg ->> 'max_data_size')::bigint THEN
            PERFORM check_data('owner data', p_data, s.node);  -- raises, saying why
        END IF;
        -- The node row's lock (shared far from the limit) keeps max_semaphores and
        -- orders this creation with a watch's registration (_sql_watches).
        PERFORM room_for_semaphore(s.node, (cfg ->> 'max_semaphores')::bigint);
        INSERT INTO semaphores VALUES (s.node, p_name, 18446744073709551615, '', true)
        ON CONFLICT DO NOTHING;
        SELECT * INTO sem FROM semaphores WHERE node = s.node AND name = p_name FOR UPDATE;
        changed := true;
    END IF;
    SELECT * INTO o FROM owners
    WHERE node = s.node AND name = p_name AND sid = p_sid AND hold = p_hold;
    IF o.request_id = p_request THEN  -- sent again: it was applied
        RETURN jsonb_build_object('token', o.token, 'count', o.cnt, 'ttl', o.lease_ttl);
    END IF;
    SELECT * INTO w FROM waiters
    WHERE node = s.node AND name = p_name AND sid = p_sid AND hold = p_hold;
    IF w.request_id = p_request THEN
        RETURN jsonb_build_object('queued', seconds_until(w.deadline));
    END IF;
    IF length(p_data) > (cfg ->> 'max_data_size')::bigint THEN
        PERFORM check_data('owner data', p_data, s.node);  -- raises, saying why
    END IF;
    IF p_count > sem.lim THEN
        PERFORM fail('TN413', format('count %s exceeds the limit %s of %L',
                                     p_count, sem.lim, p_name));
    END IF;
    IF w.sid IS NULL AND (o.cnt IS NULL OR p_count > o.cnt) AND p_timeout IS DISTINCT FROM 0
       AND (SELECT count(*) FROM waiters WHERE node = s.node AND name = p_name)
           >= (cfg ->> 'max_waiters')::bigint THEN
        PERFORM fail('TN413', format('max_waiters (%s) reached on semaphore %L',
                                     cfg ->> 'max_waiters', p_name));
    END IF;
    -- Checked: from here on the call succeeds. An older wait of the hold is superseded.
    DELETE FROM outcomes WHERE sid = p_sid AND node = s.node AND name = p_name
        AND hold = p_hold;
    IF w.sid IS NOT NULL THEN
        DELETE FROM waiters
        WHERE node = s.node AND name = p_name AND sid = p_sid AND hold = p_hold;
        -- A member of an all-or-none request: the others go with it (lock_also).
        PERFORM withdraw_group(s.node, p_sid, w.grp, NULL, NULL);
        changed := true;
    END IF;
    SELECT coalesce(sum(cnt), 0) INTO total FROM owners
    WHERE node = s.node AND name = p_name;
    SELECT count(*) INTO queued FROM waiters WHERE node = s.node AND name = p_name;
    IF o.cnt IS NOT NULL AND p_count <= o.cnt THEN
        -- No more than held: restated in place, same grant, same token.
        UPDATE owners SET cnt = p_count, data = p_data, request_id = p_request
        WHERE node = s.node AND name = p_name AND sid = p_sid AND hold = p_hold;
        changed := changed OR o.cnt <> p_count OR o.data <> p_data;
        answer := jsonb_build_object('token', o.token, 'count', p_count, 'ttl', o.lease_ttl);
    ELSIF queued = 0 AND total - coalesce(o.cnt, 0) + p_count <= sem.lim
          AND NOT coalesce(sem.blocked_until > clock_timestamp(), false) THEN
        token := next_token();
        ends := grant_end(s.node, p_max_hold, o.ends_at);
        DELETE FROM owners
        WHERE node = s.node AND name = p_name AND sid = p_sid AND hold = p_hold;
        INSERT INTO owners (node, name, sid, hold, cnt, data, token, request_id, lease_ttl,
                            lease_deadline, granted_at, ends_at)
        VALUES (s.node, p_name, p_sid, p_hold, p_count, p_data, token,
            p_request, (cfg ->> 'default_lease')::float8,
            least(clock_timestamp() + make_interval(secs => (cfg ->> 'default_lease')::float8),
                  ends),
            clock_timestamp(), ends);
        IF ends IS NOT NULL THEN
            -- A new deadline of the node: its clients reap, and so arm a timer for it.
            PERFORM pg_notify(channel(s.node), 't');
        END IF;
        -- Nobody is queued and the semaphore is held: settle would serve no one and
        -- drop nothing, only tell the watches.
        IF watched(s.node, p_name) THEN
            PERFORM pg_notify(channel(s.node), 's' || p_name);
        END IF;
        RETURN jsonb_build_object('token', token, 'count', p_count,
                                  'ttl', (cfg ->> 'default_lease')::float8);
    ELSIF p_timeout = 0 THEN
        answer := jsonb_build_object('busy', true);
    ELSE
        INSERT INTO waiters (node, name, sid, hold, cnt, data, arrival, deadline, request_id,
                             queued_at, max_hold)
        VALUES (s.node, p_name, p_sid, p_hold, p_count, p_data, nextval('arrivals'),
            clock_timestamp() + make_interval(secs => p_timeout), p_request, clock_timestamp(),
            p_max_hold);
        answer := jsonb_build_object('queued', p_timeout);
        IF w.sid IS NULL AND queued > 0 THEN
            -- Behind others, nothing else changed: the head is as it was (one that does
            -- not fit, or an all-or-none request not ready, which settle would try
            -- again, locking its other semaphores), so only the watches are told.
            IF watched(s.node, p_name) THEN
                PERFORM pg_notify(channel(s.node), 's' || p_name);
            END IF;
            RETURN answer;
        END IF;
        changed := true;
    END IF;
    PERFORM settle(s.node, p_name, changed);
    RETURN answer;
END $$;

-- Where request p_request of a hold stands: granted, queued (seconds left), or how it
-- ended. A queued request past its deadline (by the database's clock) ends here.
CREATE OR REPLACE FUNCTION @S.check_request(
    p_sid bigint, p_secret bytea, p_seq int, p_name text, p_hold bigint, p_request bigint
) RETURNS jsonb LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    s sessions := live(p_sid, p_secret, p_seq);
    o owners;
    w waiters;
    r outcomes;
BEGIN
    SELECT * INTO w FROM waiters WHERE node = s.node AND name = p_name AND sid = p_sid
        AND hold = p_hold AND request_id = p_request;
    IF FOUND AND w.deadline < clock_timestamp() THEN
        -- (with the rows of its all-or-none request's other semaphores, if it is one's)
        PERFORM lock_semaphore(s.node, p_name);
        DELETE FROM waiters WHERE node = s.node AND name = p_name AND sid = p_sid
            AND hold = p_hold AND request_id = p_request;
        IF FOUND THEN
            -- Its ending stays, as a reap's does, for this call sent again after its
            -- answer was lost (below).
            INSERT INTO outcomes VALUES (p_sid, s.node, p_name, p_hold, p_request,
                'timeout', 'timed out')
            ON CONFLICT (sid, node, name, hold) DO UPDATE
                SET request_id = excluded.request_id, code = excluded.code,
                    message = excluded.message;
            -- One deadline for all the members: they time out together; its client
            -- asked of this one, and hears of no other.
            PERFORM withdraw_group(s.node, p_sid, w.grp, NULL, NULL);
            PERFORM settle(s.node, p_name, true);
            RETURN jsonb_build_object('ended', 'timeout');
        END IF;
    ELSIF FOUND THEN
        RETURN jsonb_build_object('queued', seconds_until(w.deadline));
    END IF;
    SELECT * INTO o FROM owners WHERE node = s.node AND name = p_name AND sid = p_sid
        AND hold = p_hold AND request_id = p_request;
    IF FOUND THEN
        RETURN jsonb_build_object('token', o.token, 'count', o.cnt, 'ttl', o.lease_ttl);
    END IF;
    -- Read, not taken: this call sent again after its answer was lost reads it again.
    -- It goes with the hold's next request (acquire, withdraw, release) or the session.
    SELECT * INTO r FROM outcomes WHERE sid = p_sid AND node = s.node AND name = p_name
        AND hold = p_hold AND request_id = p_request;
    IF FOUND THEN
        RETURN jsonb_build_object('ended', r.code, 'message', r.message);
    END IF;
    RETURN jsonb_build_object('ended', 'gone');
END $$;

-- The asker gave up: withdraw the request unless it was granted (then say so).
CREATE OR REPLACE FUNCTION @S.withdraw(
    p_sid bigint, p_secret bytea, p_seq int, p_name text, p_hold bigint, p_request bigint
) RETURNS jsonb LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    s sessions := live(p_sid, p_secret, p_seq);
    o owners;
    w waiters;
BEGIN
    PERFORM lock_semaphore(s.node, p_name);
    DELETE FROM waiters WHERE node = s.node AND name = p_name AND sid = p_sid
        AND hold = p_hold AND request_id = p_request RETURNING * INTO w;
    IF FOUND THEN
        -- All or none: the other members of its request go too (their withdrawals,
        -- sent as well, find nothing left), their queues served first, as the engine's.
        PERFORM withdraw_group(s.node, p_sid, w.grp, NULL, NULL);
        PERFORM settle(s.node, p_name, true);
        RETURN jsonb_build_object('withdrawn', true);
    END IF;
    DELETE FROM outcomes WHERE sid = p_sid AND node = s.node AND name = p_name
        AND hold = p_hold;
    SELECT * INTO o FROM owners WHERE node = s.node AND name = p_name AND sid = p_sid
        AND hold = p_hold AND request_id = p_request;
    IF FOUND THEN
        RETURN jsonb_build_object('token', o.token, 'count', o.cnt, 'ttl', o.lease_ttl);
    END IF;
    RETURN jsonb_build_object('withdrawn', false);
END $$;

CREATE OR REPLACE FUNCTION @S.release(
    p_sid bigint, p_secret bytea, p_seq int, p_name text, p_hold bigint
) RETURNS boolean LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    s sessions := live(p_sid, p_secret, p_seq);
    had_owner boolean;
    had_waiter boolean;
    w waiters;
BEGIN
    PERFORM lock_semaphore(s.node, p_name);
    DELETE FROM outcomes WHERE sid = p_sid AND node = s.node AND name = p_name
        AND hold = p_hold;
    -- A wait of the hold goes first, and with it the rest of its all-or-none request
    -- (their queues served), then the hold: the engine's order.
    DELETE FROM waiters WHERE node = s.node AND name = p_name AND sid = p_sid
        AND hold = p_hold RETURNING * INTO w;
    had_waiter := FOUND;
    IF had_waiter THEN
        PERFORM withdraw_group(s.node, p_sid, w.grp, NULL, NULL);
    END IF;
    DELETE FROM owners WHERE node = s.node AND name = p_name AND sid = p_sid
        AND hold = p_hold;
    had_owner := FOUND;
    PERFORM settle(s.node, p_name, had_owner OR had_waiter);
    RETURN had_owner OR had_waiter;
END $$;

-- The session's holds, in grant order (after a resume, or to find lost ones).
CREATE OR REPLACE FUNCTION @S.holds(p_sid bigint, p_secret bytea, p_seq int)
RETURNS jsonb LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    s sessions := live(p_sid, p_secret, p_seq);
BEGIN
    RETURN coalesce((SELECT jsonb_agg(jsonb_build_array(name, hold, token, cnt,
                                                        encode(data, 'hex'), lease_ttl)
                                      ORDER BY token)
                     FROM owners WHERE sid = p_sid), '[]'::jsonb);
END $$;

-- Restart the lease of a hold's grant; the TTL in force. A hold that ended names why
-- (its outcome, not read by its client yet: a max_hold's end, a TTL run out), so a
-- renewal that comes just after the end tells its holder the same reason; a lease
-- that ran out already answers -1 (its TTL) or -2 (its max_hold's end).
CREATE OR REPLACE FUNCTION @S.renew(
    p_sid bigint, p_secret bytea, p_seq int, p_name text, p_hold bigint
) RETURNS float8 LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    s sessions := live(p_sid, p_secret, p_seq);
    o owners;
    why text;
BEGIN
    PERFORM 1 FROM semaphores WHERE node = s.node AND name = p_name FOR UPDATE;
    SELECT * INTO o FROM owners WHERE node = s.node AND name = p_name AND sid = p_sid
        AND hold = p_hold;
    IF NOT FOUND THEN
        SELECT message INTO why FROM outcomes WHERE sid = p_sid AND node = s.node
            AND name = p_name AND hold = p_hold AND code = 'lease_lost';
        PERFORM fail('TN404', format('session %s holds no tokens of %L', p_sid, p_name)
                              || coalesce(': ' || why, ''));
    ELSIF o.lease_ttl IS NULL THEN
        PERFORM fail('TN412', format('the grant of %L has no lease TTL to renew', p_name));
    ELSIF o.lease_deadline < clock_timestamp() THEN
        -- Ran out already: the caller ends it (this transaction must commit).
        RETURN CASE WHEN o.ends_at IS NOT NULL AND o.ends_at <= clock_timestamp()
                    THEN -2 ELSE -1 END;
    END IF;
    -- A max_hold: no renewal takes the lease past its end (least ignores a NULL end).
    UPDATE owners
    SET lease_deadline = least(clock_timestamp() + make_interval(secs => o.lease_ttl),
                               o.ends_at)
    WHERE node = s.node AND name = p_name AND sid = p_sid AND hold = p_hold;
    RETURN o.lease_ttl;
END $$;

CREATE OR REPLACE FUNCTION @S.create_semaphore(
    p_sid bigint, p_secret bytea, p_seq int, p_name text, p_limit numeric, p_data bytea
) RETURNS void LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    s sessions := live(p_sid, p_secret, p_seq);
    cfg jsonb;
BEGIN
    PERFORM check_data('semaphore data', p_data, s.node);
    SELECT config INTO cfg FROM nodes WHERE name = s.node FOR NO KEY UPDATE;
    IF EXISTS (SELECT 1 FROM semaphores WHERE node = s.node AND name = p_name) THEN
        PERFORM fail('TN409', format('semaphore %L already exists', p_name));
    END IF;
    IF (SELECT count(*) FROM semaphores WHERE node = s.node)
       >= (cfg ->> 'max_semaphores')::bigint THEN
        PERFORM fail('TN413', format('max_semaphores (%s) reached on node %L',
                                     cfg ->> 'max_semaphores', s.node));
    END IF;
    INSERT INTO semaphores VALUES (s.node, p_name, p_limit, p_data, false);
    PERFORM pg_notify(channel(s.node), 's' || p_name);
END $$;

-- Compare and swap: replace the data only if it is p_expected now (NULL: whatever it
-- is; the row locked FOR UPDATE, so no other change comes between the compare and the
-- write); whether it did.
CREATE OR REPLACE FUNCTION @S.swap_semaphore_data(
    p_sid bigint, p_secret bytea, p_seq int, p_name text, p_expected bytea, p_data bytea
) RETURNS boolean LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    s sessions := live(p_sid, p_secret, p_seq);
    old bytea;
BEGIN
    SELECT data INTO old FROM semaphores WHERE node = s.node AND name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM fail('TN404', format('semaphore %L does not exist', p_name));
    END IF;
    PERFORM check_data('semaphore data', p_data, s.node);
    IF p_expected IS NOT NULL AND old <> p_expected THEN
        RETURN false;
    END IF;
    IF old <> p_data THEN
        UPDATE semaphores SET data = p_data WHERE node = s.node AND name = p_name;
        PERFORM pg_notify(channel(s.node), 's' || p_name);
    END IF;
    RETURN true;
END $$;

-- Replace the data, whatever it is: the swap without its compare.
CREATE OR REPLACE FUNCTION @S.update_semaphore(
    p_sid bigint, p_secret bytea, p_seq int, p_name text, p_data bytea
) RETURNS void LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
BEGIN
    PERFORM swap_semaphore_data(p_sid, p_secret, p_seq, p_name, NULL, p_data);
END $$;

-- Delete a semaphore; forced, its waiters end with NotFound and its owners lose
-- their grants (remove_semaphore). A claim's semaphore deleted ends its claim.
CREATE OR REPLACE FUNCTION @S.delete_semaphore(
    p_sid bigint, p_secret bytea, p_seq int, p_name text, p_force boolean
) RETURNS void LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    s sessions := live(p_sid, p_secret, p_seq);
    owning bigint;
    waiting bigint;
BEGIN
    IF NOT lock_semaphore(s.node, p_name) THEN
        PERFORM fail('TN404', format('semaphore %L does not exist', p_name));
    END IF;
    SELECT count(*) INTO owning FROM owners WHERE node = s.node AND name = p_name;
    SELECT count(*) INTO waiting FROM waiters WHERE node = s.node AND name = p_name;
    IF (owning > 0 OR waiting > 0) AND NOT p_force THEN
        PERFORM fail('TN412', format('semaphore %L has %s owner(s) and %s waiter(s); '
                                     'use force=True', p_name, owning, waiting));
    END IF;
    DELETE FROM claims WHERE node = s.node AND name = p_name;
    PERFORM remove_semaphore(s.node, p_name, format('semaphore %L was deleted', p_name));
END $$;

-- Delete a semaphore the caller locked (lock_semaphore: with the rows of the
-- all-or-none requests waiting in its queue) as a forced delete does: its waiters end
-- with NotFound and its owners lose their grants (an outcome each, p_message, for a
-- client that was still waiting for its answer; 'd': holders check theirs).
CREATE OR REPLACE FUNCTION @S.remove_semaphore(p_node text, p_name text, p_message text)
RETURNS void LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    w waiters;
    gone waiters[];
    members text[];
    member text;
    served text[] := '{}';
BEGIN
    INSERT INTO outcomes
    SELECT sid, node, name, hold, request_id, 'not_found', p_message
    FROM waiters WHERE node = p_node AND name = p_name
    ON CONFLICT (sid, node, name, hold) DO UPDATE
        SET request_id = excluded.request_id, code = excluded.code,
            message = excluded.message;
    -- An owner whose client has not read its grant yet (it was waiting) reads this.
    INSERT INTO outcomes
    SELECT sid, node, name, hold, request_id, 'lease_lost', p_message
    FROM owners WHERE node = p_node AND name = p_name
    ON CONFLICT (sid, node, name, hold) DO UPDATE
        SET request_id = excluded.request_id, code = excluded.code,
            message = excluded.message;
    -- Every waiter leaves the queue; a member of an all-or-none request takes the
    -- others with it (they end NotFound too: the request cannot have this member).
    -- Every such set leaves whole before any queue is served: settle knows a set by
    -- its waiter rows alone, so one whose member here is gone would look complete and
    -- be granted its other names. Then its queues are served, set by set in arrival
    -- order, as the engine's (EngineState.withdraw_set).
    gone := ARRAY(SELECT x FROM waiters x WHERE node = p_node AND name = p_name
                  ORDER BY arrival);
    DELETE FROM waiters WHERE node = p_node AND name = p_name;
    FOREACH w IN ARRAY gone LOOP
        CONTINUE WHEN w.grp IS NULL;
        members := ARRAY(SELECT name FROM waiters
                         WHERE node = p_node AND sid = w.sid AND grp = w.grp
                         ORDER BY grp_place);
        FOREACH member IN ARRAY members LOOP
            PERFORM lock_also(p_node, member);
        END LOOP;
        INSERT INTO outcomes
        SELECT sid, node, name, hold, request_id, 'not_found', p_message
        FROM waiters WHERE node = p_node AND sid = w.sid AND grp = w.grp
        ON CONFLICT (sid, node, name, hold) DO UPDATE
            SET request_id = excluded.request_id, code = excluded.code,
                message = excluded.message;
        PERFORM pg_notify(channel(p_node), 'g' || w.sid);  -- its client reads why
        DELETE FROM waiters WHERE node = p_node AND sid = w.sid AND grp = w.grp;
        served := served || members;
    END LOOP;
    DELETE FROM owners WHERE node = p_node AND name = p_name;
    DELETE FROM semaphores WHERE node = p_node AND name = p_name;
    PERFORM pg_notify(channel(p_node), 'd' || p_name);
    PERFORM pg_notify(channel(p_node), 's' || p_name);
    FOREACH member IN ARRAY served LOOP
        PERFORM settle(p_node, member, true);
    END LOOP;
END $$;
"""
