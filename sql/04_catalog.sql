-- The catalog: who may touch it, what pg_dump carries, hostile search_path.
\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
\set VERBOSITY default

-- Every catalog table is marked for pg_dump.
SELECT c.relname
  FROM pg_extension e, unnest(e.extconfig) AS cfg(oid) JOIN pg_class c ON c.oid = cfg.oid
 WHERE e.extname = 'hilo' ORDER BY 1;

-- PUBLIC has no privileges on the catalog.
SELECT c.relname, has_table_privilege('public', c.oid, 'SELECT') AS sel,
       has_table_privilege('public', c.oid, 'INSERT') AS ins,
       has_table_privilege('public', c.oid, 'UPDATE') AS upd,
       has_table_privilege('public', c.oid, 'DELETE') AS del
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'hilo' AND c.relkind IN ('r', 'S') ORDER BY 1;
SELECT has_schema_privilege('public', 'hilo', 'USAGE') AS schema_usage;

-- An ordinary role can use hilo but cannot write the catalog directly.
CREATE ROLE regress_hilo_user;
SET ROLE regress_hilo_user;
SELECT hilo_create('users_seq');
SELECT hilo_take('users_seq', 3);
SELECT hilo_push('users_seq', '{[2,2]}');
SELECT hilo_take('users_seq', 2);
INSERT INTO hilo.free_ranges VALUES (1, 1, 1);
:sqlstate
UPDATE hilo.windows SET next_hi_value = 1;
:sqlstate
SELECT * FROM hilo.sequences;
:sqlstate
RESET ROLE;

-- A hostile search_path: a schema with a fake "=" for text and bigint and
-- look-alike tables. hilo's catalog queries must not use any of them.
CREATE SCHEMA evil;
CREATE FUNCTION evil.texteq(text, text) RETURNS boolean LANGUAGE sql
    AS $$ SELECT true $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.texteq);
CREATE FUNCTION evil.int8eq(bigint, bigint) RETURNS boolean LANGUAGE sql
    AS $$ SELECT true $$;
CREATE OPERATOR evil.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.int8eq);
CREATE TABLE evil.sequences (LIKE hilo.sequences);
GRANT USAGE ON SCHEMA evil TO regress_hilo_user;
SET ROLE regress_hilo_user;
SET search_path = evil, public, pg_catalog;
SELECT hilo_create('evil_path');
SELECT hilo_take('evil_path', 2);
SELECT hilo_take('users_seq', 1);
SELECT hilo_push('evil_path', '{[1,1]}');
SELECT hilo_take('evil_path', 1);
RESET search_path;
RESET ROLE;
SELECT count(*) FROM evil.sequences;
DROP SCHEMA evil CASCADE;

-- The DDL event trigger (hilo_check_defaults, at the end of every CREATE
-- and ALTER TABLE or DOMAIN) reads what the command made with search_path
-- pinned too: a "=" for oid and regclass that a role put in a schema on the
-- path of whoever runs the DDL, here a superuser, must not run.
CREATE SCHEMA evil_ddl;
GRANT USAGE, CREATE ON SCHEMA evil_ddl TO regress_hilo_user;
SET ROLE regress_hilo_user;
CREATE FUNCTION evil_ddl.oideq(oid, regclass) RETURNS boolean LANGUAGE plpgsql
    AS $$ BEGIN RAISE EXCEPTION 'evil_ddl.oideq ran as %', current_user; END $$;
CREATE OPERATOR evil_ddl.= (LEFTARG = oid, RIGHTARG = regclass, FUNCTION = evil_ddl.oideq);
RESET ROLE;
SET search_path = public, evil_ddl;
CREATE TABLE ddl_victim (id bigint DEFAULT hilo_nextval('users_seq'));
ALTER TABLE ddl_victim ADD COLUMN y int;
CREATE DOMAIN ddl_victim_id AS bigint DEFAULT hilo_nextval('users_seq');
RESET search_path;
DROP TABLE ddl_victim;
DROP DOMAIN ddl_victim_id;
DROP SCHEMA evil_ddl CASCADE;

-- The allocator writes a sequence's high-water mark into the row version
-- it locked through the table access method, with index maintenance, not
-- by an UPDATE (whose CHECK constraints it checks itself). With an index
-- on the mark, no such write can stay on the row's page (HOT): every
-- index must then find the new version, and the constraints still refuse
-- a mark out of bounds written by anyone else.
SELECT hilo_create('hwm_moves', window_size => 10, min_open_windows => 1);
CREATE INDEX hwm_index ON hilo.sequences (high_water_mark);
SELECT hilo_take('hwm_moves', 25), hilo_take('hwm_moves', 100);
SET enable_seqscan = off;
SET enable_bitmapscan = off;
-- By the primary key, by name, and by the mark: each finds the row, with
-- the mark above every window.
SELECT high_water_mark = (SELECT max(window_end_value) - 1 FROM hilo.windows WHERE seq_id = s.seq_id) AS by_key
  FROM hilo.sequences s WHERE seq_id = (SELECT seq_id FROM hilo.sequences WHERE name = 'hwm_moves');
SELECT high_water_mark = (SELECT max(window_end_value) - 1 FROM hilo.windows WHERE seq_id = s.seq_id) AS by_name
  FROM hilo.sequences s WHERE name = 'hwm_moves';
