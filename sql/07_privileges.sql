-- Who may use and change a sequence: owner, grants, roles, PUBLIC; the
-- catalog is closed to everyone else; read-only transactions refuse every
-- writing function.
\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
\set VERBOSITY default
CREATE ROLE regress_owner;
CREATE ROLE regress_user;
CREATE ROLE regress_other;
CREATE ROLE regress_group;

-- The owner creates a sequence; it is the owner's alone.
SET ROLE regress_owner;
SELECT hilo_create('priv', block_size => 10);
SELECT hilo_take('priv', 2), hilo_nextval('priv');
SELECT * FROM hilo.usage WHERE sequence = 'priv';

-- Another role can neither use it nor change it nor grant it (42501).
SET ROLE regress_user;
SELECT hilo_take('priv', 1);
:sqlstate
SELECT * FROM hilo_take_ranges('priv', 1);
:sqlstate
SELECT hilo_push('priv', '{[1,1]}');
:sqlstate
SELECT hilo_push_ranges('priv', '{1}', '{1}');
:sqlstate
SELECT hilo_nextval('priv');
:sqlstate
SELECT hilo_alter('priv', block_size => 5);
:sqlstate
SELECT hilo_drop('priv');
:sqlstate
SELECT hilo_grant_usage('priv', 'regress_user');
:sqlstate
SELECT hilo_revoke_usage('priv', 'regress_owner');
:sqlstate

-- Granted, it can use it, and still not change or grant it.
SET ROLE regress_owner;
SELECT hilo_grant_usage('priv', 'regress_user');
SELECT hilo_grant_usage('priv', 'regress_user');  -- twice: no change, no error
SELECT * FROM hilo.usage WHERE sequence = 'priv' ORDER BY is_owner DESC, role;
SET ROLE regress_user;
SELECT hilo_take('priv', 3);
SELECT hilo_nextval('priv') > 0 AS nextval_works, hilo_nextval('priv') > 0 AS cached_works;
SELECT hilo_push('priv', '{[1,1]}');
SELECT hilo_alter('priv', block_size => 5);
:sqlstate
SELECT hilo_grant_usage('priv', 'regress_other');
:sqlstate

-- A revoke takes effect at once, also for hilo_nextval, which caches the
-- decision in the session.
SET ROLE regress_owner;
SELECT hilo_revoke_usage('priv', 'regress_user');
SELECT hilo_revoke_usage('priv', 'regress_user');  -- not granted: no change, no error
SET ROLE regress_user;
SELECT hilo_nextval('priv');
:sqlstate
SELECT hilo_take('priv', 1);
:sqlstate

-- The same through a role: membership counts, and leaving the role ends it.
SET ROLE regress_owner;
SELECT hilo_grant_usage('priv', 'regress_group');
RESET ROLE;
GRANT regress_group TO regress_user;
SET ROLE regress_user;
SELECT hilo_nextval('priv') > 0 AS via_group;
RESET ROLE;
REVOKE regress_group FROM regress_user;
SET ROLE regress_user;
SELECT hilo_nextval('priv');
:sqlstate

-- PUBLIC: everyone.
SET ROLE regress_owner;
SELECT hilo_grant_usage('priv', 'public');
SET ROLE regress_other;
SELECT hilo_nextval('priv') > 0 AS via_public, hilo_take('priv', 1) IS NOT NULL AS take_too;
SET ROLE regress_owner;
SELECT hilo_revoke_usage('priv', 'public');
SET ROLE regress_other;
SELECT hilo_nextval('priv');
:sqlstate

-- A member of the owner role counts as the owner; so does a superuser.
RESET ROLE;
GRANT regress_owner TO regress_other;
SET ROLE regress_other;
SELECT hilo_nextval('priv') > 0 AS owner_member;
SELECT hilo_grant_usage('priv', 'regress_user');
SELECT hilo_revoke_usage('priv', 'regress_user');
RESET ROLE;
REVOKE regress_owner FROM regress_other;
SELECT hilo_take('priv', 1) IS NOT NULL AS superuser_may;

