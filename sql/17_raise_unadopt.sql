-- hilo_raise: once it commits, no ID at or below the mark is handed out,
-- whatever this backend's buffer, the pool, the windows or the free list
-- held; only upwards; a rollback changes nothing. hilo_unadopt: the way
-- back to a native sequence (or identity) above all hilo handed out.
\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
\set VERBOSITY default
\set SHOW_CONTEXT never

-- A database of its own, in no cluster.
CREATE DATABASE hilo_raise_db;
\c hilo_raise_db
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE EXTENSION hilo;

SELECT hilo_create('rs', window_size => 100, block_size => 10);
-- IDs sit in this backend's buffer and in the pool; 12 .. 15 are pushed
-- back (to the free list, or the pool by now).
SELECT hilo_nextval('rs') AS first_id;
SELECT hilo_take('rs', 8);
SELECT hilo_push('rs', '{[12,15]}');
SELECT buffered_ids > 0 AS buffered FROM hilo.status WHERE sequence = 'rs';

-- Rolled back: nothing changes, the buffer goes on where it was.
BEGIN;
SELECT hilo_raise('rs', 5000);
ROLLBACK;
SELECT hilo_nextval('rs') < 5000 AS below_mark;

-- Committed: buffer, pool, windows and free list below the mark are a gap.
SELECT hilo_raise('rs', 250);
SELECT hilo_nextval('rs') > 250 AS after_raise;
SELECT lower(r) > 250 AS take_above FROM unnest(hilo_take('rs', 3)) r;
SELECT free_ids, high_water_mark >= 250 AS covered FROM hilo.status WHERE sequence = 'rs';
-- A push of IDs handed out before the raise, below the mark: refused.
SELECT hilo_push('rs', '{[1,1]}');
:sqlstate
-- The same mark again: nothing to do. Lower: refused (22023), as is a mark
-- at or beyond max_value; NULLs: 22004; unknown: 42704.
SELECT hilo_raise('rs', 250);
SELECT hilo_raise('rs', 100);
:sqlstate
SELECT hilo_raise('rs', 9223372036854775806);
:sqlstate
SELECT hilo_raise('rs', NULL);
:sqlstate
SELECT hilo_raise(NULL, 5);
:sqlstate
SELECT hilo_raise('no_such', 5);
:sqlstate
SELECT hilo_raise('rs', 'x');
:sqlstate
-- Not the owner: 42501, nothing changes.
CREATE ROLE regress_raise_other;
SELECT hilo_grant_usage('rs', 'regress_raise_other');
SET ROLE regress_raise_other;
SELECT hilo_raise('rs', 100000);
:sqlstate
SELECT hilo_nextval('rs') < 1000 AS not_raised;
RESET ROLE;

-- IDs reserved before a raise and returned to the free list after it (an
-- abandoned take, an idle pool written back; here written by hand) are
-- never handed out: the allocator reads the free list from start_value.
SELECT hilo_create('rs_late', window_size => 100, block_size => 10);
SELECT hilo_take('rs_late', 50);
SELECT hilo_raise('rs_late', 60);
INSERT INTO hilo.free_ranges (seq_id, first_id, last_id)
SELECT seq_id, 20, 30 FROM hilo.sequences WHERE name = 'rs_late';
SELECT bool_and(lower(r) > 60) AS all_above FROM unnest(hilo_take('rs_late', 500)) r;

-- A bulk load with explicit IDs, then the raise: the default goes on above.
CREATE TABLE rs_t (id bigint PRIMARY KEY DEFAULT hilo_nextval('rs'), v text);
INSERT INTO rs_t (v) VALUES ('a');
INSERT INTO rs_t (id, v) SELECT i, 'loaded' FROM generate_series(1000, 1999) i;
SELECT hilo_raise('rs', (SELECT max(id) FROM rs_t));
INSERT INTO rs_t (v) VALUES ('b') RETURNING id > 1999 AS above_loaded;

-- In the transaction that created the sequence, too.
BEGIN;
SELECT hilo_create('rs_local');
SELECT hilo_nextval('rs_local');
SELECT hilo_raise('rs_local', 40);
SELECT hilo_nextval('rs_local');
COMMIT;
SELECT hilo_nextval('rs_local') > 41 AS still_above;

-- A monotonic sequence: its shared counter goes above the mark too.
SELECT hilo_create('rs_mono', monotonic => true);
SELECT hilo_nextval('rs_mono');
SELECT hilo_raise('rs_mono', 70);
SELECT hilo_nextval('rs_mono') > 70 AS above;

