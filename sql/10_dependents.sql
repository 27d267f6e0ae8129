-- Sequences that tables depend on: hilo_drop refuses while a column default
-- calls hilo with the sequence's name (2BP01), cascade drops those defaults;
-- a name dropped and created again starts above all the dropped one handed
-- out; a default naming an unknown hilo sequence is refused at DDL time.
\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
\set VERBOSITY default

SELECT hilo_create('dep_orders', window_size => 100, block_size => 10);
CREATE TABLE dep_orders (id bigint PRIMARY KEY DEFAULT hilo_nextval('dep_orders'), item text);
CREATE TABLE dep_lines (order_id bigint,
                        line_id bigint DEFAULT hilo_nextval(seq => 'dep_orders'::varchar),
                        ranges int8multirange DEFAULT hilo_take('dep_orders', 2));
INSERT INTO dep_orders (item) VALUES ('a'), ('b'), ('c');
INSERT INTO dep_lines (order_id) VALUES (1);

-- Refused while defaults use it, naming each column; nothing changes.
SELECT hilo_drop('dep_orders');
:sqlstate
SELECT hilo_drop('dep_orders', cascade => false);
:sqlstate
SELECT name FROM hilo.sequences WHERE name = 'dep_orders';

-- A default with a name that is not a constant names no sequence: left alone.
CREATE TABLE dep_dynamic (name text DEFAULT 'dep_orders',
                          id bigint DEFAULT hilo_nextval(current_setting('application_name')));

-- In a cluster of calls: ALTER COLUMN ... SET DEFAULT and ADD COLUMN count too.
SELECT hilo_create('dep_other');
CREATE TABLE dep_later (x int);
ALTER TABLE dep_later ALTER COLUMN x TYPE bigint, ALTER COLUMN x SET DEFAULT hilo_nextval('dep_other');
ALTER TABLE dep_later ADD COLUMN y bigint DEFAULT hilo_nextval('dep_other') + 1000;
SELECT hilo_drop('dep_other');
:sqlstate

-- Cascade drops the defaults, as DROP SEQUENCE ... CASCADE does, and keeps
-- the columns and their rows.
SELECT hilo_drop('dep_other', cascade => true);
SELECT column_name, column_default FROM information_schema.columns
 WHERE table_name = 'dep_later' ORDER BY ordinal_position;
SELECT hilo_drop('dep_orders', true);
SELECT table_name, column_name, column_default FROM information_schema.columns
 WHERE table_name IN ('dep_orders', 'dep_lines') ORDER BY table_name, ordinal_position;
SELECT count(*) FROM dep_orders;

-- Re-created without start_value, it starts above everything the dropped
-- one covered (its high-water mark), so stored keys never collide.
SELECT high_water_mark > 0 AS remembered FROM hilo.dropped_names WHERE name = 'dep_orders';
SELECT hilo_create('dep_orders', window_size => 100, block_size => 10);
SELECT start_value = (SELECT high_water_mark + 1 FROM hilo.dropped_names WHERE name = 'dep_orders')
       AS starts_above FROM hilo.sequences WHERE name = 'dep_orders';
ALTER TABLE dep_orders ALTER COLUMN id SET DEFAULT hilo_nextval('dep_orders');
INSERT INTO dep_orders (item) SELECT 'new ' || i FROM generate_series(1, 30) i;
SELECT count(*) FROM dep_orders;
SELECT min(id) > (SELECT max(id) FROM dep_orders WHERE item IN ('a', 'b', 'c')) AS above_old_keys
  FROM dep_orders WHERE item LIKE 'new %';

-- An explicit start_value is taken as given: the owner asked for those IDs.
SELECT hilo_drop('dep_orders', cascade => true);
SELECT hilo_create('dep_orders', start_value => 1);
SELECT start_value FROM hilo.sequences WHERE name = 'dep_orders';
-- Dropped again: the mark stays the highest seen.
SELECT hilo_drop('dep_orders');
SELECT hilo_create('dep_orders');
SELECT start_value > 100 AS still_above FROM hilo.sequences WHERE name = 'dep_orders';
-- A max_value below the mark cannot start above it: refused, with a hint.
SELECT hilo_drop('dep_orders');
SELECT hilo_create('dep_orders', max_value => 50);
:sqlstate
SELECT hilo_create('dep_orders', start_value => NULL);
SELECT hilo_drop('dep_orders');

