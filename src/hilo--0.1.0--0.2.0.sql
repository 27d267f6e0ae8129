-- hilo 0.1.0 -> 0.2.0.
--
-- 0.1.0 is the first released catalog; its install script is frozen. This
-- is the one place where 0.2.0 differs from 0.1.0 (a fresh CREATE EXTENSION
-- runs src/hilo.sql, the whole current schema). The shared library serves
-- every version: every C function accepts the argument lists of each.
\echo Use "ALTER EXTENSION hilo UPDATE TO '0.2.0'" to load this file. \quit

-- ---------------------------------------------------------------------------
-- hilo_nextval: per-backend buffers, per-node pools, monotonic sequences,
-- hilo_alter, and the views hilo.buffers and hilo.status.
-- ---------------------------------------------------------------------------

-- A monotonic sequence hands out, on one node, every ID above every ID
-- handed out before it: one shared counter, no per-backend blocks, no push.
ALTER TABLE hilo.sequences ADD COLUMN monotonic boolean NOT NULL DEFAULT false;

DROP FUNCTION hilo_create(text, bigint, bigint, bigint, integer, integer);
CREATE FUNCTION hilo_create(seq text,
                            start_value bigint DEFAULT 1,
                            max_value bigint DEFAULT 9223372036854775806,
                            window_size bigint DEFAULT 1000000,
                            min_open_windows integer DEFAULT 2,
                            block_size integer DEFAULT 1000,
                            monotonic boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'hilo_create'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Changes settings; NULL leaves a setting as it is.
CREATE FUNCTION hilo_alter(seq text,
                           max_value bigint DEFAULT NULL,
                           window_size bigint DEFAULT NULL,
                           min_open_windows integer DEFAULT NULL,
                           block_size integer DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'hilo_alter'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION hilo_nextval(seq text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'hilo_nextval'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- What shared memory holds, for the views below. Everyone may read them:
-- they show counts and ranges, no catalog rows.
GRANT USAGE ON SCHEMA hilo TO PUBLIC;

CREATE FUNCTION hilo.buffer_slots()
RETURNS TABLE (pid integer, seq_id integer, next_id bigint, end_id bigint)
AS 'MODULE_PATHNAME', 'hilo_buffer_slots'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION hilo.pool_stats()
RETURNS TABLE (seq_id integer, pool_ids bigint, buffered_ids bigint, issued bigint,
               rate double precision)
AS 'MODULE_PATHNAME', 'hilo_pool_stats'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

-- Each backend's buffer: it hands out next_id up to end_id - 1.
CREATE VIEW hilo.buffers AS
SELECT b.pid, s.name AS sequence, b.next_id, b.end_id
  FROM hilo.buffer_slots() b
  JOIN hilo.sequences s ON s.seq_id = b.seq_id;

-- Per sequence: where it stands and how long what is left lasts.
CREATE VIEW hilo.status AS
WITH open_windows AS (
    SELECT seq_id, count(*) AS windows,
           sum(window_end_value - next_hi_value)::numeric AS ids
      FROM hilo.windows
     WHERE next_hi_value < window_end_value
     GROUP BY seq_id
), free AS (
    SELECT seq_id, sum(last_id - first_id + 1)::numeric AS ids
      FROM hilo.free_ranges
     GROUP BY seq_id
), counts AS (
    SELECT s.seq_id, s.name, s.high_water_mark, s.max_value,
           coalesce(w.windows, 0) AS open_windows,
           coalesce(w.ids, 0) AS ids_in_open_windows,
           coalesce(f.ids, 0) AS free_ids,
           coalesce(p.pool_ids, 0) AS pool_ids,
           coalesce(p.buffered_ids, 0) AS buffered_ids,
           coalesce(p.issued, 0) AS issued_since_start,
           coalesce(p.rate, 0) AS rate
      FROM hilo.sequences s
      LEFT JOIN open_windows w ON w.seq_id = s.seq_id
      LEFT JOIN free f ON f.seq_id = s.seq_id
      LEFT JOIN hilo.pool_stats() p ON p.seq_id = s.seq_id
)
SELECT name AS sequence, high_water_mark, open_windows, ids_in_open_windows, free_ids,
       pool_ids, buffered_ids, issued_since_start,
       round(rate::numeric, 1) AS ids_per_second,
       (max_value - high_water_mark)::numeric + ids_in_open_windows + free_ids + pool_ids
           + buffered_ids AS ids_left,
       CASE WHEN rate > 0 THEN make_interval(secs => least(
                ((max_value - high_water_mark)::numeric + ids_in_open_windows + free_ids
                 + pool_ids + buffered_ids)::double precision / rate, 1e15))
       END AS lasts
  FROM counts;

GRANT SELECT ON hilo.buffers, hilo.status TO PUBLIC;
-- Multi-node: nodes, the quorum register and the agent
--
-- Several PostgreSQL servers ("nodes") hand out IDs of the same sequences
-- without overlaps. Each node keeps serving takes from its own open windows;
-- new windows are claimed through a quorum register that every node stores
-- (docs/quorum-register.md), and the agent keeps every node supplied
-- (docs/multi-node.md). Every table below is written only by hilo's own
-- functions, which run as the catalog owner with a fixed search_path.

-- This node's register storage: a random nonce, mixed with the system
-- identifier, the timeline and the database OID into the node's incarnation
-- (a restore or a promotion changes it), and the count of register writes,
-- which a node restored from an old backup cannot keep up (fencing). The
-- row is created on first use.
CREATE TABLE hilo.local_node (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    nonce       bigint NOT NULL,
    write_count bigint NOT NULL DEFAULT 0 CHECK (write_count >= 0)
);

-- The quorum register: per sequence name, the highest ID anyone may have
-- claimed, and the attempt that last set it. Only grows; every change is
-- committed with synchronous_commit = on before the reply leaves the node.
CREATE TABLE hilo.register (
    key          text PRIMARY KEY,
    value        bigint NOT NULL,
    proposer_id  bigint NOT NULL DEFAULT 0,
    claim_number bigint NOT NULL DEFAULT 0,
    attempt      integer NOT NULL DEFAULT 0
);

-- The cluster configuration this node installed (epoch 0: not in a
-- cluster), and its vote in agreeing on the next one (single-decree Paxos
-- per epoch, src/core/config_agreement.hpp). config is
-- {"epoch", "cluster_id", "next_node_id", "nodes": [{"id", "name",
-- "conninfo", "incarnation"}]}. Created on first use.
CREATE TABLE hilo.cluster (
    singleton         boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    epoch             bigint NOT NULL DEFAULT 0 CHECK (epoch >= 0),
    config            jsonb,
    installed_at      timestamptz,
    promised_counter  bigint NOT NULL DEFAULT 0,
    promised_proposer bigint NOT NULL DEFAULT 0,
    accepted_counter  bigint NOT NULL DEFAULT 0,
    accepted_proposer bigint NOT NULL DEFAULT 0,
    accepted_config   jsonb,
    accepted_at       timestamptz,
    CONSTRAINT config_when_member CHECK ((epoch = 0) = (config IS NULL))
);

-- What this node's proposers have seen of every node's register writes:
-- a node that later answers with a lower count went backwards and is fenced.
CREATE TABLE hilo.peer_watermarks (
    node_id             integer PRIMARY KEY,
    incarnation         bigint NOT NULL,
    highest_write_count bigint NOT NULL,
    fenced              boolean NOT NULL DEFAULT false,
    fenced_at           timestamptz
);

-- Sequences dropped while in a cluster, so that the agent drops them on
-- every node instead of carrying them back.
CREATE TABLE hilo.dropped_sequences (
    name       text NOT NULL,
    created_at timestamptz NOT NULL,
    dropped_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (name, created_at)
);

SELECT pg_catalog.pg_extension_config_dump('hilo.local_node', '');
SELECT pg_catalog.pg_extension_config_dump('hilo.register', '');
SELECT pg_catalog.pg_extension_config_dump('hilo.cluster', '');
SELECT pg_catalog.pg_extension_config_dump('hilo.peer_watermarks', '');
SELECT pg_catalog.pg_extension_config_dump('hilo.dropped_sequences', '');

CREATE FUNCTION hilo._record_dropped_sequence() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM hilo.cluster WHERE epoch > 0) THEN
        INSERT INTO hilo.dropped_sequences (name, created_at)
        VALUES (OLD.name, OLD.created_at) ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER record_dropped_sequence AFTER DELETE ON hilo.sequences
    FOR EACH ROW EXECUTE FUNCTION hilo._record_dropped_sequence();

-- Membership. hilo_add_node, run on any member, adds a node; the first call
-- on a node that is in no cluster yet must name that node itself.
CREATE FUNCTION hilo_add_node(name text, conninfo text)
RETURNS integer
AS 'MODULE_PATHNAME', 'hilo_add_node'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION hilo_remove_node(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'hilo_remove_node'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- One run of the agent, as the background worker makes it every
-- hilo.agent_interval; for manual or pg_cron use. Returns what it did.
CREATE FUNCTION hilo_agent_run()
RETURNS text
AS 'MODULE_PATHNAME', 'hilo_agent_run'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION hilo._nodes()
RETURNS TABLE (node_id integer, name text, conninfo text, incarnation bigint, is_self boolean,
               fenced boolean, highest_write_count bigint, reachable boolean, last_error text,
               epoch bigint)
AS 'MODULE_PATHNAME', 'hilo_nodes'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION hilo._agent_status()
RETURNS TABLE (last_run_at timestamptz, run_by text, ok boolean, has_majority boolean,
               nodes_total integer, nodes_reachable integer, windows_claimed bigint,
               sequences_carried bigint, runs bigint, message text)
AS 'MODULE_PATHNAME', 'hilo_agent_status'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE VIEW hilo.nodes AS SELECT * FROM hilo._nodes();
CREATE VIEW hilo.agent_status AS SELECT * FROM hilo._agent_status();

-- Called by other nodes over libpq (as a superuser): the acceptor of the
-- quorum register, configuration agreement, and the agent's helpers.
CREATE FUNCTION hilo._node_identity()
RETURNS TABLE (incarnation bigint, epoch bigint, cluster_id bigint, node_id integer,
               windows bigint, write_count bigint)
AS 'MODULE_PATHNAME', 'hilo_node_identity'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION hilo._register_handle(epoch bigint, keys text[], kinds integer[],
                                      proposers bigint[], claims bigint[], attempts integer[],
                                      expected bigint[], new_values bigint[])
RETURNS TABLE (status integer, value bigint, incarnation bigint, write_count bigint)
AS 'MODULE_PATHNAME', 'hilo_register_handle_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION hilo._register_raise(keys text[], new_values bigint[])
RETURNS bigint
AS 'MODULE_PATHNAME', 'hilo_register_raise'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION hilo._register_dump()
RETURNS TABLE (key text, value bigint)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$ SELECT key, value FROM hilo.register $$;

CREATE FUNCTION hilo._cluster_state()
RETURNS TABLE (epoch bigint, config text, installed_ms_ago bigint, accepted_counter bigint,
               accepted_config text, accepted_ms_ago bigint)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.epoch, c.config::text,
           (extract(epoch FROM clock_timestamp() - c.installed_at) * 1000)::bigint,
           c.accepted_counter, c.accepted_config::text,
           (extract(epoch FROM clock_timestamp() - c.accepted_at) * 1000)::bigint
      FROM hilo.cluster c
    UNION ALL
    SELECT 0, NULL, NULL, 0, NULL, NULL WHERE NOT EXISTS (SELECT 1 FROM hilo.cluster)
$$;

CREATE FUNCTION hilo._config_prepare(slot bigint, counter bigint, proposer bigint)
RETURNS TABLE (vote integer, epoch bigint, config text, promised_counter bigint,
               accepted_counter bigint, accepted_proposer bigint, accepted_config text)
AS 'MODULE_PATHNAME', 'hilo_config_prepare'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION hilo._config_accept(slot bigint, counter bigint, proposer bigint, config text)
RETURNS TABLE (vote integer, epoch bigint, promised_counter bigint)
AS 'MODULE_PATHNAME', 'hilo_config_accept'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION hilo._config_commit(config text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'hilo_config_commit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION hilo._bootstrap(name text, conninfo text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'hilo_bootstrap'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION hilo._sequence_report()
RETURNS TABLE (name text, start_value bigint, max_value bigint, window_size bigint,
               min_open_windows integer, block_size integer, owner text,
               created_at timestamptz, open_windows bigint)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
    SELECT s.name, s.start_value, s.max_value, s.window_size, s.min_open_windows,
           s.block_size, s.owner::text, s.created_at,
           (SELECT count(*) FROM hilo.windows w
             WHERE w.seq_id = s.seq_id
               AND w.next_hi_value < w.window_end_value)
      FROM hilo.sequences s
$$;

CREATE FUNCTION hilo._tombstones()
RETURNS TABLE (name text, created_at timestamptz)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$ SELECT name, created_at FROM hilo.dropped_sequences $$;

-- Creates a sequence the agent carries from another node, with the same
-- created_at; returns NULL, or why it could not.
CREATE FUNCTION hilo._carry_sequence(name text, start_value bigint, max_value bigint,
                                     window_size bigint, min_open_windows integer,
                                     block_size integer, owner text, created_at timestamptz)
RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    role_oid oid;
BEGIN
    IF EXISTS (SELECT 1 FROM hilo.dropped_sequences d
                WHERE d.name = _carry_sequence.name
                  AND d.created_at >= _carry_sequence.created_at) THEN
        RETURN 'dropped here';
    END IF;
    SELECT r.oid INTO role_oid FROM pg_catalog.pg_roles r
     WHERE r.rolname = _carry_sequence.owner;
    IF role_oid IS NULL THEN
        RETURN pg_catalog.format('role %I does not exist here', owner);
    END IF;
    INSERT INTO hilo.sequences (name, start_value, max_value, window_size, min_open_windows,
                                block_size, owner, high_water_mark, created_at)
    VALUES (name, start_value, max_value, window_size, min_open_windows, block_size,
            role_oid::regrole, start_value - 1, created_at)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

-- Drops a sequence that was dropped on another node, if it is the same one.
CREATE FUNCTION hilo._drop_carried(name text, created_at timestamptz)
RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM hilo.sequences s
                    WHERE s.name = _drop_carried.name
                      AND s.created_at <= _drop_carried.created_at) THEN
        RETURN false;
    END IF;
    PERFORM @extschema@.hilo_drop(name);
    RETURN true;
END $$;

-- Installs windows the agent claimed for this node through the register.
-- Refuses (and installs nothing) if one overlaps a window this node has:
-- that would be a bug, and must never be hidden.
CREATE FUNCTION hilo._install_windows(names text[], firsts bigint[], lasts bigint[])
RETURNS integer
AS 'MODULE_PATHNAME', 'hilo_install_windows'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION hilo._watermarks()
RETURNS TABLE (node_id integer, incarnation bigint, highest_write_count bigint, fenced boolean)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$ SELECT node_id, incarnation, highest_write_count, fenced FROM hilo.peer_watermarks $$;

-- Merges what another proposer learned: higher counts, and fences, of the
-- same incarnation; a new incarnation replaces the entry. Input must not
-- name a node twice.
CREATE FUNCTION hilo._save_watermarks(node_ids integer[], incarnations bigint[],
                                      counts bigint[], fenced boolean[])
RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO hilo.peer_watermarks AS p (node_id, incarnation, highest_write_count, fenced,
                                          fenced_at)
    SELECT u.n, u.i, u.c, u.f, CASE WHEN u.f THEN now() END
      FROM unnest(node_ids, incarnations, counts, fenced) AS u(n, i, c, f)
     ORDER BY u.n  -- every writer locks rows in one order: no deadlocks
    ON CONFLICT (node_id) DO UPDATE
       SET incarnation = excluded.incarnation,
           highest_write_count = CASE WHEN p.incarnation = excluded.incarnation
                                      THEN greatest(p.highest_write_count, excluded.highest_write_count)
                                      ELSE excluded.highest_write_count END,
           fenced = CASE WHEN p.incarnation = excluded.incarnation
                         THEN p.fenced OR excluded.fenced ELSE excluded.fenced END,
           fenced_at = CASE WHEN p.incarnation = excluded.incarnation
                             AND p.fenced THEN p.fenced_at
                            WHEN excluded.fenced THEN now() END
$$;

-- Only superusers (and roles they grant it to) manage nodes and talk to
-- other nodes.
REVOKE ALL ON FUNCTION hilo_add_node(text, text), hilo_remove_node(text), hilo_agent_run()
    FROM PUBLIC;
REVOKE ALL ON FUNCTION hilo._record_dropped_sequence(), hilo._nodes(), hilo._agent_status(),
    hilo._node_identity(), hilo._register_handle(bigint, text[], integer[], bigint[], bigint[],
    integer[], bigint[], bigint[]), hilo._register_raise(text[], bigint[]), hilo._register_dump(),
    hilo._cluster_state(), hilo._config_prepare(bigint, bigint, bigint),
    hilo._config_accept(bigint, bigint, bigint, text), hilo._config_commit(text),
    hilo._bootstrap(text, text), hilo._sequence_report(), hilo._tombstones(),
    hilo._carry_sequence(text, bigint, bigint, bigint, integer, integer, text, timestamptz),
    hilo._drop_carried(text, timestamptz), hilo._install_windows(text[], bigint[], bigint[]),
    hilo._watermarks(), hilo._save_watermarks(integer[], bigint[], bigint[], boolean[])
    FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- hilo.status also says what the agent last reported (NULL on a node that
-- is in no cluster): with no majority, why it claimed nothing.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hilo._agent_message()
RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT message FROM hilo._agent_status() LIMIT 1 $$;

CREATE OR REPLACE VIEW hilo.status AS
WITH open_windows AS (
    SELECT seq_id, count(*) AS windows,
           sum(window_end_value - next_hi_value)::numeric AS ids
      FROM hilo.windows
     WHERE next_hi_value < window_end_value
     GROUP BY seq_id
), free AS (
    SELECT seq_id, sum(last_id - first_id + 1)::numeric AS ids
      FROM hilo.free_ranges
     GROUP BY seq_id
), counts AS (
    SELECT s.seq_id, s.name, s.high_water_mark, s.max_value,
           coalesce(w.windows, 0) AS open_windows,
           coalesce(w.ids, 0) AS ids_in_open_windows,
           coalesce(f.ids, 0) AS free_ids,
           coalesce(p.pool_ids, 0) AS pool_ids,
           coalesce(p.buffered_ids, 0) AS buffered_ids,
           coalesce(p.issued, 0) AS issued_since_start,
           coalesce(p.rate, 0) AS rate
      FROM hilo.sequences s
      LEFT JOIN open_windows w ON w.seq_id = s.seq_id
      LEFT JOIN free f ON f.seq_id = s.seq_id
      LEFT JOIN hilo.pool_stats() p ON p.seq_id = s.seq_id
)
SELECT name AS sequence, high_water_mark, open_windows, ids_in_open_windows, free_ids,
       pool_ids, buffered_ids, issued_since_start,
       round(rate::numeric, 1) AS ids_per_second,
       (max_value - high_water_mark)::numeric + ids_in_open_windows + free_ids + pool_ids
           + buffered_ids AS ids_left,
       CASE WHEN rate > 0 THEN make_interval(secs => least(
                ((max_value - high_water_mark)::numeric + ids_in_open_windows + free_ids
                 + pool_ids + buffered_ids)::double precision / rate, 1e15))
       END AS lasts,
       hilo._agent_message() AS agent_message
  FROM counts;