-- hilo_unadopt: bigserial adopted and given back, above everything hilo
-- handed out or holds; the hilo sequence is dropped.
CREATE TABLE un_orders (id bigserial PRIMARY KEY, v text);
INSERT INTO un_orders (v) VALUES ('a'), ('b');
SELECT hilo_adopt('un_orders', 'id');
INSERT INTO un_orders (v) VALUES ('c') RETURNING id;
SELECT hilo_unadopt('un_orders', 'id');
SELECT column_default FROM information_schema.columns
 WHERE table_name = 'un_orders' AND column_name = 'id';
SELECT pg_get_serial_sequence('un_orders', 'id');
INSERT INTO un_orders (v) VALUES ('d') RETURNING id > 3 AS above_hilo;
SELECT count(*) AS hilo_left FROM hilo.status WHERE sequence = 'un_orders_id_seq';

-- An identity column comes back as the identity it was.
CREATE TABLE un_ident (id integer GENERATED ALWAYS AS IDENTITY, v text);
INSERT INTO un_ident (v) VALUES ('a');
SELECT hilo_adopt('un_ident', 'id', 'un_ident_ids');
INSERT INTO un_ident (v) VALUES ('b');
SELECT hilo_unadopt('un_ident', 'id');
SELECT attidentity FROM pg_attribute WHERE attrelid = 'un_ident'::regclass AND attname = 'id';
INSERT INTO un_ident (v) VALUES ('c');
SELECT count(DISTINCT id) = count(*) AS unique_ids FROM un_ident;
SELECT count(*) AS remembered FROM hilo.adopted_columns WHERE table_name = 'un_ident'::regclass;

-- A table renamed and moved to another schema after adopt is still
-- known: it comes back as the identity it was.
CREATE SCHEMA un_elsewhere;
CREATE TABLE un_renamed (id bigint GENERATED BY DEFAULT AS IDENTITY, v text);
INSERT INTO un_renamed (v) VALUES ('a');
SELECT hilo_adopt('un_renamed', 'id', 'un_renamed_ids');
ALTER TABLE un_renamed RENAME TO un_moved;
ALTER TABLE un_moved SET SCHEMA un_elsewhere;
SELECT table_name, column_name, identity FROM hilo.adopted_columns;
SELECT hilo_unadopt('un_elsewhere.un_moved', 'id');
SELECT attidentity FROM pg_attribute
 WHERE attrelid = 'un_elsewhere.un_moved'::regclass AND attname = 'id';
INSERT INTO un_elsewhere.un_moved (v) VALUES ('b') RETURNING id > 1 AS above;
DROP SCHEMA un_elsewhere CASCADE;

-- A hilo sequence another column still uses stays, with a NOTICE.
CREATE TABLE un_a (id bigserial, v text);
SELECT hilo_adopt('un_a', 'id', 'un_shared');
CREATE TABLE un_b (id bigint DEFAULT hilo_nextval('un_shared'));
SELECT hilo_unadopt('un_a', 'id');
SELECT count(*) AS hilo_kept FROM hilo.status WHERE sequence = 'un_shared';

-- Rolled back: nothing changes.
BEGIN;
SELECT hilo_unadopt('un_b', 'id');
ROLLBACK;
SELECT column_default FROM information_schema.columns
 WHERE table_name = 'un_b' AND column_name = 'id';

-- Bad input: a column not on hilo (55000), NULLs (22004), a view (42809),
-- not the owner (42501); nothing changes.
CREATE VIEW un_view AS SELECT * FROM un_b;
SELECT hilo_unadopt('un_orders', 'id');
:sqlstate
SELECT hilo_unadopt('un_orders', 'v');
:sqlstate
SELECT hilo_unadopt(NULL, 'id');
:sqlstate
SELECT hilo_unadopt('un_b', NULL);
:sqlstate
SELECT hilo_unadopt('un_view', 'id');
:sqlstate
SET ROLE regress_raise_other;
SELECT hilo_unadopt('un_b', 'id');
:sqlstate
RESET ROLE;
SELECT table_name, column_default FROM information_schema.columns
 WHERE table_name IN ('un_orders', 'un_b') AND column_name = 'id' ORDER BY 1;

DROP VIEW un_view;
DROP TABLE rs_t, un_orders, un_ident, un_a, un_b;
SELECT hilo_drop(sequence) FROM hilo.status ORDER BY sequence;
DROP ROLE regress_raise_other;

\c contrib_regression
DROP DATABASE hilo_raise_db;
