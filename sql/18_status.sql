-- hilo.status counts every ID handed out, by every path, and never shows
-- more left than the sequence has.

\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
-- The allocator updates rates once a second at most (every hilo.naptime):
-- waits (at most 30 s) until a sequence shows one.
CREATE FUNCTION pg_temp.rated(seq text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..300 LOOP
        IF (SELECT ids_per_second > 0 FROM hilo.status WHERE sequence = seq) THEN
            RETURN true;
        END IF;
        PERFORM pg_sleep(0.1);
    END LOOP;
    RETURN false;
END $$;
-- Fresh: nothing handed out, everything left, no forecast.
SELECT hilo_create('st_fresh', max_value => 1000000);
SELECT sequence, issued_since_start, ids_per_second, ids_left, lasts, ordering, serving_node
  FROM hilo.status WHERE sequence = 'st_fresh';
-- The default max_value: ids_left is max_value - start_value + 1, no more.
SELECT hilo_create('st_fresh_max');
SELECT ids_left = 9223372036854775806 AS all_left FROM hilo.status WHERE sequence = 'st_fresh_max';
SELECT hilo_take('st_fresh_max', 3);
SELECT ids_left = 9223372036854775806 - 3 AS all_but_three
  FROM hilo.status WHERE sequence = 'st_fresh_max';

-- Huge takes (larger than block_size: no pool) count, and give a rate
-- and a forecast.
SELECT hilo_create('st_huge', block_size => 1000, max_value => 100000000);
DO $$ BEGIN FOR i IN 1..6 LOOP PERFORM hilo_take('st_huge', 25000); END LOOP; END $$;
SELECT pg_temp.rated('st_huge');
SELECT issued_since_start, ids_per_second > 0 AS has_rate, lasts IS NOT NULL AS has_forecast,
       ids_left = 100000000 - 150000 AS left_right
  FROM hilo.status WHERE sequence = 'st_huge';

-- Every path adds up: a small take (pool), nextval (buffers), a push and
-- a take of what was pushed (free list).
SELECT hilo_create('st_paths', block_size => 10);
SELECT hilo_take('st_paths', 5) IS NOT NULL AS small_take;
SELECT hilo_nextval('st_paths') > 0 AS got_one;
SELECT lower(r) AS lo, upper(r) - lower(r) AS len
  FROM unnest(hilo_take('st_paths', 1000)) r ORDER BY 1 LIMIT 1 \gset
SELECT :len >= 100 AS contiguous;
SELECT hilo_push('st_paths', int8multirange(int8range(:lo, :lo + 100)));
SELECT hilo_take('st_paths', 100) IS NOT NULL AS took_again;
SELECT issued_since_start >= 5 + 1 + 1000 + 100 AS all_counted
  FROM hilo.status WHERE sequence = 'st_paths';

-- Exhausted: nothing left, the forecast is zero, not NULL or negative.
SELECT hilo_create('st_full', max_value => 5000, block_size => 100);
SELECT hilo_take('st_full', 5000);
SELECT pg_temp.rated('st_full');
SELECT issued_since_start, ids_left, ids_per_second > 0 AS has_rate, lasts
  FROM hilo.status WHERE sequence = 'st_full';
SELECT hilo_take('st_full', 1);
:sqlstate

SELECT hilo_drop('st_fresh'), hilo_drop('st_fresh_max'), hilo_drop('st_huge'),
       hilo_drop('st_paths'), hilo_drop('st_full');
