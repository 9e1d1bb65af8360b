"""PL/pgSQL of reads (describe_semaphore, the listings) and of kill_session.

A page is sorted, starts after ``p_after`` (exclusive) and holds at most
``p_limit`` entries (the client checks the bounds). Names are compared and sorted
``COLLATE "C"``: code point order, as every backend sorts, whatever the database's
collation (the ``*_listed`` indexes are in that order). Times are the database's
``clock_timestamp()``, as UNIX seconds; NULL where a row predates version 2.
"""

from __future__ import annotations

from typing import Final

__all__ = ["LISTING_FUNCTIONS"]

LISTING_FUNCTIONS: Final = r"""
-- p_who: owners and waiters carry their session's description and identity and
-- when they were granted or queued (version 2; the version-1 function of five
-- arguments, without them, stays for clients of that version still running).
CREATE OR REPLACE FUNCTION @S.describe_semaphore(
    p_node text, p_name text, p_owners boolean, p_waiters boolean, p_missing_ok boolean,
    p_who boolean
) RETURNS jsonb LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    sem semaphores;
BEGIN
    SELECT * INTO sem FROM semaphores WHERE node = p_node AND name = p_name;
    IF NOT FOUND THEN
        IF p_missing_ok THEN
            RETURN NULL;
        END IF;
        PERFORM fail('TN404', format('semaphore %L does not exist', p_name));
    END IF;
    RETURN jsonb_build_object(
        'limit', sem.lim, 'data', encode(sem.data, 'hex'), 'ephemeral', sem.ephemeral,
        'count', (SELECT coalesce(sum(cnt), 0) FROM owners
                  WHERE node = p_node AND name = p_name),
        'owners', CASE WHEN p_owners THEN coalesce(
            (SELECT jsonb_agg(jsonb_build_array(o.sid, o.cnt, encode(o.data, 'hex'), o.token,
                                                extract(epoch FROM o.granted_at)::float8,
                                                x.description, x.host, x.pid, x.client_name)
                              ORDER BY o.token)
             FROM owners o LEFT JOIN sessions x ON x.id = o.sid
             WHERE o.node = p_node AND o.name = p_name), '[]') END,
        'waiters', CASE WHEN p_waiters THEN coalesce(
            (SELECT jsonb_agg(jsonb_build_array(w.sid, w.cnt, encode(w.data, 'hex'),
                                                extract(epoch FROM w.queued_at)::float8,
                                                x.description, x.host, x.pid, x.client_name)
                              ORDER BY w.arrival)
             FROM waiters w LEFT JOIN sessions x ON x.id = w.sid
             WHERE w.node = p_node AND w.name = p_name), '[]') END);
END $$;

CREATE OR REPLACE FUNCTION @S.list_nodes(p_after text, p_limit int) RETURNS jsonb
LANGUAGE sql STABLE SET search_path = @S, pg_catalog AS $$
    SELECT coalesce(jsonb_agg(name ORDER BY name COLLATE "C"), '[]') FROM (
        SELECT name FROM nodes WHERE name COLLATE "C" > p_after
        ORDER BY name COLLATE "C" LIMIT p_limit) page
$$;

CREATE OR REPLACE FUNCTION @S.require_node(p_node text) RETURNS void
LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM nodes WHERE name = p_node) THEN
        PERFORM fail('TN404', format('node %L does not exist', p_node));
    END IF;
END $$;

-- Each entry: name, limit, count held, owners, waiters, ephemeral.
CREATE OR REPLACE FUNCTION @S.list_semaphores(
    p_node text, p_prefix text, p_after text, p_limit int
) RETURNS jsonb LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
BEGIN
    PERFORM require_node(p_node);
    RETURN coalesce((
        SELECT jsonb_agg(jsonb_build_array(
                   page.name, page.lim,
                   (SELECT coalesce(sum(cnt), 0) FROM owners o
                    WHERE o.node = p_node AND o.name = page.name),
                   (SELECT count(*) FROM owners o WHERE o.node = p_node AND o.name = page.name),
                   (SELECT count(*) FROM waiters w WHERE w.node = p_node AND w.name = page.name),
                   page.ephemeral)
               ORDER BY page.name COLLATE "C")
        FROM (SELECT name, lim, ephemeral FROM semaphores
              WHERE node = p_node AND name COLLATE "C" > p_after
                AND name COLLATE "C" >= p_prefix
                AND left(name, length(p_prefix)) = p_prefix
              ORDER BY name COLLATE "C" LIMIT p_limit) page), '[]');
END $$;

-- Live sessions by id. Each entry: id, description, host, pid, client name, window,
-- created at (UNIX seconds), seconds until the database ends it if its client stays
-- silent, holds, waits.
CREATE OR REPLACE FUNCTION @S.list_sessions(p_node text, p_after bigint, p_limit int)
RETURNS jsonb LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
BEGIN
    PERFORM require_node(p_node);
    RETURN coalesce((
        SELECT jsonb_agg(jsonb_build_array(
                   s.id, s.description, s.host, s.pid, s.client_name, s.win,
                   extract(epoch FROM s.created_at)::float8, seconds_until(s.deadline),
                   (SELECT count(*) FROM owners o WHERE o.sid = s.id),
                   (SELECT count(*) FROM waiters w WHERE w.sid = s.id))
               ORDER BY s.id)
        FROM (SELECT * FROM sessions
              WHERE node = p_node AND ended IS NULL AND id > p_after
                AND deadline >= clock_timestamp()
              ORDER BY id LIMIT p_limit) s), '[]');
END $$;

-- An operator ends a live session as its expiry would (lock-delay included); its
-- client, told by the notification end_session sends, hears SessionExpiredError
-- saying so. 't' tells the node's clients to reap again: a lock-delay started
-- here ends at a deadline none of them has a timer for.
CREATE OR REPLACE FUNCTION @S.kill_session(p_node text, p_sid bigint) RETURNS void
LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
BEGIN
    PERFORM require_node(p_node);
    PERFORM 1 FROM sessions WHERE id = p_sid AND node = p_node AND ended IS NULL
        AND deadline >= clock_timestamp() FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        PERFORM fail('TN404', format('session %s of node %L does not exist (it ended, or '
                                     'never was)', p_sid, p_node));
    END IF;
    PERFORM end_session(p_sid, 'killed');
    PERFORM pg_notify(channel(p_node), 't');
END $$;
"""
