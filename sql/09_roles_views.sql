-- Roles and hilo sequences, as roles and PostgreSQL's own objects: DROP ROLE
-- of a role that owns a hilo sequence or holds a usage grant is refused
-- (2BP01) naming them; REASSIGN OWNED and DROP OWNED reach hilo sequences of
-- the current database.
\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
\set VERBOSITY default
CREATE ROLE regress_leaver;
CREATE ROLE regress_heir;
CREATE ROLE regress_grantee;

SET ROLE regress_leaver;
SELECT hilo_create('role_a');
SELECT hilo_create('role_b');
SELECT hilo_grant_usage('role_a', 'regress_grantee');
RESET ROLE;

-- Refused, naming what the role owns; nothing changes.
DROP ROLE regress_leaver;
:sqlstate
DROP ROLE IF EXISTS regress_nobody, regress_leaver;
:sqlstate
-- A grant alone is enough to refuse.
DROP ROLE regress_grantee;
:sqlstate
SELECT rolname FROM pg_roles WHERE rolname LIKE 'regress_%' ORDER BY 1;
SELECT * FROM hilo.usage WHERE sequence LIKE 'role_%' ORDER BY 1, 2;

-- PostgreSQL's own refusals come first: a role without CREATEROLE gets 42501.
SET ROLE regress_heir;
DROP ROLE regress_leaver;
:sqlstate
RESET ROLE;

-- REASSIGN OWNED gives the hilo sequences to the new owner.
REASSIGN OWNED BY regress_leaver TO regress_heir;
SELECT * FROM hilo.usage WHERE sequence LIKE 'role_%' ORDER BY 1, 2;
DROP ROLE regress_leaver;
SET ROLE regress_heir;
SELECT hilo_take('role_b', 1) IS NOT NULL AS heir_may_use;
RESET ROLE;

-- DROP OWNED drops the role's usage grants, and its sequences, refusing
-- while column defaults use them unless CASCADE.
DROP OWNED BY regress_grantee;
DROP ROLE regress_grantee;
CREATE TABLE role_table (id bigint DEFAULT hilo_nextval('role_a'));
DROP OWNED BY regress_heir;
:sqlstate
SELECT name FROM hilo.sequences WHERE name LIKE 'role_%' ORDER BY 1;
DROP OWNED BY regress_heir CASCADE;
SELECT name FROM hilo.sequences WHERE name LIKE 'role_%' ORDER BY 1;
SELECT column_default FROM information_schema.columns WHERE table_name = 'role_table';
DROP ROLE regress_heir;
DROP TABLE role_table;

-- hilo.status and hilo.buffers show a role only the sequences it may use;
-- superusers and members of pg_monitor see all.
CREATE ROLE regress_viewer;
CREATE ROLE regress_monitor IN ROLE pg_monitor;
SELECT hilo_create('view_mine'), hilo_create('view_granted'), hilo_create('view_hidden');
SELECT hilo_grant_usage('view_granted', 'regress_viewer');
SELECT hilo_nextval('view_hidden') > 0 AS buffered;
SET ROLE regress_viewer;
SELECT hilo_create('view_own');
SELECT sequence FROM hilo.status WHERE sequence LIKE 'view_%' ORDER BY 1;
SELECT count(*) AS hidden_buffers FROM hilo.buffers WHERE sequence = 'view_hidden';
-- The functions behind the views, called directly, show no more (only
-- view_hidden has a pool and a buffer, this session's).
RESET ROLE;
SELECT (SELECT count(*) FROM hilo.pool_stats()) > 0 AS superuser_sees_pools,
       (SELECT count(*) FROM hilo.buffer_slots()) > 0 AS superuser_sees_buffers;
SET ROLE regress_viewer;
SELECT count(*) AS viewer_pools FROM hilo.pool_stats();
SELECT count(*) AS viewer_buffers FROM hilo.buffer_slots();
SET ROLE regress_monitor;
SELECT (SELECT count(*) FROM hilo.pool_stats()) > 0 AS monitor_sees_pools,
       (SELECT count(*) FROM hilo.buffer_slots()) > 0 AS monitor_sees_buffers;
SELECT sequence FROM hilo.status WHERE sequence LIKE 'view_%' ORDER BY 1;
SELECT count(*) AS monitor_sees_buffers FROM hilo.buffers WHERE sequence = 'view_hidden';
RESET ROLE;
SELECT sequence FROM hilo.status WHERE sequence LIKE 'view_%' ORDER BY 1;
SELECT hilo_drop(name) FROM hilo.sequences WHERE name LIKE 'view_%';
DROP ROLE regress_viewer, regress_monitor;

-- Counters saturate: IDs taken, pushed back and taken again count twice,
-- past what a bigint holds; issued_since_start stays positive.
SELECT hilo_create('huge');
SELECT hilo_take('huge', 5) IS NOT NULL AS pool_made;
SELECT upper(hilo_take('huge', 9223372036854775000, partial => true)) = 9223372036854775807
       AS took_the_rest;
SELECT hilo_push('huge', '{[1000000000000000000,2000000000000000000)}');
SELECT hilo_take('huge', 1000000000000000000) IS NOT NULL AS taken_again;
SELECT issued_since_start AS saturated FROM hilo.status WHERE sequence = 'huge';

-- One huge take does not turn the rate into nonsense: it counts at most
-- 1000 blocks (or a minute at the current rate) toward ids_per_second.
SELECT hilo_create('huge_rate');
SELECT hilo_take('huge_rate', 5) IS NOT NULL AS pool_made;
SELECT hilo_take('huge_rate', 1000000000000000000) IS NOT NULL AS one_huge_take;
SELECT pg_sleep(1.5);
SELECT ids_per_second < 10000000 AS rate_sane, lasts IS NULL OR lasts > interval '1000 years'
       AS lasts_sane
  FROM hilo.status WHERE sequence = 'huge_rate';
SELECT hilo_drop('huge'), hilo_drop('huge_rate');

-- Pushing the same IDs twice says what happened, whether they still sit in
-- the free list or the allocator has moved them into the pool since.
SELECT hilo_create('twice', block_size => 10);
SELECT hilo_take('twice', 10);
-- (Where they sit depends on how soon the allocator moved them: both
-- messages say that they were pushed back before.)
CREATE FUNCTION pg_temp.push_error(seq text, ids int8multirange) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM hilo_push(seq, ids);
    RETURN 'pushed';
EXCEPTION WHEN invalid_parameter_value THEN
    RETURN CASE WHEN SQLERRM LIKE '%pushed back before and not handed out since%'
                THEN 'refused: says they were pushed back before' ELSE SQLERRM END;
END $$;
SELECT hilo_push('twice', '{[1,5]}');
SELECT pg_temp.push_error('twice', '{[1,5]}');
SELECT hilo_take('twice', 1) AS recycled_first;
SELECT pg_temp.push_error('twice', '{[2,5]}');
SELECT hilo_push('twice', '{[1,1]}') AS taken_again_then_pushed;
SELECT hilo_drop('twice');
