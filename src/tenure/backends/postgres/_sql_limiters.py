"""PL/pgSQL of rate limiters: a reservation of units, in one call.

A rate limiter is a semaphore whose data is a bucket (:mod:`tenure._core.rates`,
whose rule this restates); the call takes the acting session's id, secret and
``seq`` as every function does (:mod:`tenure.backends.postgres._sql_semaphores`).
"""

from __future__ import annotations

from typing import Final

__all__ = ["LIMITER_FUNCTIONS"]

LIMITER_FUNCTIONS: Final = r"""
-- A rate limiter's reservation: tenure._core.rates restated (GCRA over the bucket
-- 'limiter RATE BURST TAT' in the semaphore's data), on the server's clock
-- (clock_timestamp(), UNIX seconds), the row locked FOR UPDATE. The reply is text,
-- 'GRANTED WAIT AT' (floats written to round-trip: PostgreSQL 12 and later).
CREATE OR REPLACE FUNCTION @S.reserve_units(
    p_sid bigint, p_secret bytea, p_seq int, p_name text, p_count float8,
    p_max_wait float8
) RETURNS text LANGUAGE plpgsql SET search_path = @S, pg_catalog AS $$
DECLARE
    s sessions := live(p_sid, p_secret, p_seq);
    old bytea;
    words text[];
    rate float8;
    burst float8;
    tat float8;
    now_s float8 := extract(epoch FROM clock_timestamp());
    new_tat float8;
    at_s float8;
    wait_s float8;
BEGIN
    SELECT data INTO old FROM semaphores WHERE node = s.node AND name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM fail('TN404', format('semaphore %L does not exist', p_name));
    END IF;
    BEGIN
        words := string_to_array(convert_from(old, 'UTF8'), ' ');
        IF array_length(words, 1) = 4 AND words[1] = 'limiter' THEN
            rate := words[2]::float8;
            burst := words[3]::float8;
            tat := words[4]::float8;
        END IF;
    EXCEPTION WHEN others THEN  -- not text, or not numbers
        rate := NULL;
    END;
    IF rate IS NULL OR NOT (rate > 0 AND burst > 0 AND rate <= 1e15 AND burst <= 1e15
                            AND tat > '-Infinity'::float8 AND tat < 'Infinity'::float8)
       OR rate = 'NaN'::float8 OR burst = 'NaN'::float8 OR tat = 'NaN'::float8 THEN
        PERFORM fail('TN412', format(
            'semaphore %L is not a rate limiter (its data is not ''limiter RATE BURST TAT'')',
            p_name));
    END IF;
    IF p_count > burst THEN
        PERFORM fail('TN413', format('%s units exceed the burst %s of rate limiter %L',
                                     p_count, burst, p_name));
    END IF;
    new_tat := greatest(tat, now_s) + p_count / rate;
    at_s := greatest(new_tat - burst / rate, now_s);
    wait_s := at_s - now_s;
    IF p_max_wait IS NOT NULL AND wait_s > p_max_wait THEN
        RETURN '0 ' || wait_s::text || ' ' || at_s::text;
    END IF;
    UPDATE semaphores
    SET data = convert_to(format('limiter %s %s %s', words[2], words[3], new_tat::text), 'UTF8')
    WHERE node = s.node AND name = p_name;
    PERFORM pg_notify(channel(s.node), 's' || p_name);
    RETURN '1 ' || wait_s::text || ' ' || at_s::text;
END $$;
"""
