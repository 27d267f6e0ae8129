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

-- hilo_node_id, hilo_node_of, node_bits. 06_cluster left this database a
-- hilo cluster of one node, node 1; a database in no cluster has no node
-- id, and its slice is node 0's.
SELECT hilo_node_id() AS node_id, (SELECT node_id FROM hilo.nodes WHERE is_self) AS listed;
CREATE DATABASE hilo_keys_alone;
\c hilo_keys_alone
CREATE EXTENSION hilo;
SELECT hilo_node_id() IS NULL AS no_node_id;
SELECT hilo_create('alone', node_bits => 4);
SELECT hilo_nextval('alone') AS first_in_slice_0, hilo_node_of('alone', hilo_nextval('alone'));
SELECT hilo_create('alone_plain');
SELECT hilo_node_of('alone_plain', hilo_nextval('alone_plain')) AS own_window_node_0,
       hilo_node_of('alone_plain', 100000000) AS no_window_yet;
-- Alone, a name whose dropped sequence handed out IDs comes back with other
-- node_bits too: its one mark covers every ID it handed out.
SELECT hilo_drop('alone');
SELECT hilo_create('alone', node_bits => 2);
SELECT hilo_nextval('alone') > (SELECT high_water_mark FROM hilo.dropped_names
                                  WHERE name = 'alone') AS above_the_dropped;
-- Slice 0 used up (node_bits 16: 2^47 - 1 IDs, fewer than max_value):
-- takes, hilo_nextval and hilo_uuid say at once that it is exhausted on
-- this node (2200H), and hilo.status counts nothing left.
SELECT hilo_create('alone_full', node_bits => 16);
SELECT hilo_take('alone_full', 3);
SELECT hilo_take('alone_full', 140737488355327, true);
SELECT hilo_take('alone_full', 1);
:sqlstate
SELECT hilo_nextval('alone_full');
:sqlstate
SELECT hilo_uuid('alone_full');
:sqlstate
SELECT ids_left, lasts FROM hilo.status WHERE sequence = 'alone_full';
\c contrib_regression
DROP DATABASE hilo_keys_alone;

-- node_bits => 2: node ids 0..3, each node's slice holds 2^61 IDs and
-- starts at node_id * 2^61. This node (1) hands out IDs of its slice only.
SELECT hilo_create('sliced', node_bits => 2, window_size => 1000, block_size => 10);
SELECT name, node_bits FROM hilo.sequences WHERE name = 'sliced';
CREATE TABLE sliced_rows (id bigint PRIMARY KEY DEFAULT hilo_nextval('sliced'), n int);
INSERT INTO sliced_rows (n) SELECT i FROM generate_series(1, 300) i;
SELECT count(*), min(id) - 2305843009213693952 AS min_above_slice_start,
       bool_and(id >> 61 = 1) AS all_in_slice_1,
       bool_and(hilo_node_of('sliced', id) = hilo_node_id()) AS node_of_is_this_node
  FROM sliced_rows;
SELECT lower(r) >> 61 AS take_in_slice, upper(r) - lower(r) AS ids
  FROM unnest(hilo_take('sliced', 5000)) AS r;
SELECT hilo_uuid_id(hilo_uuid('sliced')) >> 61 AS uuid_id_in_slice;
-- The node of any ID follows from its bits, whoever issued it.
SELECT hilo_node_of('sliced', 1) AS n0, hilo_node_of('sliced', 2305843009213693952) AS n1,
       hilo_node_of('sliced', 6917529027641081856) AS n3,
       hilo_node_of('sliced', 9223372036854775806) AS n3_last,
       hilo_node_of('sliced', 0) AS not_an_id, hilo_node_of('sliced', -5) AS negative;
-- In a cluster (here of one) a name whose dropped sequence handed out IDs
-- keeps its node_bits: each node lifts only its own mark, and other
-- node_bits move every node's slice onto IDs other nodes handed out.
SELECT hilo_create('wide', node_bits => 2);
SELECT hilo_nextval('wide') >> 61 AS in_slice;
SELECT hilo_drop('wide');
SELECT hilo_create('wide', node_bits => 3);
:sqlstate
SELECT hilo_create('wide', node_bits => 2);
SELECT hilo_drop('wide');
-- A slice with nothing under max_value: exhausted on this node.
SELECT hilo_create('sliced_small', node_bits => 1, max_value => 1000);
SELECT hilo_take('sliced_small', 1);
:sqlstate
SELECT hilo_nextval('sliced_small');
:sqlstate
SELECT ids_left FROM hilo.status WHERE sequence = 'sliced_small';
-- A sequence without node_bits: the node that holds the ID's window.
SELECT hilo_create('keys_plain', window_size => 100);
SELECT hilo_node_of('keys_plain', hilo_nextval('keys_plain')) AS own_window,
       hilo_node_of('keys_plain', 9000000000000000000) AS no_window_yet;

-- Errors.
SELECT hilo_create('bad_bits', node_bits => 17);
:sqlstate
SELECT hilo_create('bad_bits', node_bits => -1);
:sqlstate
SELECT hilo_create('bad_bits', node_bits => NULL);
:sqlstate
SELECT hilo_create('bad_bits', node_bits => 1, monotonic => true);
:sqlstate
-- (A node id that does not fit in node_bits: test/t/400_node_slices.pl.)
SELECT hilo_node_of('no such sequence', 1);
:sqlstate
SELECT hilo_node_of(NULL, 1);
:sqlstate
SELECT hilo_node_of('sliced', NULL);
:sqlstate
CREATE ROLE regress_keys_user;
SET ROLE regress_keys_user;
SELECT hilo_node_of('sliced', 1);
:sqlstate
SELECT hilo_node_id() AS anyone_reads_node_id;
RESET ROLE;
DROP ROLE regress_keys_user;
DROP TABLE sliced_rows;
SELECT hilo_drop('sliced'), hilo_drop('sliced_small'), hilo_drop('keys_plain');
