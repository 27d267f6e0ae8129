-- Keys for sharded tables: hilo_uuid, hilo_uuid_id, hilo_uuid_time.
\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
\set VERBOSITY default
SELECT hilo_create('keys', block_size => 100);

-- A UUID column keyed by hilo_uuid: version 7, variant 10 (RFC 9562), the
-- ID inside, the time now; strictly increasing in the order of insertion.
CREATE TABLE keyed (id uuid PRIMARY KEY DEFAULT hilo_uuid('keys'), n int);
INSERT INTO keyed (n) SELECT i FROM generate_series(1, 500) i;
SELECT count(*) AS rows, count(DISTINCT id) AS distinct_uuids,
       count(DISTINCT hilo_uuid_id(id)) AS distinct_ids,
       bool_and(substr(id::text, 15, 1) = '7') AS version_7,
       bool_and(substr(id::text, 20, 1) IN ('8', '9', 'a', 'b')) AS variant_10,
       bool_and(abs(extract(epoch FROM hilo_uuid_time(id) - clock_timestamp())) < 60) AS time_now
  FROM keyed;
SELECT bool_and(id > prev) AS strictly_increasing
  FROM (SELECT id, lag(id) OVER (ORDER BY n) AS prev FROM keyed) t WHERE prev IS NOT NULL;
-- The IDs are the sequence's: taken by hilo_nextval, never again by a take.
SELECT bool_and(NOT EXISTS (SELECT 1 FROM keyed WHERE hilo_uuid_id(id) <@ r)) AS disjoint
  FROM unnest(hilo_take('keys', 1000)) AS r;
-- The time reads back to the millisecond; the 48 bits are Unix ms.
SELECT hilo_uuid_time('01a2108c-9d67-7000-8000-000000000003') AS time,
       hilo_uuid_id('01a2108c-9d67-7000-8000-000000000003') AS id;
SELECT hilo_uuid_id('00000000-0000-7001-bfff-ffffffffffff') AS top_bit_and_low_bits,
       hilo_uuid_id('ffffffff-ffff-7ffe-8000-000000000001') AS counter_ignored,
       hilo_uuid_time('ffffffff-ffff-7ffe-8000-000000000001') AS last_ms;

-- Uniqueness does not depend on the clock (hilo.uuid_clock_shift, a test
-- hook for superusers, moves the clock hilo_uuid reads). Stepped back a
-- day, a session keeps its previous millisecond and still increases.
CREATE TABLE clocked (id uuid PRIMARY KEY, session int, n int);
INSERT INTO clocked VALUES (hilo_uuid('keys'), 1, 1);
SET hilo.uuid_clock_shift = '-1d';
INSERT INTO clocked VALUES (hilo_uuid('keys'), 1, 2);
SELECT b.id > a.id AS increases, hilo_uuid_time(b.id) = hilo_uuid_time(a.id) AS kept_millisecond
  FROM clocked a, clocked b WHERE a.n = 1 AND b.n = 2;
-- An ID lower than the last one in the same millisecond (another sequence
-- with lower IDs) moves the counter on: still increasing.
SELECT hilo_create('keys_low');
INSERT INTO clocked VALUES (hilo_uuid('keys_low'), 1, 3);
SELECT c.id > b.id AS increases, hilo_uuid_id(c.id) < hilo_uuid_id(b.id) AS lower_id,
       hilo_uuid_time(c.id) = hilo_uuid_time(b.id) AS same_millisecond
  FROM clocked b, clocked c WHERE b.n = 2 AND c.n = 3;
DELETE FROM clocked WHERE n = 3;
-- A new session whose clock is a day behind: its UUIDs sort below the
-- earlier ones, and none equals any of them (their IDs differ).
\c
SET hilo.uuid_clock_shift = '-1d';
INSERT INTO clocked SELECT hilo_uuid('keys'), 2, 10 + i FROM generate_series(1, 100) i;
\c
SET hilo.uuid_clock_shift = '-2d';
INSERT INTO clocked SELECT hilo_uuid('keys'), 3, 200 + i FROM generate_series(1, 100) i;
RESET hilo.uuid_clock_shift;
SELECT session, count(*), count(DISTINCT hilo_uuid_id(id)) AS ids,
       round(extract(epoch FROM clock_timestamp() - max(hilo_uuid_time(id))) / 86400) AS days_back
  FROM clocked GROUP BY session ORDER BY session;
SELECT count(*) AS uuids, count(DISTINCT id) AS distinct_uuids,
       count(DISTINCT hilo_uuid_id(id)) AS distinct_ids FROM clocked;
SELECT (SELECT id FROM clocked WHERE session = 3 ORDER BY id DESC LIMIT 1)
       < (SELECT id FROM clocked WHERE session = 2 ORDER BY id LIMIT 1) AS older_clock_sorts_lower;

-- Errors.
SELECT hilo_uuid(NULL);
:sqlstate
SELECT hilo_uuid('no such sequence');
:sqlstate
CREATE TABLE bad_default (id uuid DEFAULT hilo_uuid('no such sequence'));
:sqlstate
SELECT hilo_uuid_id('6ba7b810-9dad-41d1-80b4-00c04fd430c8');  -- version 4
:sqlstate
SELECT hilo_uuid_time('6ba7b810-9dad-71d1-c0b4-00c04fd430c8');  -- variant 110
:sqlstate
SELECT hilo_uuid_id(NULL), hilo_uuid_time(NULL);
BEGIN READ ONLY;
SELECT hilo_uuid('keys');
:sqlstate
ROLLBACK;
SELECT hilo_create('keys_small', max_value => 2);
SELECT hilo_uuid('keys_small') IS NOT NULL AS first, hilo_uuid('keys_small') IS NOT NULL AS second;
SELECT hilo_uuid('keys_small');
:sqlstate
CREATE ROLE regress_keys_user;
SET ROLE regress_keys_user;
SELECT hilo_uuid('keys');
:sqlstate
SET hilo.uuid_clock_shift = '1h';
:sqlstate
SELECT hilo_uuid_id('01a2108c-9d67-7000-8000-000000000003') AS anyone_reads_ids;
RESET ROLE;
DROP ROLE regress_keys_user;
DROP TABLE keyed, clocked;
SELECT hilo_drop('keys'), hilo_drop('keys_low'), hilo_drop('keys_small');
