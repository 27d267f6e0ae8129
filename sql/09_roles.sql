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
