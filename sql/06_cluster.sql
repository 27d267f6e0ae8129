-- Membership errors, and a cluster of one node (this one): hilo_add_node's
-- first call makes it a member, and every new window then comes from the
-- quorum register, reached over libpq.
\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
\set VERBOSITY terse
SELECT 'host=' || current_setting('unix_socket_directories') || ' port=' || current_setting('port')
       || ' dbname=' || current_database() AS self_conninfo \gset
SELECT 'host=' || current_setting('unix_socket_directories') || ' port=' || current_setting('port')
       AS server \gset

-- In no cluster yet.
SELECT count(*) AS nodes FROM hilo.nodes;
SELECT hilo_agent_run();
SELECT ok, has_majority, message FROM hilo.agent_status;
SELECT hilo_remove_node('x');
:sqlstate

-- Argument and context errors.
SELECT hilo_add_node(NULL, 'x');
:sqlstate
SELECT hilo_add_node('', 'x');
:sqlstate
SELECT hilo_add_node(repeat('n', 64), 'x');
:sqlstate
BEGIN;
SELECT hilo_add_node('a', :'self_conninfo');
:sqlstate
ROLLBACK;

-- Nobody there.
\set VERBOSITY default
SELECT hilo_add_node('ghost', 'host=/nonexistent port=1');
:sqlstate
-- A server that answers, without hilo in that database.
CREATE DATABASE regress_plain;
SELECT hilo_add_node('plain', :'server' || ' dbname=regress_plain');
:sqlstate
\set VERBOSITY terse
-- A database with hilo that is not this one: the first node must be this one.
CREATE DATABASE regress_other;
\c regress_other
CREATE EXTENSION hilo;
\c contrib_regression
\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
\set VERBOSITY terse
SELECT hilo_add_node('other', :'server' || ' dbname=regress_other');
:sqlstate

-- A sequence with IDs handed out before the cluster existed.
SELECT hilo_create('before', window_size => 100, min_open_windows => 2, block_size => 1);
SELECT hilo_take('before', 5);

-- This node becomes a cluster of one.
SELECT hilo_add_node('solo', :'self_conninfo');
SELECT node_id, name, is_self, fenced, epoch, incarnation <> 0 AS has_incarnation FROM hilo.nodes;
-- The register starts above every ID the node handed out on its own.
SELECT key, value FROM hilo.register WHERE key IN ('before', 'after') ORDER BY key;
SELECT epoch, config->'nodes'->0->>'name' AS name FROM hilo.cluster;

-- Open windows still serve takes; a take larger than they hold claims its
-- range through the register, above everything claimed before.
SELECT hilo_take('before', 150);
SELECT hilo_take('before', 1000);
SELECT key, value FROM hilo.register WHERE key IN ('before', 'after') ORDER BY key;

-- The agent opens windows from the register, for new sequences too.
SELECT hilo_create('after', window_size => 10, min_open_windows => 3, block_size => 1);
SELECT hilo_agent_run() LIKE '1 of 1 nodes answered; installed % windows; created 0 sequences' AS ran;
SELECT ok, has_majority, nodes_total, nodes_reachable, runs > 0 AS ran FROM hilo.agent_status;
SELECT w.window_start_value, w.window_end_value, w.next_hi_value
  FROM hilo.windows w JOIN hilo.sequences s USING (seq_id)
 WHERE s.name = 'after' ORDER BY 1;
SELECT hilo_take('after', 25);
SELECT node_id, name, reachable, last_error FROM hilo.nodes;

-- A hostile search_path changes nothing: look-alike operators and functions
-- that the catalog queries would pick up if they used the caller's path.
CREATE SCHEMA evil;
CREATE FUNCTION evil.texteq(text, text) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.texteq);
CREATE FUNCTION evil.jsonb_array_elements(jsonb) RETURNS SETOF jsonb LANGUAGE sql
    AS $$ SELECT '{"id": 99, "name": "evil"}'::jsonb $$;
CREATE FUNCTION evil.unnest(text[], bigint[]) RETURNS TABLE (a text, b bigint) LANGUAGE sql
    AS $$ SELECT 'evil', 0::bigint $$;
SET search_path = evil, public, pg_catalog;
SELECT hilo_agent_run() LIKE '1 of 1 nodes answered%' AS ran;
SELECT node_id, name FROM hilo.nodes;
SELECT hilo_take('after', 3);
RESET search_path;
DROP SCHEMA evil CASCADE;

-- Membership errors within a cluster.
SELECT hilo_add_node('solo', 'x');
:sqlstate
SELECT hilo_add_node('again', :'self_conninfo');
:sqlstate
SELECT hilo_add_node('plain', :'server' || ' dbname=regress_plain');
:sqlstate
SELECT hilo_remove_node('nobody');
:sqlstate
SELECT hilo_remove_node('solo');
:sqlstate

-- The acceptor answers only as a statement of its own (its change must be
-- committed before it answers), and only for this node's epoch.
BEGIN;
SELECT * FROM hilo._register_handle(1, '{after}', '{0}', '{7}', '{1}', '{1}', '{0}', '{0}');
:sqlstate
ROLLBACK;
SELECT * FROM hilo._register_handle(9, '{after}', '{0}', '{7}', '{1}', '{1}', '{0}', '{0}');
:sqlstate
SELECT status, value FROM hilo._register_handle(1, '{after}', '{0}', '{7}', '{1}', '{1}', '{0}', '{0}');

-- A drop in a cluster leaves a tombstone, so the agent drops it everywhere.
SELECT hilo_drop('after');
SELECT name FROM hilo.dropped_sequences;

-- Ordinary roles cannot manage nodes or call the node-to-node functions.
CREATE ROLE regress_hilo_nobody;
SET ROLE regress_hilo_nobody;
SELECT hilo_add_node('x', 'y');
:sqlstate
SELECT hilo_agent_run();
:sqlstate
SELECT * FROM hilo.nodes;
:sqlstate
RESET ROLE;
DROP ROLE regress_hilo_nobody;

SELECT hilo_drop('before');
DROP DATABASE regress_plain;
DROP DATABASE regress_other;
