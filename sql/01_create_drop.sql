-- hilo_create and hilo_drop: arguments, names, errors, ownership.
\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
CREATE EXTENSION hilo;
\set VERBOSITY default

SELECT hilo_create('plain');
SELECT name, start_value, max_value, window_size, min_open_windows, block_size, high_water_mark
  FROM hilo.sequences ORDER BY seq_id;

-- Every setting, by name.
SELECT hilo_create('custom', start_value => 100, max_value => 1000, window_size => 50,
                   min_open_windows => 3, block_size => 10);
SELECT name, start_value, max_value, window_size, min_open_windows, block_size, high_water_mark
  FROM hilo.sequences WHERE name = 'custom';

-- Names are case-sensitive text of 1 to 255 bytes and may look like paths.
SELECT hilo_create('Plain');
SELECT hilo_create('/com/example/eventpublish/did');
SELECT hilo_create('it''s "quoted"; DROP TABLE hilo.sequences; --');
SELECT hilo_create(repeat('x', 255));
SELECT hilo_create(repeat('é', 127));  -- 254 bytes
SELECT name, octet_length(name) FROM hilo.sequences WHERE seq_id > 2 ORDER BY seq_id;

-- Already exists (42710); every other bad argument, and that it changes
-- nothing: 08_bad_input.
SELECT hilo_create('plain');
:sqlstate
SELECT count(*) FROM hilo.sequences WHERE name = 'plain';

-- A rolled-back create leaves nothing.
BEGIN;
SELECT hilo_create('rolled_back');
ROLLBACK;
SELECT count(*) FROM hilo.sequences WHERE name = 'rolled_back';

-- Drop.
SELECT hilo_drop('Plain');
SELECT count(*) FROM hilo.sequences WHERE name = 'Plain';
SELECT hilo_drop('Plain');
:sqlstate
SELECT hilo_drop(NULL);
:sqlstate
SELECT hilo_drop(repeat('x', 256));
:sqlstate

-- A rolled-back drop loses nothing; a re-created sequence starts above
-- everything the dropped one covered (sql/10_dependents.sql).
SELECT hilo_take('plain', 5);
BEGIN;
SELECT hilo_drop('plain');
ROLLBACK;
SELECT hilo_take('plain', 5);
SELECT hilo_drop('plain');
SELECT hilo_create('plain');
SELECT hilo_take('plain', 5);
-- Also when the drop comes earlier in the same statement (the create used
-- to read the mark with the statement's snapshot, and started at 1).
SELECT hilo_create('same_statement', start_value => 1, window_size => 100);
SELECT hilo_take('same_statement', 5);
SELECT hilo_drop('same_statement'), hilo_create('same_statement');
SELECT start_value > 5 AS above_dropped FROM hilo.sequences WHERE name = 'same_statement';
SELECT lower(hilo_take('same_statement', 5)) > 5 AS takes_above_dropped;
SELECT hilo_drop('same_statement');

-- Only the owner (or a superuser) may drop (42501).
CREATE ROLE regress_hilo_owner;
CREATE ROLE regress_hilo_other;
SET ROLE regress_hilo_owner;
SELECT hilo_create('owned');
SET ROLE regress_hilo_other;
SELECT hilo_drop('owned');
:sqlstate
RESET ROLE;
SELECT owner FROM hilo.sequences WHERE name = 'owned';
SET ROLE regress_hilo_owner;
SELECT hilo_drop('owned');
RESET ROLE;
SELECT count(*) FROM hilo.sequences WHERE name = 'owned';

-- Members of the owning role count as owners, as for PostgreSQL objects.
SET ROLE regress_hilo_owner;
SELECT hilo_create('owned_by_group');
RESET ROLE;
GRANT regress_hilo_owner TO regress_hilo_other;
SET ROLE regress_hilo_other;
SELECT hilo_drop('owned_by_group');
RESET ROLE;
REVOKE regress_hilo_owner FROM regress_hilo_other;

-- Read-only transactions refuse every writing function (25006).
BEGIN READ ONLY;
SELECT hilo_create('read_only');
:sqlstate
ROLLBACK;
BEGIN READ ONLY;
SELECT hilo_drop('custom');
:sqlstate
ROLLBACK;

DROP ROLE regress_hilo_owner;
DROP ROLE regress_hilo_other;
