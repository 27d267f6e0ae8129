-- One-transaction migrations: a sequence created in the
-- caller's own open transaction serves hilo_nextval, hilo_take,
-- hilo_take_ranges and hilo_push in that transaction. Its IDs are reserved
-- in the transaction: a rollback removes the sequence and its IDs
-- together, a ROLLBACK TO SAVEPOINT never makes an ID come out twice, and
-- nothing of it reaches shared memory (pools, buffers) before it commits.
-- test/t/045_one_transaction_crash.pl kills the server right after such a
-- commit and checks PREPARE TRANSACTION.
\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
\set VERBOSITY default
-- Failed statements inside the transactions below roll back to a savepoint
-- psql makes before each statement (as ON_ERROR_ROLLBACK does for users):
-- every call below runs in a subtransaction of its own.
\set ON_ERROR_ROLLBACK on
-- A database of its own: contrib_regression is a cluster of one node after
-- 06_cluster, where sequences of an open transaction are refused.
CREATE DATABASE hilo_one_transaction;
\c hilo_one_transaction
\set VERBOSITY default
\set ON_ERROR_ROLLBACK on
CREATE EXTENSION hilo;

-- The migration, as Flyway, Liquibase, Alembic, Rails or Django run it.
BEGIN;
SELECT hilo_create('m');
CREATE TABLE t (id bigint PRIMARY KEY DEFAULT hilo_nextval('m'), v text);
INSERT INTO t (v) VALUES ('seed row');
INSERT INTO t (v) SELECT 'row ' || i FROM generate_series(1, 3) i;
SELECT hilo_take('m', 10);
SELECT * FROM hilo_take_ranges('m', 3);
-- Nothing of it is in shared memory: no pool, no buffer.
SELECT sequence, pool_ids, buffered_ids, issued_since_start FROM hilo.status;
SELECT count(*) AS buffers FROM hilo.buffers;
-- A savepoint rolled back keeps the sequence; the IDs it handed out stay
-- handed out (18 is skipped, never served twice).
SAVEPOINT a;
INSERT INTO t (v) VALUES ('rolled back') RETURNING id;
SELECT hilo_take('m', 2);
ROLLBACK TO a;
INSERT INTO t (v) VALUES ('after the savepoint') RETURNING id;
-- Pushes are checked against what this transaction handed out.
SELECT hilo_push('m', '{[6,8]}');
SELECT hilo_push('m', '{[30,30]}');
:sqlstate
SELECT hilo_nextval('m');
SELECT hilo_take('m', -1);
:sqlstate
SELECT hilo_nextval('m');
COMMIT;
TABLE t;
-- The catalog records every ID handed out in the transaction as one used-up
-- window, and the pushed ones as free.
SELECT w.window_start_value, w.window_end_value, w.next_hi_value, s.high_water_mark
  FROM hilo.windows w JOIN hilo.sequences s USING (seq_id)
 WHERE s.name = 'm' AND w.next_hi_value = w.window_end_value;
SELECT first_id, last_id FROM hilo.free_ranges;
-- After the commit the allocator serves it: pushed IDs first, then IDs above
-- everything handed out in the migration.
SELECT hilo_take('m', 5);
INSERT INTO t (v) VALUES ('after the commit') RETURNING id > 24 AS above_the_migration;

-- A rollback removes sequence and IDs together: the name is free again, and
-- nothing is left in the catalog or in shared memory.
BEGIN;
SELECT hilo_create('r', max_value => 100);
SELECT hilo_take('r', 40), hilo_nextval('r');
ROLLBACK;
SELECT hilo_take('r', 1);
:sqlstate
SELECT count(*) AS windows_left FROM hilo.windows
 WHERE seq_id NOT IN (SELECT seq_id FROM hilo.sequences);
SELECT sequence FROM hilo.status ORDER BY 1;
-- A savepoint that created the sequence, rolled back: the same.
BEGIN;
SAVEPOINT s;
SELECT hilo_create('r');
SELECT hilo_nextval('r');
ROLLBACK TO s;
SELECT hilo_nextval('r');
:sqlstate
ROLLBACK;
-- Created in a savepoint that is released: it lives on with the transaction.
BEGIN;
SAVEPOINT s;
SELECT hilo_create('r2');
RELEASE s;
SAVEPOINT u;
SELECT hilo_nextval('r2');
RELEASE u;
SELECT hilo_nextval('r2');
COMMIT;
SELECT hilo_nextval('r2') > 2 AS above;

-- Dropped and created again in one transaction: the new sequence's IDs come
-- from the transaction, never from the old one's buffer in this session.
SELECT hilo_create('d');
SELECT hilo_nextval('d');
BEGIN;
SELECT hilo_drop('d');
SELECT hilo_create('d', start_value => 5000);
SELECT hilo_nextval('d'), hilo_nextval('d');
COMMIT;
SELECT hilo_nextval('d') > 5001 AS above;

-- Exhaustion in the transaction: a failed take reserves nothing.
BEGIN;
SELECT hilo_create('small', max_value => 5, monotonic => true);
SELECT hilo_take('small', 3);
SELECT hilo_take('small', 3);
:sqlstate
SELECT hilo_nextval('small'), hilo_nextval('small');
SELECT hilo_nextval('small');
:sqlstate
ROLLBACK;
BEGIN;
SELECT hilo_create('small', max_value => 5);
SELECT hilo_take('small', 3);
SELECT hilo_take('small', 3, partial => true);
SELECT * FROM hilo_take_ranges('small', 1);
:sqlstate
COMMIT;
SELECT hilo_take('small', 1);
:sqlstate
-- A migration that creates a sequence, takes from it and then drops the
-- extension commits (the sequence went with its catalog); one that drops
-- and creates the extension again records nothing of the old catalog's
-- sequences in the new one, whose first sequence (the same seq_id) starts
-- at 1.
BEGIN;
SELECT hilo_create('gone_with_catalog');
SELECT hilo_take('gone_with_catalog', 5);
DROP EXTENSION hilo CASCADE;
COMMIT;
SELECT count(*) AS hilo_installed FROM pg_extension WHERE extname = 'hilo';
CREATE EXTENSION hilo;
BEGIN;
SELECT hilo_create('first_of_old');
SELECT hilo_take('first_of_old', 5);
DROP EXTENSION hilo CASCADE;
CREATE EXTENSION hilo;
SELECT hilo_create('first_of_new');
SELECT hilo_take('first_of_new', 3);
COMMIT;
SELECT hilo_take('first_of_new', 2);
SELECT name, high_water_mark FROM hilo.sequences;

-- contrib_regression is a cluster of one node (06_cluster): windows come
-- from the quorum register there, so a sequence of an open transaction is
-- refused (55000).
\c contrib_regression
\set ON_ERROR_ROLLBACK on
BEGIN;
SELECT hilo_create('in_cluster');
SELECT hilo_take('in_cluster', 1);
:sqlstate
SELECT hilo_nextval('in_cluster');
:sqlstate
ROLLBACK;
-- A failed take reserves nothing there either: a claim through the quorum
-- register cannot be rolled back, so a take that cannot be served whole
-- claims nothing, and the whole sequence is still there afterwards.
SELECT hilo_create('whole', max_value => 1000, window_size => 100);
SELECT hilo_take('whole', 2000);
:sqlstate
SELECT count(*) AS register_rows FROM hilo.register WHERE key = 'whole' AND value > 200;
SELECT hilo_take('whole', 1000) = '{[1,1001)}' AS all_of_it;
SELECT hilo_take('whole', 1);
:sqlstate