-- A default naming a hilo sequence that does not exist is refused when the
-- command ends (42704), as DEFAULT nextval('ordres') is; so are ALTER TABLE
-- ... SET DEFAULT and ADD COLUMN; nothing is created.
CREATE TABLE dep_typo (id bigint DEFAULT hilo_nextval('ordres'));
:sqlstate
SELECT to_regclass('dep_typo');
CREATE TABLE dep_typo (id bigint);
ALTER TABLE dep_typo ALTER COLUMN id SET DEFAULT hilo_nextval('ordres');
:sqlstate
ALTER TABLE dep_typo ADD COLUMN other bigint DEFAULT hilo_nextval('ordres');
:sqlstate
ALTER TABLE dep_typo ADD COLUMN other uuid DEFAULT gen_random_uuid();
SELECT column_name, column_default FROM information_schema.columns
 WHERE table_name = 'dep_typo' ORDER BY ordinal_position;
-- Generation expressions cannot call hilo's functions (they are volatile).
CREATE TABLE dep_generated (id bigint GENERATED ALWAYS AS (hilo_nextval('ordres')) STORED);
:sqlstate
-- Domain defaults count too: refused at DDL time for an unknown name,
-- refused by hilo_drop, dropped by cascade (the domain and its columns stay;
-- DROP SEQUENCE ... CASCADE would drop the domain with every column of it).
CREATE DOMAIN dep_typo_id AS bigint DEFAULT hilo_nextval('ordres');
:sqlstate
SELECT hilo_create('dep_dom');
CREATE DOMAIN dep_id AS bigint DEFAULT hilo_nextval('dep_dom');
CREATE DOMAIN dep_id2 AS bigint;
ALTER DOMAIN dep_id2 SET DEFAULT hilo_nextval('ordres');
:sqlstate
CREATE TABLE dep_dom_t (id dep_id, v text);
INSERT INTO dep_dom_t (v) VALUES ('x');
SELECT hilo_drop('dep_dom');
:sqlstate
SELECT hilo_drop('dep_dom', cascade => true);
SELECT typname, typdefault FROM pg_type WHERE typname IN ('dep_id', 'dep_id2') ORDER BY 1;
SELECT count(*) FROM dep_dom_t;
DROP TABLE dep_dom_t;
DROP DOMAIN dep_id, dep_id2;
-- Existing sequences, defaults written before, other commands: accepted.
SELECT hilo_create('dep_ok');
CREATE TABLE dep_fine (id bigint DEFAULT hilo_nextval('dep_ok'));
ALTER TABLE dep_fine ADD COLUMN note text;
-- The check runs for every role, as the catalog's owner.
CREATE ROLE regress_ddl;
CREATE SCHEMA regress_ddl AUTHORIZATION regress_ddl;
SET ROLE regress_ddl;
CREATE TABLE regress_ddl.t (id bigint DEFAULT hilo_nextval('ordres'));
:sqlstate
CREATE TABLE regress_ddl.t (id bigint DEFAULT hilo_nextval('dep_ok'));
RESET ROLE;
-- pg_dump's scripts run with check_function_bodies off and restore the
-- catalog rows after the tables: nothing is checked then.
SET check_function_bodies = off;
CREATE TABLE dep_restored (id bigint DEFAULT hilo_nextval('not_yet'));
RESET check_function_bodies;
SELECT hilo_drop('dep_ok');
:sqlstate
SELECT hilo_drop('dep_ok', cascade => true);
DROP TABLE dep_orders, dep_lines, dep_dynamic, dep_later, dep_typo, dep_fine, dep_restored;
DROP SCHEMA regress_ddl CASCADE;
DROP ROLE regress_ddl;