SELECT name AS by_mark FROM hilo.sequences WHERE high_water_mark =
    (SELECT max(window_end_value) - 1 FROM hilo.windows WHERE seq_id =
        (SELECT seq_id FROM hilo.sequences WHERE name = 'hwm_moves'));
RESET enable_seqscan;
RESET enable_bitmapscan;
SELECT hilo_take('hwm_moves', 5);
\set VERBOSITY terse
UPDATE hilo.sequences SET high_water_mark = max_value + 1 WHERE name = 'hwm_moves';
:sqlstate
\set VERBOSITY default
DROP INDEX hilo.hwm_index;
SELECT hilo_drop('hwm_moves');

-- The allocator writes its windows the same way (alloc/window_rows.cpp):
-- every window it claims, advances or uses up must be found by the primary
-- key, and by the partial index windows_open exactly while it is open; its
-- window_bounds constraint still refuses a window out of bounds written by
-- anyone else.
SELECT hilo_create('win_rows', window_size => 10, min_open_windows => 2);
SELECT hilo_take('win_rows', 3), hilo_take('win_rows', 12), hilo_take('win_rows', 30);
-- More than the pool holds: the allocator uses up the open windows
-- written by the takes before (updates of their rows).
SELECT sum(upper(r) - lower(r)) AS ids FROM unnest(hilo_take('win_rows', 100000)) r;
SELECT set_config('regress.win_seq', seq_id::text, false) IS NOT NULL AS noted
  FROM hilo.sequences WHERE name = 'win_rows';
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT window_start_value FROM hilo.windows
 WHERE seq_id = current_setting('regress.win_seq')::int AND next_hi_value < window_end_value;
SELECT string_agg(window_start_value || ':' || next_hi_value, ' ' ORDER BY window_start_value) AS open_by_index
  FROM hilo.windows
 WHERE seq_id = current_setting('regress.win_seq')::int AND next_hi_value < window_end_value \gset
SELECT string_agg(window_start_value || ':' || next_hi_value || '/' || window_end_value, ' '
                  ORDER BY window_start_value) AS all_by_key
  FROM hilo.windows WHERE seq_id = current_setting('regress.win_seq')::int \gset
SET enable_seqscan = on;
SET enable_indexscan = off;
SET enable_indexonlyscan = off;
SELECT string_agg(window_start_value || ':' || next_hi_value, ' ' ORDER BY window_start_value)
       FILTER (WHERE next_hi_value < window_end_value) = :'open_by_index' AS open_same,
       string_agg(window_start_value || ':' || next_hi_value || '/' || window_end_value, ' '
                  ORDER BY window_start_value) = :'all_by_key' AS all_same,
       count(*) FILTER (WHERE next_hi_value < window_end_value) AS open,
       count(*) FILTER (WHERE next_hi_value = window_end_value) > 1 AS some_used_up
  FROM hilo.windows WHERE seq_id = current_setting('regress.win_seq')::int;
RESET enable_seqscan;
RESET enable_indexscan;
RESET enable_indexonlyscan;
RESET enable_bitmapscan;
\set VERBOSITY terse
INSERT INTO hilo.windows VALUES (current_setting('regress.win_seq')::int, 1000, 990, 995);
:sqlstate
\set VERBOSITY default
SELECT hilo_drop('win_rows');

SELECT hilo_drop('users_seq');
SELECT hilo_drop('evil_path');
DROP ROLE regress_hilo_user;

-- VACUUM FULL of the catalog between two takes: the allocator remembers
-- where it last wrote a sequence's used-up row, and that place can lie
-- past the end of the rewritten table. The next take still works (it read
-- the block and failed with "could not read block" on every take since).
SELECT count(hilo_create('vf_' || g)) FROM generate_series(1, 400) g;
SELECT count(hilo_take('vf_' || g, 1000000)) FROM generate_series(1, 400) g;
SELECT hilo_create('vf_last');
SELECT sum(upper(r) - lower(r)) FROM unnest(hilo_take('vf_last', 1000000)) r;
SELECT sum(upper(r) - lower(r)) FROM unnest(hilo_take('vf_last', 1000000)) r;
SELECT sum(upper(r) - lower(r)) FROM unnest(hilo_take('vf_last', 1000000)) r;
SELECT sum(upper(r) - lower(r)) FROM unnest(hilo_take('vf_last', 1000000)) r;
SELECT count(hilo_drop('vf_' || g)) FROM generate_series(1, 400) g;
SELECT max((w.ctid::text::point)[0]) AS vf_block FROM hilo.windows w JOIN hilo.sequences s USING (seq_id)
 WHERE s.name = 'vf_last' \gset
VACUUM FULL hilo.windows;
-- The page of the row written last is past the table's end now.
SELECT pg_relation_size('hilo.windows') / current_setting('block_size')::int <= :vf_block AS past_the_end;
SELECT sum(upper(r) - lower(r)) FROM unnest(hilo_take('vf_last', 1000000)) r;
SELECT sum(upper(r) - lower(r)) FROM unnest(hilo_take('vf_last', 1000000)) r;
SELECT hilo_drop('vf_last');
