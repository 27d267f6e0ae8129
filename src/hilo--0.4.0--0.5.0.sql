-- hilo 0.4.0 -> 0.5.0
--
-- Faults and lifecycles: what this version changes in the catalog is listed
-- section by section below, each with the reason.

\echo Use "ALTER EXTENSION hilo UPDATE TO '0.5.0'" to load this file. \quit

-- == incarnation: the catalog's incarnation ==
-- Pools, backend buffers and the allocator's state live in shared memory
-- and outlive the catalog they came from: DROP EXTENSION hilo and CREATE
-- EXTENSION hilo make a new, empty catalog whose seq_id values start at 1
-- again. Each catalog gets one value here, random and never dumped (so a
-- restore, a re-create, a new database all get a new one). Everything in
-- shared memory is keyed by it as well as by (database, seq_id), and the
-- allocator publishes a reservation only into a pool of the incarnation it
-- reserved in (docs/design.md, "Catalog incarnations").
CREATE TABLE hilo.incarnation (
    value bigint NOT NULL
);
CREATE UNIQUE INDEX incarnation_one_row ON hilo.incarnation ((true));
-- A catalog updated from an older version keeps the incarnation the library
-- gave it before (2^62 + the OID of hilo.sequences), so that its pools, and
-- the pushed IDs waiting in them, stay valid across the update. A new one
-- (CREATE EXTENSION runs every script in its own transaction, which then
-- also created hilo.sequences) gets a random value.
INSERT INTO hilo.incarnation (value)
    SELECT CASE WHEN c.xmin::text = (pg_catalog.txid_current() % 4294967296)::text
                THEN ('x' || pg_catalog.substr(pg_catalog.md5(pg_catalog.gen_random_uuid()::text),
                                               1, 16))::bit(64)::bigint
                ELSE 4611686018427387904 + c.oid::bigint END
      FROM pg_catalog.pg_class c WHERE c.oid = 'hilo.sequences'::pg_catalog.regclass;
