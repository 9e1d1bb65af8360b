"""PL/pgSQL of claims (schema version 5): claim a name for a slot, release a claim by id.

The engine's ClaimName and ReleaseClaim (:mod:`tenure._core.handlers.claims`)
restated on PostgreSQL's clock (``clock_timestamp()``), the semaphore's row locked
``FOR UPDATE``. A claim of ``name`` is the persistent semaphore ``name`` (limit 1,
held by nobody) whose data is its record (:mod:`tenure._core.claims`), and a row of
``claims`` (its id, token, and when ``at_least`` and the claim end, by the database's
clock): live while both agree. Its end is a deadline of the node (``next_due``),
ended by any client's ``reap`` (the semaphore deleted as by force, notifying its
watchers); a claim also ends one whose end passed with no reap yet.

``max_claims`` is counted exactly: a claim that makes one counts the node's claims
under the node's row of ``claim_locks`` (claims are made one at a time per node; an
end only makes room, so nothing else takes it). That row is locked last, after the
semaphore's, by every transaction that takes it, so it closes no cycle of waits.

``@S`` stands for the quoted schema (:mod:`._ddl`).
"""

from __future__ import annotations

from typing import Final

__all__ = ["CLAIM_FUNCTIONS", "CLAIM_TABLES"]

#: Version 5's tables (new ones only: a version-4 schema is upgraded by adding them).
CLAIM_TABLES: Final = r"""
-- Version 5: claims (tenure._core.claims), and the row each node's claims are counted
-- under (max_claims).
CREATE TABLE IF NOT EXISTS @S.claims (
    node text NOT NULL,
    name text NOT NULL,
    id text NOT NULL,
    token bigint NOT NULL,
    least_until timestamptz NOT NULL,
    ends_at timestamptz NOT NULL,
    PRIMARY KEY (node, name)
);
CREATE INDEX IF NOT EXISTS claims_due ON @S.claims (node, ends_at);
CREATE TABLE IF NOT EXISTS @S.claim_locks (
    node text PRIMARY KEY
);
"""

