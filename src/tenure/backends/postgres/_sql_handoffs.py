"""PL/pgSQL of hand-offs (schema version 6): offer a hold, adopt an offered one.

The engine's OfferHold and AdoptHold (:mod:`tenure._core.handlers.handoffs`)
restated in one transaction each, the semaphore's row locked ``FOR UPDATE``. An offer
is the SHA-256 digest of its secret in the hold's row (``owners.offer``): a restate in
place (an ``UPDATE``) keeps it, and every new grant of the hold (an upgrade, a waiter
granted: a row deleted and inserted) has none. The adopter sends the secret; the
database hashes it (``sha256``) and compares, so the table never holds what adopts.
An adoption deletes the holder's row, tells its client (an ``outcomes`` row, as a
forced delete's, and ``l<sid>`` on the node's channel: its client reads its holds
back) and inserts the adopter's with ``next_token()``: a new, greater token.

``@S`` stands for the quoted schema (:mod:`._ddl`).
"""

from __future__ import annotations

from typing import Final

__all__ = ["HANDOFF_FUNCTIONS", "HANDOFF_TABLES"]

#: Version 6's column (a version-5 schema is upgraded by adding it: NULL, not offered).
HANDOFF_TABLES: Final = r"""
-- Version 6: the digest of a hand-off's secret, kept with the hold it offers.
ALTER TABLE @S.owners ADD COLUMN IF NOT EXISTS offer bytea;
"""

HANDOFF_FUNCTIONS: Final = r"""
-- Keep the digest of a hand-off's secret with the hold (the latest offer replaces an
-- earlier one); the hold as offered. Sent again, it offers the same again.
CREATE OR REPLACE FUNCTION @S.offer_hold(
    p_sid bigint, p_secret bytea, p_seq int, p_name text, p_hold bigint, p_digest bytea
) RETURNS jsonb LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    s sessions := live(p_sid, p_secret, p_seq);
    o owners;
BEGIN
    IF length(p_digest) IS DISTINCT FROM 32 THEN
        PERFORM fail('TN400', 'a hand-off''s digest must be 32 bytes (SHA-256)');
    END IF;
    PERFORM 1 FROM semaphores WHERE node = s.node AND name = p_name FOR UPDATE;
    UPDATE owners SET offer = p_digest
    WHERE node = s.node AND name = p_name AND sid = p_sid AND hold = p_hold
    RETURNING * INTO o;
    IF NOT FOUND THEN
        PERFORM fail('TN404', format('session %s holds no tokens of %L', p_sid, p_name));
    END IF;
    RETURN jsonb_build_object('token', o.token, 'count', o.cnt, 'ttl', o.lease_ttl);
END $$;

-- Move the hold p_holder_hold of session p_holder on p_name, offered with the secret
-- p_offer while its token was p_token, to this session's hold p_hold under a new
-- token. Replies the new grant with its data, or {"adopted": false}: no such hold is
-- offered so (one answer for every case; the client raises LeaseLostError, which a
-- failure here would not be: it would read as this session's own loss). p_request
-- makes it safe to send again: a second finds its own grant and answers it.
CREATE OR REPLACE FUNCTION @S.adopt_hold(
    p_sid bigint, p_secret bytea, p_seq int, p_name text, p_hold bigint,
    p_holder bigint, p_holder_hold bigint, p_token bigint, p_offer bytea, p_request bigint
) RETURNS jsonb LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    s sessions := live(p_sid, p_secret, p_seq);
    ttl float8 := (config(s.node) ->> 'default_lease')::float8;
    o owners;
    mine owners;
    token bigint;
    ends timestamptz;
BEGIN
    IF NOT lock_semaphore(s.node, p_name) THEN
        RETURN jsonb_build_object('adopted', false);
    END IF;
    SELECT * INTO mine FROM owners
    WHERE node = s.node AND name = p_name AND sid = p_sid AND hold = p_hold;
    IF mine.request_id = p_request THEN  -- sent again: it was applied
        RETURN jsonb_build_object('token', mine.token, 'count', mine.cnt,
                                  'ttl', mine.lease_ttl, 'data', encode(mine.data, 'hex'));
    END IF;
    SELECT * INTO o FROM owners
    WHERE node = s.node AND name = p_name AND sid = p_holder AND hold = p_holder_hold;
    IF NOT FOUND OR o.token <> p_token OR o.offer IS NULL
       OR o.offer <> sha256(p_offer) THEN
        RETURN jsonb_build_object('adopted', false);
    END IF;
    IF mine.sid IS NOT NULL OR EXISTS (
        SELECT 1 FROM waiters
        WHERE node = s.node AND name = p_name AND sid = p_sid AND hold = p_hold
    ) THEN
        PERFORM fail('TN412', format('session %s''s hold %s on %L is taken: adopt as '
                                     'another hold', p_sid, p_hold, p_name));
    END IF;
    DELETE FROM owners
    WHERE node = s.node AND name = p_name AND sid = p_holder AND hold = p_holder_hold;
    INSERT INTO outcomes VALUES (o.sid, o.node, o.name, o.hold, o.request_id, 'lease_lost',
        format('the hold on %L was handed off: session %s adopted it', p_name, p_sid))
    ON CONFLICT (sid, node, name, hold) DO UPDATE
        SET request_id = excluded.request_id, code = excluded.code,
            message = excluded.message;
    token := next_token();
    -- The grant keeps the end of the hold it takes over (its max_hold: a hand-off is
    -- no way past it), and the node's max_hold bounds it from now, as any grant's.
    ends := grant_end(s.node, NULL, o.ends_at);
    INSERT INTO owners (node, name, sid, hold, cnt, data, token, request_id, lease_ttl,
                        lease_deadline, granted_at, ends_at)
    VALUES (s.node, p_name, p_sid, p_hold, o.cnt, o.data, token, p_request, ttl,
            least(clock_timestamp() + make_interval(secs => ttl), ends), clock_timestamp(),
            ends);
    IF ends IS NOT NULL THEN  -- a new deadline of the node: its clients arm a timer
        PERFORM pg_notify(channel(s.node), 't');
    END IF;
    PERFORM pg_notify(channel(s.node), 'l' || o.sid);
    PERFORM settle(s.node, p_name, true);
    RETURN jsonb_build_object('token', token, 'count', o.cnt, 'ttl', ttl,
                              'data', encode(o.data, 'hex'));
END $$;
"""
