-- hilo_push and hilo_push_ranges: checks, recycling order, transactions.
\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
\set VERBOSITY default
SELECT hilo_create('p', window_size => 100, block_size => 1);
SELECT hilo_take('p', 50);

-- A valid push returns how many IDs it recycles.
SELECT hilo_push('p', '{[10,19]}');
-- Recycled IDs come back before fresh ones, lowest first.
SELECT hilo_push('p', '{[3,4], [40,40]}');
SELECT hilo_take('p', 4);
SELECT hilo_take('p', 20);

-- Refused, naming the offending IDs, changing nothing (22023).
-- Never handed out:
SELECT hilo_push('p', '{[60,70]}');
:sqlstate
SELECT hilo_push('p', '{[55,65]}');
:sqlstate
SELECT hilo_push('p', '{[1000000,1000010]}');
:sqlstate
-- Already free:
SELECT hilo_push('p', '{[5,6]}');
SELECT hilo_push('p', '{[5,6]}');
:sqlstate
SELECT hilo_push('p', '{[1,7]}');
:sqlstate
-- Outside [start_value, max_value]:
SELECT hilo_create('p2', start_value => 100, max_value => 200, block_size => 1);
SELECT hilo_take('p2', 101);
SELECT hilo_push('p2', '{[99,100]}');
:sqlstate
SELECT hilo_push('p2', '{[200,201]}');
:sqlstate
SELECT hilo_push('p2', '{[-5,0]}');
:sqlstate
-- Unbounded:
SELECT hilo_push('p2', '{[150,)}');
:sqlstate
SELECT hilo_push('p2', '{(,150]}');
:sqlstate
SELECT hilo_push('p2', '{(,)}');
:sqlstate
-- One bad range refuses the whole push: 30 and 31 stay handed out.
SELECT hilo_push('p', '{[30,31], [70,71]}');
:sqlstate
SELECT hilo_take('p', 3);

-- Overlapping input: a multirange merges it before hilo sees it...
SELECT '{[20,25], [23,28]}'::int8multirange;
-- ...but parallel arrays can overlap, and that is refused.
SELECT hilo_push_ranges('p', ARRAY[20, 23], ARRAY[25, 28]);
:sqlstate
SELECT hilo_push_ranges('p', ARRAY[30, 20, 25], ARRAY[30, 40, 26]);
:sqlstate
SELECT hilo_push_ranges('p', ARRAY[5], ARRAY[4]);
:sqlstate
SELECT hilo_push_ranges('p', ARRAY[5, 6], ARRAY[5]);
:sqlstate
SELECT hilo_push_ranges('p', ARRAY[5, NULL], ARRAY[5, 6]);
:sqlstate
-- Valid arrays, in any order; adjacent ones merge.
SELECT hilo_push_ranges('p', ARRAY[24, 20], ARRAY[25, 23]);
SELECT * FROM hilo_take_ranges('p', 7);

-- Empty pushes recycle nothing.
SELECT hilo_push('p', '{}');
SELECT hilo_push('p', '{[5,5)}');
SELECT hilo_push_ranges('p', '{}', '{}');

-- NULLs (22004) and unknown sequences (42704).
SELECT hilo_push(NULL, '{[1,2]}');
:sqlstate
SELECT hilo_push('p', NULL);
:sqlstate
SELECT hilo_push_ranges('p', NULL, ARRAY[1]);
:sqlstate
SELECT hilo_push_ranges('p', ARRAY[1], NULL);
:sqlstate
SELECT hilo_push('nope', '{[1,2]}');
:sqlstate
SELECT hilo_push_ranges('nope', ARRAY[1], ARRAY[2]);
:sqlstate
-- Read-only transactions refuse pushes (25006).
BEGIN READ ONLY;
SELECT hilo_push('p', '{[1,1]}');
:sqlstate
ROLLBACK;

