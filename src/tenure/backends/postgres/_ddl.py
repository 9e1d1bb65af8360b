"""The tables of ``postgres://`` and the helpers every operation shares (PL/pgSQL).

Layout (in the schema ``?schema=`` names, default ``tenure``):

* ``meta``: one row, the schema's version and the digest of the statements that
  made it (a migration compares both: functions fixed within a version differ in
  the digest, and are replaced).
* ``tokens``: the sequence of fencing tokens (version 3). A grant takes its token
  with ``nextval`` under its semaphore's row lock, after the previous holder's
  commit, so every semaphore's tokens increase in grant order; ``nextval`` is not
  transactional, so grants of different semaphores do not wait for each other's
  commits (docs/guarantees.md, promise 2). Versions 1 and 2 kept a ``counter``
  row that every grant updated: the upgrade hands its last value to the sequence
  and drops it.
* ``watches``: one row per armed watch (version 3): a change of a semaphore
  notifies ``s<name>`` only when one is registered (a NOTIFY takes a lock of the
  whole database until its transaction's commit is flushed: notifying every change
  made every change of every client wait for one WAL flush each).
* ``prefix_watches``: one row per armed prefix watch (version 5): a change of a
  semaphore whose name starts with a registered prefix notifies ``s<name>`` too
  (:mod:`._sql_watches`).
* ``nodes``: a node's settings (``config``, jsonb of NodeConfig) and ``version``.
* ``sessions``: one row per session: its secret, ``seq`` (the fence a resume bumps),
  window, and ``deadline`` (``clock_timestamp()`` + window at the last heartbeat);
  its client's identity (``host``, ``pid``, ``client_name``) and ``created_at``
  (version 2; NULL for a session opened before). ``ended`` says why one ended
  (expired, closed, dropped, killed by an operator); ended rows are kept an hour,
  so a late client hears why, then deleted.
* ``semaphores``: limit (numeric: up to 2**64-1), data, ephemeral, and
  ``blocked_until`` (lock-delay: no grant before it, by the database's clock).
* ``owners``: a hold (session, hold number): count, data, token, the request id
  that made or last restated it (a retried call finds its own work done), and its
  lease TTL and deadline (the node's ``default_lease``; NULL: as long as the session),
  and ``granted_at`` (version 2; NULL for a grant made before); ``offer`` (version 6),
  the digest of its hand-off's secret (NULL: not offered; :mod:`._sql_handoffs`).
* ``waiters``: a queued request: ``arrival`` (service order), ``deadline`` (the
  acquire timeout, by the database's clock), request id, ``queued_at`` (version 2),
  and for a member of an all-or-none set (``acquire_all``, version 4) ``grp``,
  the arrival its members share, and ``grp_place``, its place among the set's
  names (NULL both for a request of one semaphore; :mod:`._sql_queues`). Both
  columns keep the sets' old name ("group"): they are the tables' in use.
* ``outcomes``: how a waiter ended without its client (timed out by another
  client's reap, or its semaphore deleted), until its client reads it.
* ``claims`` (version 5): a live claim per semaphore name (its record is the
  semaphore's data): its id, token, and when its ``at_least`` and the claim end, by
  the database's clock; ``claim_locks``: the row a node's claims are counted under
  (:mod:`._sql_claims`).

Every operation locks the rows it changes (``FOR UPDATE`` on the semaphore,
``FOR SHARE`` on the acting session) under READ COMMITTED: no advisory locks; in
an order that never closes a cycle of waits (:mod:`._sql_queues`). No row is
written by every grant: grants of different semaphores share nothing but the WAL,
so their commits are flushed together (group commit).

``@S`` stands for the quoted schema and ``@N`` for the schema's name as a
literal (it goes into the notification channel names).
"""

from __future__ import annotations

from typing import Final

__all__ = ["HELPERS", "SCHEMA_VERSION", "TABLES"]