-- Bad arguments.
SELECT hilo_grant_usage('priv', 'regress_nobody');
:sqlstate
SELECT hilo_grant_usage('nosuch', 'regress_user');
:sqlstate
SELECT hilo_grant_usage('priv', NULL);
:sqlstate
SELECT hilo_revoke_usage(NULL, 'public');
:sqlstate
SELECT hilo_grant_usage('', 'public');
:sqlstate

-- A dropped sequence takes its grants with it; one re-created under the
-- same name starts with none.
SET ROLE regress_owner;
SELECT hilo_grant_usage('priv', 'regress_user');
SELECT hilo_drop('priv');
SELECT hilo_create('priv');
SET ROLE regress_user;
SELECT hilo_nextval('priv');
:sqlstate
RESET ROLE;
SELECT count(*) AS grants_left FROM hilo.usage_grants;
SELECT hilo_drop('priv');

-- The catalog: no role but hilo's own functions (running as the catalog's
-- owner) can write any table of schema hilo, whatever tables there are.
SELECT c.relname, has_table_privilege('regress_user', c.oid, 'INSERT') AS ins,
       has_table_privilege('regress_user', c.oid, 'UPDATE') AS upd,
       has_table_privilege('regress_user', c.oid, 'DELETE') AS del,
       has_table_privilege('regress_user', c.oid, 'TRUNCATE') AS trunc
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'hilo' AND c.relkind IN ('r', 'S', 'p')
   AND (has_table_privilege('regress_user', c.oid, 'INSERT')
        OR has_table_privilege('regress_user', c.oid, 'UPDATE')
        OR has_table_privilege('regress_user', c.oid, 'DELETE')
        OR has_table_privilege('regress_user', c.oid, 'TRUNCATE'));
-- And trying it fails on every one of them.
SET ROLE regress_user;
DO $$
DECLARE
    t regclass;
    refused int := 0;
    tables int := 0;
BEGIN
    FOR t IN SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE n.nspname = 'hilo' AND c.relkind = 'r' LOOP
        tables := tables + 1;
        BEGIN
            EXECUTE format('DELETE FROM %s', t);
        EXCEPTION WHEN insufficient_privilege THEN
            refused := refused + 1;
        END;
    END LOOP;
    RAISE NOTICE 'DELETE refused on % of % tables', refused, tables;
END $$;
RESET ROLE;

-- The functions of schema hilo that anyone may execute: the ones behind
-- the views hilo.buffers and hilo.status, which only read, and the parts
-- of hilo_adopt and hilo_unadopt, which run as the caller and check the
-- caller's rights themselves (ownership of the table, usage of the
-- sequence).
SELECT p.proname
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'hilo' AND has_function_privilege('regress_user', p.oid, 'EXECUTE')
 ORDER BY 1;
-- Every SECURITY DEFINER function of the extension pins search_path.
SELECT p.oid::regprocedure AS definer_without_search_path
  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'hilo'
 WHERE p.prosecdef
   AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%');
SELECT count(*) > 0 AS has_definer_functions
  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'hilo'
 WHERE p.prosecdef;

-- Grant and revoke under a hostile search_path: a "=" that is always true
-- for text, oid, integer and regrole (a revoke using it would delete every
-- grant), and a look-alike table.
CREATE SCHEMA evil;
CREATE FUNCTION evil.texteq(text, text) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.texteq);
CREATE FUNCTION evil.oideq(oid, oid) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE OPERATOR evil.= (LEFTARG = oid, RIGHTARG = oid, FUNCTION = evil.oideq);
CREATE FUNCTION evil.int4eq(integer, integer) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE OPERATOR evil.= (LEFTARG = integer, RIGHTARG = integer, FUNCTION = evil.int4eq);
CREATE FUNCTION evil.regroleeq(regrole, regrole) RETURNS boolean LANGUAGE sql
    AS $$ SELECT true $$;
