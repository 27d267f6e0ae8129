-- hilo_nextval, pools and buffers, monotonic sequences, hilo_alter, views.
\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
\set VERBOSITY default
SHOW hilo.pool_low_water;
SHOW hilo.max_sequences;
SET hilo.pool_low_water = 4;
:sqlstate
SELECT hilo_create('n', block_size => 100);


-- Values strictly increase within a session and serve column defaults.
SELECT hilo_nextval('n'), hilo_nextval('n'), hilo_nextval('n');
CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT hilo_nextval('n'), item text);
INSERT INTO orders (item) SELECT 'item ' || i FROM generate_series(1, 250) i;
SELECT count(*), min(id), max(id), count(DISTINCT id) FROM orders;
SELECT bool_and(id > prev) AS strictly_increasing
  FROM (SELECT id, lag(id) OVER (ORDER BY item_no) AS prev
          FROM (SELECT id, substr(item, 6)::int AS item_no FROM orders) o) t
 WHERE prev IS NOT NULL;

-- This session's buffer: it hands out next_id up to end_id - 1.
SELECT sequence, next_id, end_id FROM hilo.buffers WHERE pid = pg_backend_pid();
SELECT sequence, open_windows, free_ids, buffered_ids, issued_since_start >= 253 AS counted
  FROM hilo.status WHERE sequence = 'n';

-- IDs that sit unissued in a buffer or the pool cannot be pushed (22023).
SELECT hilo_push('n', '{[300,300]}');
:sqlstate
SELECT hilo_push('n', '{[400,410]}');
:sqlstate
-- Issued ones can, and small takes hand them out first.
SELECT hilo_push('n', '{[2,3]}');
SELECT hilo_take('n', 3);

-- A take of more than a block is served by the allocator; it draws on the
-- pool too, and ranges stay disjoint from everything handed out.
SELECT sum(upper(r) - lower(r)) AS ids,
       bool_and(NOT EXISTS (SELECT 1 FROM orders WHERE id <@ r)) AS disjoint_from_orders
  FROM unnest(hilo_take('n', 1000)) AS r;

-- Errors: unknown sequence (42704), NULL (22004), bad name (22023),
-- read-only transaction (25006).
SELECT hilo_nextval('nope');
:sqlstate
SELECT hilo_nextval(NULL);
:sqlstate
SELECT hilo_nextval('');
:sqlstate
SELECT hilo_nextval(repeat('z', 256));
:sqlstate
BEGIN READ ONLY;
SELECT hilo_nextval('n');
:sqlstate
ROLLBACK;
-- A sequence created in this transaction serves IDs in it
-- (sql/11_one_transaction.sql has the rest).
BEGIN;
SELECT hilo_create('fresh_n');
SELECT hilo_nextval('fresh_n'), hilo_nextval('fresh_n');
ROLLBACK;

-- Exhaustion (2200H): a sequence of 5 IDs.
SELECT hilo_create('five', max_value => 5, block_size => 2);
SELECT hilo_nextval('five'), hilo_nextval('five'), hilo_nextval('five'),
       hilo_nextval('five'), hilo_nextval('five');
SELECT hilo_nextval('five');
:sqlstate

-- Drop and re-create: the new sequence never serves the old one's IDs.
SELECT hilo_create('again', block_size => 10);
SELECT hilo_nextval('again'), hilo_nextval('again');
SELECT hilo_drop('again');
SELECT hilo_nextval('again');
:sqlstate
SELECT hilo_create('again', start_value => 1000, block_size => 10);
SELECT hilo_nextval('again'), hilo_nextval('again');

-- hilo_alter changes settings; buffers and pool of the old settings are
-- skipped (a gap, never a repeat).
SELECT hilo_create('alt', block_size => 10, window_size => 100);
SELECT hilo_nextval('alt');
SELECT hilo_alter('alt', block_size => 5, max_value => 100000);
SELECT block_size, max_value FROM hilo.sequences WHERE name = 'alt';
SELECT hilo_nextval('alt') > 1 AS after_the_skipped_pool;
-- (How far windows reach depends on background refills: message only.)
\set VERBOSITY terse
SELECT hilo_alter('alt', max_value => 10);
:sqlstate
\set VERBOSITY default
SELECT hilo_alter('alt', window_size => 0);
:sqlstate
SELECT hilo_alter('nope');
:sqlstate
SELECT hilo_alter(NULL);
:sqlstate
CREATE ROLE regress_hilo_stranger;
SET ROLE regress_hilo_stranger;
SELECT hilo_alter('alt', block_size => 7);
:sqlstate
RESET ROLE;
DROP ROLE regress_hilo_stranger;

-- Monotonic: one counter for the node, takes included; pushes refused.
SELECT hilo_create('mono', monotonic => true, block_size => 10);
SELECT hilo_nextval('mono'), hilo_nextval('mono');
SELECT hilo_take('mono', 3);
SELECT hilo_nextval('mono');
SELECT hilo_take('mono', 50);
SELECT hilo_nextval('mono');
SELECT hilo_push('mono', '{[1,1]}');
:sqlstate
SELECT sequence FROM hilo.buffers WHERE sequence = 'mono';