#: The version these statements create; a database with a newer one is refused.
#: Version 2 (tenure 0.14) added the identity and times of sessions, grants and waits,
#: and the listings' indexes: a version-1 schema is upgraded in place (columns added,
#: NULL where the time is not known). Version 3 (issue 26) takes tokens from the
#: ``tokens`` sequence instead of the ``counter`` row, and adds ``watches``; the
#: upgrade moves the counter's last value into the sequence. A client of version 2
#: (which would make a ``counter`` row again, from 0) refuses a version-3 schema.
#: Version 4 (issue 29) adds all-or-none requests (``waiters.grp``, ``grp_place``;
#: NULL in the rows of a version-3 schema, which are requests of one semaphore each)
#: and serves queues knowing them: a client of version 3, whose functions would
#: grant a member alone, refuses a version-4 schema (its functions are not put back).
#: Version 5 (issue 35) adds ``prefix_watches`` (a change notifies the prefix watches
#: its name is under too) and claims (``claims``, ``claim_locks``: :mod:`._sql_claims`);
#: a version-4 schema is upgraded in place by adding the tables, and a client of
#: version 4 (whose functions notify no prefix watch, and whose delete, reap and
#: next_due know no claims) refuses a version-5 schema. Version 6 (issue 50) adds
#: hand-offs (``owners.offer``: :mod:`._sql_handoffs`) and max_hold: each grant's end
#: whatever its session does (``owners.ends_at``, database time; its
#: ``lease_deadline`` never after it) and each waiter's own bound
#: (``waiters.max_hold``); a version-5 schema is upgraded in place by adding the
#: columns (NULL: not offered, no bound), and a client of version 5 refuses a
#: version-6 schema (its functions would renew a lease past its end, and put back
#: functions without ``adopt_hold``).
SCHEMA_VERSION: Final = 6