CREATE OPERATOR evil.= (LEFTARG = regrole, RIGHTARG = regrole, FUNCTION = evil.regroleeq);
CREATE TABLE evil.usage_grants (LIKE hilo.usage_grants);
GRANT USAGE ON SCHEMA evil TO regress_owner, regress_user;
SET ROLE regress_owner;
SET search_path = evil, public, pg_catalog;
SELECT hilo_create('evil_priv');
SELECT hilo_grant_usage('evil_priv', 'regress_user');
SELECT hilo_grant_usage('evil_priv', 'regress_group');
SELECT hilo_revoke_usage('evil_priv', 'regress_user');
SELECT role FROM hilo.usage WHERE sequence OPERATOR(pg_catalog.=) 'evil_priv' AND NOT is_owner;
SET ROLE regress_user;
SELECT hilo_nextval('evil_priv');
:sqlstate
SELECT hilo_take('evil_priv', 1);
:sqlstate
RESET search_path;
RESET ROLE;
SELECT count(*) AS evil_rows FROM evil.usage_grants;
DROP SCHEMA evil CASCADE;
SELECT hilo_drop('evil_priv');

-- Read-only transactions: every writing function of the extension refuses
-- with 25006 (the ones that only read, hilo_uuid_id, hilo_uuid_time,
-- hilo_node_id and hilo_node_of, answer). The list is checked against
-- pg_proc, so a new function cannot be left out.
SELECT hilo_create('ro');
CREATE TABLE ro_serial (id bigserial);
CREATE TEMP TABLE writing_calls (fn text, call text);
INSERT INTO writing_calls VALUES
    ('hilo_create', $$SELECT hilo_create('ro2')$$),
    ('hilo_drop', $$SELECT hilo_drop('ro')$$),
    ('hilo_alter', $$SELECT hilo_alter('ro', block_size => 5)$$),
    ('hilo_take', $$SELECT hilo_take('ro', 1)$$),
    ('hilo_take_ranges', $$SELECT * FROM hilo_take_ranges('ro', 1)$$),
    ('hilo_push', $$SELECT hilo_push('ro', '{[1,1]}')$$),
    ('hilo_push_ranges', $$SELECT hilo_push_ranges('ro', '{1}', '{1}')$$),
    ('hilo_nextval', $$SELECT hilo_nextval('ro')$$),
    ('hilo_uuid', $$SELECT hilo_uuid('ro')$$),
    ('hilo_uuid_id', $$SELECT hilo_uuid_id('01a2108c-9d67-7000-8000-000000000003')$$),
    ('hilo_uuid_time', $$SELECT hilo_uuid_time('01a2108c-9d67-7000-8000-000000000003')$$),
    ('hilo_node_id', $$SELECT hilo_node_id()$$),
    ('hilo_node_of', $$SELECT hilo_node_of('ro', 1)$$),
    ('hilo_grant_usage', $$SELECT hilo_grant_usage('ro', 'public')$$),
    ('hilo_revoke_usage', $$SELECT hilo_revoke_usage('ro', 'public')$$),
    ('hilo_add_node', $$SELECT hilo_add_node('n1', 'dbname=postgres')$$),
    ('hilo_remove_node', $$SELECT hilo_remove_node('n1')$$),
    ('hilo_agent_run', $$SELECT hilo_agent_run()$$),
    ('hilo_raise', $$SELECT hilo_raise('ro', 5)$$),
    ('hilo_adopt', $$SELECT hilo_adopt('ro_serial', 'id')$$),
    ('hilo_unadopt', $$SELECT hilo_unadopt('ro_serial', 'id')$$);
SELECT p.proname AS function_missing_from_the_list
  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'hilo'
 WHERE p.pronamespace = e.extnamespace
   AND p.proname NOT IN (SELECT fn FROM writing_calls);
SET default_transaction_read_only = on;
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT fn, call FROM writing_calls ORDER BY fn LOOP
        BEGIN
            EXECUTE r.call;
            RAISE NOTICE '%: no error', r.fn;
        EXCEPTION WHEN OTHERS THEN
            RAISE NOTICE '%: %', r.fn, SQLSTATE;
        END;
    END LOOP;
END $$;
RESET default_transaction_read_only;
SELECT hilo_drop('ro');
DROP TABLE ro_serial;

DROP ROLE regress_owner, regress_user, regress_other, regress_group;
