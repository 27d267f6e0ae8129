-- hilo 0.4.0 -> 0.5.0
--
-- Faults and lifecycles: what this version changes in the catalog is listed
-- section by section below, each with the reason.

\echo Use "ALTER EXTENSION hilo UPDATE TO '0.5.0'" to load this file. \quit

-- == sqlsurface: sequences that behave like PostgreSQL's own objects ==
--
-- hilo_drop(seq, cascade): refuses (2BP01) while a column default calls a
-- hilo function with the sequence's name as a constant, as DROP SEQUENCE
-- refuses while a default calls nextval on it; with cascade => true it
-- drops those defaults, as DROP SEQUENCE ... CASCADE does. A new signature:
-- the old one must go, or hilo_drop('x') would be ambiguous.
DROP FUNCTION hilo_drop(text);
CREATE FUNCTION hilo_drop(seq text, cascade boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'hilo_drop'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The highest ID any window of a dropped sequence covered, per name: a
-- sequence created again under that name without an explicit start_value
-- starts above it, so keys already stored in tables never collide with it
-- by accident. pg_dump carries it; DROP EXTENSION hilo drops it with
-- everything else.
CREATE TABLE hilo.dropped_names (
    name            text PRIMARY KEY,
    high_water_mark bigint NOT NULL,
    dropped_at      timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('hilo.dropped_names', '');

-- start_value NULL (the new default): 1, or above a dropped name's mark.
CREATE OR REPLACE FUNCTION hilo_create(seq text,
                                       start_value bigint DEFAULT NULL,
                                       max_value bigint DEFAULT 9223372036854775806,
                                       window_size bigint DEFAULT 1000000,
                                       min_open_windows integer DEFAULT 2,
                                       block_size integer DEFAULT 1000,
                                       monotonic boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'hilo_create'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- A column default or generation expression created for a hilo sequence
-- that does not exist is refused (42704) when the DDL command ends, as
-- DEFAULT nextval('ordres') is. Not checked with check_function_bodies off,
-- which pg_dump's and pg_restore's scripts set: they restore the tables
-- before hilo's catalog rows.
CREATE FUNCTION hilo._check_defaults()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'hilo_check_defaults'
LANGUAGE C;
REVOKE ALL ON FUNCTION hilo._check_defaults() FROM PUBLIC;
CREATE EVENT TRIGGER hilo_check_defaults ON ddl_command_end
    WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'CREATE FOREIGN TABLE', 'ALTER FOREIGN TABLE')
    EXECUTE FUNCTION hilo._check_defaults();