CLAIM_FUNCTIONS: Final = r"""
-- The words of a claim's record (NULL: the data is none), as tenure._core.claims reads
-- them: 'claim ID TOKEN GRANTED AT_LEAST AT_MOST RELEASED SESSION DATA'.
CREATE OR REPLACE FUNCTION @S.claim_words(p_data bytea) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    w text[];
    least float8;
    most float8;
BEGIN
    BEGIN
        w := string_to_array(convert_from(p_data, 'UTF8'), ' ');
    EXCEPTION WHEN others THEN  -- not text
        RETURN NULL;
    END;
    IF array_length(w, 1) IS DISTINCT FROM 9 OR w[1] <> 'claim'
       OR w[2] !~ '^[0-9a-f]{32}$' OR w[3] !~ '^[0-9]{1,20}$' OR w[8] !~ '^[0-9]{1,20}$'
       OR (w[9] <> '-' AND w[9] !~ '^([0-9a-f]{2})+$')
       OR w[4] !~ '^[-+0-9.eE]+$' OR w[5] !~ '^[-+0-9.eE]+$' OR w[6] !~ '^[-+0-9.eE]+$'
       OR (w[7] <> '-' AND w[7] !~ '^[-+0-9.eE]+$') THEN
        RETURN NULL;
    END IF;
    BEGIN
        PERFORM w[4]::float8;
        IF w[7] <> '-' THEN
            PERFORM w[7]::float8;
        END IF;
        least := w[5]::float8;
        most := w[6]::float8;
    EXCEPTION WHEN others THEN  -- not numbers
        RETURN NULL;
    END;
    IF NOT (least >= 0 AND most > 0 AND least <= most) THEN
        RETURN NULL;
    END IF;
    RETURN w;
END $$;

-- Whether the claims row c is the live claim of its semaphore sem (its record's).
CREATE OR REPLACE FUNCTION @S.claim_holds(sem @S.semaphores, c @S.claims) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    w text[] := @S.claim_words(sem.data);
BEGIN
    RETURN NOT sem.ephemeral AND w IS NOT NULL AND w[2] = c.id AND w[3] = c.token::text;
END $$;

-- The claim of p_name ends: its row and its semaphore (the caller locked it) go.
CREATE OR REPLACE FUNCTION @S.end_claim(p_node text, p_name text) RETURNS void
LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
BEGIN
    DELETE FROM claims WHERE node = p_node AND name = p_name;
    PERFORM remove_semaphore(p_node, p_name, format('the claim of %L ended', p_name));
END $$;

-- A due claims row (reap; the caller locked its semaphore): the claim ends if it is
-- still its semaphore's, else the row goes (the semaphore was rewritten).
CREATE OR REPLACE FUNCTION @S.claim_due(c @S.claims) RETURNS void
LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    sem semaphores;
BEGIN
    SELECT * INTO sem FROM semaphores WHERE node = c.node AND name = c.name;
    IF FOUND AND claim_holds(sem, c) THEN
        PERFORM end_claim(c.node, c.name);
    ELSE
        DELETE FROM claims WHERE node = c.node AND name = c.name AND token = c.token;
    END IF;
END $$;

-- Claim p_name for at least p_least and at most p_most seconds (the client checked
-- them); the record of the claim that holds the name now: this one (its id is p_id),
-- or another's (refused). A retry with the same p_id finds its own claim.
CREATE OR REPLACE FUNCTION @S.claim(
    p_sid bigint, p_secret bytea, p_seq int, p_name text, p_id text,
    p_least float8, p_most float8, p_data bytea
) RETURNS bytea LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    s sessions := live(p_sid, p_secret, p_seq);
    cfg jsonb := config(s.node);
    sem semaphores;
    c claims;
    made boolean := false;
    tok bigint;
    now_t timestamptz;
    rec bytea;
    allowed bigint := coalesce((cfg ->> 'max_claims')::bigint, 10000);
BEGIN
    PERFORM check_data('claim data', p_data, s.node);
    LOOP
        IF lock_semaphore(s.node, p_name) THEN
            SELECT * INTO sem FROM semaphores WHERE node = s.node AND name = p_name;
            EXIT;
        END IF;
        PERFORM room_for_semaphore(s.node, (cfg ->> 'max_semaphores')::bigint);
        INSERT INTO semaphores VALUES (s.node, p_name, 1, ''::bytea, false)
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            made := true;
            EXIT;
        END IF;
        -- Made by another transaction meanwhile (its insert waited for it): lock it.
    END LOOP;
    IF NOT made THEN
        SELECT * INTO c FROM claims WHERE node = s.node AND name = p_name;
        IF FOUND AND claim_holds(sem, c) THEN
            IF c.ends_at > clock_timestamp() THEN
                RETURN sem.data;  -- the live claim: the caller's (a retry), or refused
            END IF;
            -- Ended by the database's clock, no reap yet: it ends now, as the engine's
            -- deadlines all come before a command. (Its row is this one's to make
            -- again: no room to check.)
            PERFORM end_claim(s.node, p_name);
            INSERT INTO semaphores VALUES (s.node, p_name, 1, ''::bytea, false);
        ELSIF sem.ephemeral
              OR EXISTS (SELECT 1 FROM owners WHERE node = s.node AND name = p_name)
              OR EXISTS (SELECT 1 FROM waiters WHERE node = s.node AND name = p_name) THEN
            PERFORM fail('TN412', format(
                'semaphore %L is held or awaited: only a free semaphore whose data is a '
                'claim''s record (or none) can be claimed', p_name));
        ELSIF claim_words(sem.data) IS NULL THEN
            PERFORM fail('TN412', format(
                'semaphore %L is not a claim (its data is not ''claim ID TOKEN GRANTED '
                'AT_LEAST AT_MOST RELEASED SESSION DATA'')', p_name));
        END IF;
    END IF;
    INSERT INTO claim_locks VALUES (s.node) ON CONFLICT DO NOTHING;
    PERFORM 1 FROM claim_locks WHERE node = s.node FOR UPDATE;
    IF (SELECT count(*) FROM claims WHERE node = s.node AND name <> p_name) >= allowed THEN
        PERFORM fail('TN413', format('max_claims (%s) reached on node %L', allowed, s.node));
    END IF;
    tok := next_token();
    now_t := clock_timestamp();
    rec := convert_to(format('claim %s %s %s %s %s - %s %s', p_id, tok,
                             extract(epoch FROM now_t)::float8::text, p_least::text,
                             p_most::text, s.id,
                             CASE WHEN p_data = '' THEN '-' ELSE encode(p_data, 'hex') END),
                      'UTF8');
    UPDATE semaphores SET lim = 1, data = rec WHERE node = s.node AND name = p_name;
    INSERT INTO claims VALUES (s.node, p_name, p_id, tok,
                               now_t + make_interval(secs => p_least),
                               now_t + make_interval(secs => p_most))
    ON CONFLICT (node, name) DO UPDATE
        SET id = excluded.id, token = excluded.token, least_until = excluded.least_until,
            ends_at = excluded.ends_at;
    -- (Only for a registered watch, as settle's: a NOTIFY holds a database-wide lock
    -- until the commit is flushed. This holds the semaphore's row, or the node's row
    -- shared for a new one, as watch() expects of a change: _sql_watches.)
    IF EXISTS (SELECT 1 FROM watches WHERE node = s.node AND name = p_name) THEN
        PERFORM pg_notify(channel(s.node), 's' || p_name);
    END IF;
    -- A new deadline of the node: its clients reap, and so arm a timer for its end.
    PERFORM pg_notify(channel(s.node), 't');
    RETURN rec;
END $$;

-- Release the claim p_id of p_name (no session: anyone with access to the node): it
-- ends at the later of now and at_least after its grant. Whether it shortened a live
-- claim of that id.
CREATE OR REPLACE FUNCTION @S.release_claim(p_node text, p_name text, p_id text)
RETURNS boolean LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    sem semaphores;
    c claims;
    w text[];
    now_t timestamptz;
BEGIN
    PERFORM require_node(p_node);
    IF NOT lock_semaphore(p_node, p_name) THEN
        RETURN false;
    END IF;
    SELECT * INTO sem FROM semaphores WHERE node = p_node AND name = p_name;
    SELECT * INTO c FROM claims WHERE node = p_node AND name = p_name;
    IF NOT FOUND OR NOT claim_holds(sem, c) THEN
        RETURN false;
    END IF;
    now_t := clock_timestamp();
    IF c.ends_at <= now_t THEN
        PERFORM end_claim(p_node, p_name);  -- ended, no reap yet
        RETURN false;
    END IF;
    w := claim_words(sem.data);
    IF c.id <> p_id OR w[7] <> '-' THEN
        RETURN false;  -- another's, or released already
    END IF;
    IF c.least_until <= now_t THEN
        PERFORM end_claim(p_node, p_name);  -- at_least has passed: it ends now
        RETURN true;
    END IF;
    w[7] := extract(epoch FROM now_t)::float8::text;
    UPDATE semaphores SET data = convert_to(array_to_string(w, ' '), 'UTF8')
    WHERE node = p_node AND name = p_name;
    UPDATE claims SET ends_at = least_until WHERE node = p_node AND name = p_name;
    IF EXISTS (SELECT 1 FROM watches WHERE node = p_node AND name = p_name) THEN
        PERFORM pg_notify(channel(p_node), 's' || p_name);
    END IF;
    PERFORM pg_notify(channel(p_node), 't');  -- its end came nearer: reap then
    RETURN true;
END $$;
"""