-- A push takes effect at commit; a rolled-back push recycles nothing.
SELECT lower(r) AS lo, upper(r) - 1 AS hi FROM unnest(hilo_take('p', 3)) AS r \gset
BEGIN;
SELECT hilo_push('p', int8multirange(int8range(:lo, :hi, '[]')));
ROLLBACK;
SELECT hilo_take('p', 3) && int8multirange(int8range(:lo, :hi, '[]')) AS got_rolled_back_ids;
-- Within one transaction, a second push of the same IDs is refused.
BEGIN;
SELECT hilo_push('p', int8multirange(int8range(:lo, :hi, '[]')));
SELECT hilo_push('p', int8multirange(int8range(:hi, :hi, '[]')));
:sqlstate
ROLLBACK;
-- Committed, they come back first.
SELECT hilo_push('p', int8multirange(int8range(:lo, :hi, '[]')));
SELECT hilo_take('p', 3) = int8multirange(int8range(:lo, :hi, '[]')) AS recycled;

-- Adjacent pushes merge into one free range (the allocator merges them
-- shortly after the pushes commit). This sequence serves only takes larger
-- than its block, so it keeps no pool: a pool that serves nextval or small
-- takes would move the pushed IDs in, to hand them out first.
SELECT hilo_create('m', window_size => 100, block_size => 1);
SELECT hilo_take('m', 30);

SELECT hilo_push('m', '{[1,5]}');
SELECT hilo_push('m', '{[6,10]}');
SELECT hilo_push('m', '{[11,11], [20,22]}');
DO $$
BEGIN
    FOR i IN 1..200 LOOP
        EXIT WHEN (SELECT count(*) FROM hilo.free_ranges JOIN hilo.sequences USING (seq_id)
                    WHERE name = 'm') = 2;
        PERFORM pg_sleep(0.05);
    END LOOP;
END $$;
SELECT first_id, last_id FROM hilo.free_ranges JOIN hilo.sequences USING (seq_id)
 WHERE name = 'm' ORDER BY first_id;
SELECT hilo_take('m', 12);

-- The top of the ID space.
SELECT hilo_create('top_push', start_value => 9223372036854775805, block_size => 1);
SELECT hilo_take('top_push', 2);
SELECT hilo_push('top_push', '{[9223372036854775805,9223372036854775806]}');
SELECT hilo_push('top_push', '{[9223372036854775806,9223372036854775807)}');
:sqlstate
SELECT hilo_take('top_push', 2);

-- A push's checks read the catalog near what it pushes, not the whole span
-- between its lowest and highest ID: two IDs at the two ends of a free
-- list of 5,000 fragments, over 1,000 windows (used up one after another,
-- they are one row), read a few rows of each.
-- The rows read are this transaction's index statistics.
SELECT hilo_create('far', window_size => 10, block_size => 1);
CREATE TEMP TABLE far_taken AS
    SELECT i FROM (SELECT hilo_take('far', 10) AS m FROM generate_series(1, 1000)) t,
                  unnest(t.m) r, generate_series(lower(r), upper(r) - 1) i;
SELECT count(*), min(i), max(i) FROM far_taken;
SELECT max(window_end_value) > 10000 AS windows, count(*) <= 3 AS folded
  FROM hilo.windows JOIN hilo.sequences USING (seq_id)
 WHERE name = 'far';
SELECT hilo_push_ranges('far', array_agg(i ORDER BY i), array_agg(i ORDER BY i))
  FROM far_taken WHERE i % 2 = 1;
CREATE FUNCTION pg_temp.index_rows_read(tab regclass) RETURNS bigint
    LANGUAGE sql AS $$
    SELECT sum(pg_stat_get_xact_tuples_returned(indexrelid))::bigint
      FROM pg_index WHERE indrelid = tab $$;
BEGIN;
SELECT pg_temp.index_rows_read('hilo.free_ranges') AS free_before,
       pg_temp.index_rows_read('hilo.windows') AS windows_before \gset
SELECT hilo_push('far', '{[2,2], [9998,9998]}');
SELECT pg_temp.index_rows_read('hilo.free_ranges') - :free_before <= 10 AS few_free_rows_read,
       pg_temp.index_rows_read('hilo.windows') - :windows_before <= 10 AS few_windows_read;
-- Still refused when near an ID already free, or beyond what was handed out.
SAVEPOINT s;
SELECT hilo_push('far', '{[4,4], [9999,9999]}');
:sqlstate
ROLLBACK TO s;
SELECT hilo_push('far', '{[6,6], [10001,10001]}');
:sqlstate
ROLLBACK;
