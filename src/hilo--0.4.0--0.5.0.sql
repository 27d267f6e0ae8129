-- hilo 0.4.0 -> 0.5.0
--
-- Faults and lifecycles: what this version changes in the catalog is listed
-- section by section below, each with the reason.

\echo Use "ALTER EXTENSION hilo UPDATE TO '0.5.0'" to load this file. \quit

-- == fencing: a node that starts from a backup is a new node ==
--
-- A server that starts with backup_label, recovery.signal or standby.signal
-- in its data directory draws a new restore id (file $PGDATA/hilo_restore_id)
-- that changes its incarnation: its configuration no longer lists it until it
-- rejoins. hilo.local_node records, per database, the restore id whose
-- restored windows and free ranges the allocator already retired, and when.
ALTER TABLE hilo.local_node ADD COLUMN restore_id bigint NOT NULL DEFAULT 0;
ALTER TABLE hilo.local_node ADD COLUMN restored_at timestamptz;

-- The pre-sync of a membership change reads register values from a majority;
-- a restored copy (its values may have gone back) must refuse, so the dump is
-- now C code that checks that the installed configuration lists this node.
CREATE OR REPLACE FUNCTION hilo._register_dump()
RETURNS TABLE (key text, value bigint)
AS 'MODULE_PATHNAME', 'hilo_register_dump'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