TABLES: Final = r"""
CREATE TABLE IF NOT EXISTS @S.meta (
    id int PRIMARY KEY CHECK (id = 1),
    version int NOT NULL,
    digest text
);
ALTER TABLE @S.meta ADD COLUMN IF NOT EXISTS digest text;
CREATE TABLE IF NOT EXISTS @S.nodes (
    name text PRIMARY KEY,
    config jsonb NOT NULL,
    version bigint NOT NULL DEFAULT 1
);
CREATE SEQUENCE IF NOT EXISTS @S.session_ids;
CREATE TABLE IF NOT EXISTS @S.sessions (
    id bigint PRIMARY KEY DEFAULT nextval('@S.session_ids'),
    node text NOT NULL,
    secret bytea NOT NULL,
    seq int NOT NULL DEFAULT 1,
    win float8 NOT NULL,
    description text NOT NULL,
    deadline timestamptz NOT NULL,
    ended text,
    ended_at timestamptz
);
CREATE INDEX IF NOT EXISTS sessions_due ON @S.sessions (node, deadline) WHERE ended IS NULL;
CREATE INDEX IF NOT EXISTS sessions_ended ON @S.sessions (ended_at) WHERE ended IS NOT NULL;
CREATE TABLE IF NOT EXISTS @S.semaphores (
    node text NOT NULL,
    name text NOT NULL,
    lim numeric(20, 0) NOT NULL,
    data bytea NOT NULL,
    ephemeral boolean NOT NULL,
    blocked_until timestamptz,
    PRIMARY KEY (node, name)
);
ALTER TABLE @S.semaphores ADD COLUMN IF NOT EXISTS blocked_until timestamptz;
CREATE INDEX IF NOT EXISTS semaphores_blocked ON @S.semaphores (node, blocked_until)
    WHERE blocked_until IS NOT NULL;
CREATE TABLE IF NOT EXISTS @S.owners (
    node text NOT NULL,
    name text NOT NULL,
    sid bigint NOT NULL,
    hold bigint NOT NULL,
    cnt numeric(20, 0) NOT NULL,
    data bytea NOT NULL,
    token bigint NOT NULL,
    request_id bigint NOT NULL,
    lease_ttl float8,
    lease_deadline timestamptz,
    PRIMARY KEY (node, name, sid, hold)
);
ALTER TABLE @S.owners ADD COLUMN IF NOT EXISTS lease_ttl float8;
ALTER TABLE @S.owners ADD COLUMN IF NOT EXISTS lease_deadline timestamptz;
CREATE INDEX IF NOT EXISTS owners_sid ON @S.owners (sid);
CREATE INDEX IF NOT EXISTS owners_due ON @S.owners (node, lease_deadline)
    WHERE lease_deadline IS NOT NULL;
CREATE SEQUENCE IF NOT EXISTS @S.arrivals;
CREATE TABLE IF NOT EXISTS @S.waiters (
    node text NOT NULL,
    name text NOT NULL,
    sid bigint NOT NULL,
    hold bigint NOT NULL,
    cnt numeric(20, 0) NOT NULL,
    data bytea NOT NULL,
    arrival bigint NOT NULL,
    deadline timestamptz,
    request_id bigint NOT NULL,
    PRIMARY KEY (node, name, sid, hold)
);
CREATE INDEX IF NOT EXISTS waiters_queue ON @S.waiters (node, name, arrival);
CREATE INDEX IF NOT EXISTS waiters_sid ON @S.waiters (sid);
CREATE INDEX IF NOT EXISTS waiters_due ON @S.waiters (node, deadline) WHERE deadline IS NOT NULL;
-- Version 2: who runs each session's client, and when things happened (database time).
ALTER TABLE @S.sessions ADD COLUMN IF NOT EXISTS host text NOT NULL DEFAULT '';
ALTER TABLE @S.sessions ADD COLUMN IF NOT EXISTS pid bigint NOT NULL DEFAULT 0;
ALTER TABLE @S.sessions ADD COLUMN IF NOT EXISTS client_name text NOT NULL DEFAULT '';
ALTER TABLE @S.sessions ADD COLUMN IF NOT EXISTS created_at timestamptz;
ALTER TABLE @S.owners ADD COLUMN IF NOT EXISTS granted_at timestamptz;
ALTER TABLE @S.waiters ADD COLUMN IF NOT EXISTS queued_at timestamptz;
-- The listings page in code point order (COLLATE "C"), whatever the database's collation.
CREATE INDEX IF NOT EXISTS nodes_listed ON @S.nodes (name COLLATE "C");
CREATE INDEX IF NOT EXISTS semaphores_listed ON @S.semaphores (node, name COLLATE "C");
CREATE INDEX IF NOT EXISTS sessions_listed ON @S.sessions (node, id) WHERE ended IS NULL;
-- Version 3: the armed watches (a change notifies s<name> only when one is here).
CREATE TABLE IF NOT EXISTS @S.watches (
    node text NOT NULL,
    name text NOT NULL,
    sid bigint NOT NULL,
    watch bigint NOT NULL,
    PRIMARY KEY (node, name, sid, watch)
);
CREATE INDEX IF NOT EXISTS watches_sid ON @S.watches (sid);
-- Version 3: fencing tokens from a sequence (no row that every grant updates).
CREATE SEQUENCE IF NOT EXISTS @S.tokens;
-- Version 4: the members of an all-or-none set share an arrival (grp) and are
-- granted in the order of its names (grp_place). The partial indexes hold their rows
-- only: the queues an all-or-none set waits in, and a set's members. (The columns and
-- indexes keep the sets' old name, "group": they are those of the schemas in use.)
ALTER TABLE @S.waiters ADD COLUMN IF NOT EXISTS grp bigint;
ALTER TABLE @S.waiters ADD COLUMN IF NOT EXISTS grp_place smallint;
CREATE INDEX IF NOT EXISTS waiters_grouped ON @S.waiters (node, name) WHERE grp IS NOT NULL;
CREATE INDEX IF NOT EXISTS waiters_group ON @S.waiters (node, sid, grp) WHERE grp IS NOT NULL;
-- The counter row of versions 1 and 2 hands its last value over and goes. Its
-- ACCESS EXCLUSIVE lock waits for the grants that updated it to commit, so the
-- value read is the last one ever handed out; a grant of an older client that
-- comes after fails (the table is gone) instead of repeating a token. It comes
-- after every ALTER and CREATE INDEX above: a grant holding the counter has already
-- locked every table it goes on to use, so it never waits for this migration.
DO $$
DECLARE
    last bigint;
BEGIN
    IF to_regclass('@S.counter') IS NOT NULL THEN
        LOCK TABLE @S.counter IN ACCESS EXCLUSIVE MODE;
        SELECT greatest(max(last_token), (SELECT max(token) FROM @S.owners))
            INTO last FROM @S.counter;
        IF last > 0 THEN
            PERFORM setval('@S.tokens', greatest(last, (SELECT last_value FROM @S.tokens)));
        END IF;
        DROP TABLE @S.counter;
    END IF;
END $$;
-- Version 5: the armed prefix watches (a change notifies s<name> when a watch of
-- the name or of a prefix of it is registered: watched()).
CREATE TABLE IF NOT EXISTS @S.prefix_watches (
    node text NOT NULL,
    prefix text NOT NULL,
    sid bigint NOT NULL,
    watch bigint NOT NULL,
    PRIMARY KEY (node, sid, watch)
);
CREATE INDEX IF NOT EXISTS prefix_watches_sid ON @S.prefix_watches (sid);
CREATE TABLE IF NOT EXISTS @S.outcomes (
    sid bigint NOT NULL,
    node text NOT NULL,
    name text NOT NULL,
    hold bigint NOT NULL,
    request_id bigint NOT NULL,
    code text NOT NULL,
    message text NOT NULL,
    PRIMARY KEY (sid, node, name, hold)
);
-- Version 6: max_hold. A grant's end (database time; NULL: none), after every other
-- column of owners (the grants' INSERTs list them in order), and a waiter's own bound.
ALTER TABLE @S.owners ADD COLUMN IF NOT EXISTS ends_at timestamptz;
ALTER TABLE @S.waiters ADD COLUMN IF NOT EXISTS max_hold float8;
"""

#: Shared helpers. Errors are raised with SQLSTATEs of class ``TN`` that the
#: Python side maps to tenure.errors (:mod:`tenure.backends.postgres._calls`).
HELPERS: Final = r"""
CREATE OR REPLACE FUNCTION @S.fail(p_code text, p_message text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = p_code, MESSAGE = p_message;
END $$;

CREATE OR REPLACE FUNCTION @S.channel(p_node text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT 'tn_' || left(md5(@N || '/' || p_node), 24)
$$;

-- A grant's token. Its caller holds the semaphore's row lock, taken after the
-- previous grant of it committed, whose nextval came before that commit: so each
-- semaphore's tokens increase in grant order (docs/guarantees.md, promise 2).
CREATE OR REPLACE FUNCTION @S.next_token() RETURNS bigint
LANGUAGE sql AS $$
    SELECT nextval('@S.tokens')
$$;

CREATE OR REPLACE FUNCTION @S.seconds_until(p_at timestamptz) RETURNS float8
LANGUAGE sql AS $$
    -- NULL stays NULL (nothing due): greatest() would make it 0.
    SELECT CASE WHEN p_at IS NOT NULL
                THEN greatest(0, extract(epoch FROM p_at - clock_timestamp()))::float8 END
$$;

-- The acting session, share-locked (its expiry, close or takeover waits for this
-- transaction), or the error that says why it cannot act.
CREATE OR REPLACE FUNCTION @S.live(p_sid bigint, p_secret bytea, p_seq int)
RETURNS @S.sessions LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    s sessions;
BEGIN
    SELECT * INTO s FROM sessions WHERE id = p_sid FOR SHARE;
    IF NOT FOUND OR s.secret <> p_secret THEN
        PERFORM fail('TN001',
                     format('session %s has expired (it is gone from the database)', p_sid));
    ELSIF s.ended = 'expired' THEN
        PERFORM fail('TN001', format('session %s expired: its recovery window passed', p_sid));
    ELSIF s.ended = 'killed' THEN
        PERFORM fail('TN001', format('session %s was ended by an operator (kill_session)',
                                     p_sid));
    ELSIF s.ended = 'dropped' THEN
        PERFORM fail('TN002', format('node %L was dropped', s.node));
    ELSIF s.ended IS NOT NULL THEN
        PERFORM fail('TN002', format('session %s was closed', p_sid));
    ELSIF s.seq <> p_seq THEN
        PERFORM fail('TN003', format('session %s was taken over by a resumed client', p_sid));
    ELSIF s.deadline < clock_timestamp() THEN
        PERFORM fail('TN001', format('session %s expired: its recovery window passed', p_sid));
    END IF;
    RETURN s;
END $$;

CREATE OR REPLACE FUNCTION @S.config(p_node text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT config FROM @S.nodes WHERE name = p_node
$$;

CREATE OR REPLACE FUNCTION @S.check_data(p_what text, p_data bytea, p_node text)
RETURNS void LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    allowed bigint := (config(p_node) ->> 'max_data_size')::bigint;
BEGIN
    IF length(p_data) > allowed THEN
        PERFORM fail('TN413', format('%s is %s bytes; max_data_size is %s',
                                     p_what, length(p_data), allowed));
    END IF;
END $$;

-- When a grant made now ends whatever its session does (NULL: never): the earlier of
-- its own max_hold (p_max_hold, NULL: none) and the node's after now, and never after
-- the end of the hold it replaces (p_old: an upgrade's). The engine's rule
-- (tenure/_core/shared_steps.py, grant); its lease deadline is never after it.
CREATE OR REPLACE FUNCTION @S.grant_end(p_node text, p_max_hold float8, p_old timestamptz)
RETURNS timestamptz LANGUAGE sql SET search_path = @S, pg_catalog AS $$
    -- (least ignores NULLs: NULL only when neither bounds it.)
    SELECT least(clock_timestamp() + make_interval(
                     secs => least((config(p_node) ->> 'max_hold')::float8, p_max_hold)),
                 p_old)
$$;

-- A grant's lease TTL (or its max_hold) ran out (by the database's clock): it ends as
-- a failed holder's does (lock-delay), its client reads why, and the queue moves. The
-- caller locked the semaphore. Its session is told 'l<sid>' (a TTL) or 'm<sid>' (its
-- max_hold's end).
CREATE OR REPLACE FUNCTION @S.lease_ran_out(o @S.owners) RETURNS void
LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    delay float8 := coalesce((config(o.node) ->> 'lock_delay')::float8, 0);
    ended boolean;
BEGIN
    DELETE FROM owners WHERE node = o.node AND name = o.name AND sid = o.sid
        AND hold = o.hold AND token = o.token;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF delay > 0 THEN
        UPDATE semaphores SET blocked_until = greatest(
            coalesce(blocked_until, clock_timestamp()),
            clock_timestamp() + make_interval(secs => delay))
        WHERE node = o.node AND name = o.name;
    END IF;
    ended := o.ends_at IS NOT NULL AND o.ends_at <= clock_timestamp();
    INSERT INTO outcomes VALUES (o.sid, o.node, o.name, o.hold, o.request_id, 'lease_lost',
        CASE WHEN ended THEN format('the lease of %L ended: held for its max_hold', o.name)
        ELSE format('the lease of %L ran out (its TTL, %ss, passed without a renewal)',
                    o.name, o.lease_ttl) END)
    ON CONFLICT (sid, node, name, hold) DO UPDATE
        SET request_id = excluded.request_id, code = excluded.code,
            message = excluded.message;
    PERFORM settle(o.node, o.name, true);
    PERFORM pg_notify(channel(o.node), CASE WHEN ended THEN 'm' ELSE 'l' END || o.sid);
END $$;

-- Seconds until the node's next deadline (a session's window, an acquire's timeout,
-- a lock-delay's end, a lease TTL, a claim's end), by the database's clock; NULL when
-- nothing is due.
CREATE OR REPLACE FUNCTION @S.next_due(p_node text) RETURNS float8
LANGUAGE sql SET search_path = @S, pg_catalog AS $$
    SELECT seconds_until(least(
        (SELECT min(deadline) FROM sessions WHERE node = p_node AND ended IS NULL),
        (SELECT min(deadline) FROM waiters WHERE node = p_node AND deadline IS NOT NULL),
        (SELECT min(blocked_until) FROM semaphores
         WHERE node = p_node AND blocked_until IS NOT NULL),
        (SELECT min(lease_deadline) FROM owners
         WHERE node = p_node AND lease_deadline IS NOT NULL),
        (SELECT min(ends_at) FROM claims WHERE node = p_node)))
$$;
"""
