-- hilo: the whole current catalog and SQL surface, in one file.
--
-- The Makefile installs this file as hilo--<default_version>.sql, so that
-- CREATE EXTENSION hilo runs it alone. An upgrade script
-- hilo--<from>--<to>.sql holds only what changed between two versions. A
-- catalog change goes both here and into the open upgrade script;
-- test/t/023_upgrade.pl checks that an upgraded catalog equals a fresh one.
-- Why one file of about 900 lines: it is what one version installs, read
-- as one script by CREATE EXTENSION; split, the Makefile would have to
-- join the parts again, and no single file would show the schema.
\echo Use "CREATE EXTENSION hilo" to load this file. \quit

-- The catalog lives in schema hilo. Callers get no privileges on its
-- tables: every change goes through the functions below, which run their
-- catalog queries as the extension's owner with a fixed search_path. Usage
-- of the schema is granted for the views at the end.
CREATE SCHEMA hilo;
REVOKE ALL ON SCHEMA hilo FROM PUBLIC;

CREATE SEQUENCE hilo.sequences_seq_id_seq AS integer;

-- One row per hilo sequence. A monotonic sequence hands out, on one node,
-- every ID above every ID handed out before it: one shared counter, no
-- per-backend blocks, no push.
CREATE TABLE hilo.sequences (
    seq_id           integer PRIMARY KEY DEFAULT pg_catalog.nextval('hilo.sequences_seq_id_seq'),
    name             text NOT NULL UNIQUE,
    start_value      bigint NOT NULL,
    max_value        bigint NOT NULL,
    window_size      bigint NOT NULL,
    min_open_windows integer NOT NULL,
    block_size       integer NOT NULL,
    owner            regrole NOT NULL,
    -- The highest ID any window of this sequence covers: windows are claimed
    -- just above it, and it only grows. start_value - 1 before the first.
    high_water_mark  bigint NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT pg_catalog.now(),
    monotonic        boolean NOT NULL DEFAULT false,
    -- Node slices (hilo_create's node_bits): the top node_bits bits below the
    -- sign bit of every ID hold the id of the node that issued it.
    node_bits        integer NOT NULL DEFAULT 0
                     CONSTRAINT node_bits_range CHECK (node_bits BETWEEN 0 AND 16),
    -- hilo_create's ordering: 'none', 'node' (monotonic), 'cluster' or
    -- 'quorum' (docs/multi-node.md, "Orderings"); monotonic mirrors 'node'.
    ordering         text NOT NULL DEFAULT 'none'
                     CONSTRAINT ordering_values
                     CHECK (ordering IN ('none', 'node', 'cluster', 'quorum')),
    CONSTRAINT ordering_monotonic CHECK (monotonic = (ordering = 'node')),
    -- The settings (hilo_alter's) are cluster-wide: each hilo_alter raises
    -- the version, the agent carries the newest copy to every node, and a
    -- node applies only a copy newer than its own: (version, changed_at).
    settings_version    bigint NOT NULL DEFAULT 1
                        CONSTRAINT settings_version_positive CHECK (settings_version >= 1),
    settings_changed_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT name_length CHECK (pg_catalog.octet_length(name) BETWEEN 1 AND 255),
    CONSTRAINT value_bounds CHECK (1 <= start_value AND start_value <= max_value
                                   AND max_value <= 9223372036854775806),
    CONSTRAINT sizes CHECK (window_size >= 1 AND min_open_windows >= 1 AND block_size >= 1),
    CONSTRAINT high_water_mark_bounds CHECK (high_water_mark >= start_value - 1
                                             AND high_water_mark <= max_value)
);
ALTER SEQUENCE hilo.sequences_seq_id_seq OWNED BY hilo.sequences.seq_id;

-- The ID windows: IDs window_start_value <= id < window_end_value;
-- those below next_hi_value have been reserved. A window is open while
-- next_hi_value < window_end_value. Windows of one sequence never overlap,
-- and used-up windows stay: together they record every ID ever reserved.
CREATE TABLE hilo.windows (
    seq_id             integer NOT NULL,
    window_start_value bigint NOT NULL,
    window_end_value   bigint NOT NULL,
    next_hi_value      bigint NOT NULL,
    PRIMARY KEY (seq_id, window_start_value),
    CONSTRAINT window_bounds CHECK (window_start_value < window_end_value
                                    AND window_start_value <= next_hi_value
                                    AND next_hi_value <= window_end_value)
);
CREATE INDEX windows_open ON hilo.windows (seq_id, window_start_value)
    WHERE next_hi_value < window_end_value;

-- The free list: IDs pushed back, first_id..last_id inclusive,
-- handed out again lowest first. Pushes only ever insert rows; the allocator
-- alone deletes, shrinks and merges them, so it never waits on a caller's
-- open transaction.
CREATE TABLE hilo.free_ranges (
    seq_id   integer NOT NULL,
    first_id bigint NOT NULL,
    last_id  bigint NOT NULL,
    PRIMARY KEY (seq_id, first_id),
    CONSTRAINT free_bounds CHECK (first_id <= last_id)
);

-- One row per grant of USAGE on a sequence. grantee 0 (shown as '-') is
-- PUBLIC. regrole, so that pg_dump writes role names, not OIDs.
CREATE TABLE hilo.usage_grants (
    seq_id  integer NOT NULL REFERENCES hilo.sequences (seq_id) ON DELETE CASCADE,
    grantee regrole NOT NULL,
    PRIMARY KEY (seq_id, grantee)
);

-- The highest ID any window of a dropped sequence covered, per name: a
-- sequence created again under that name without an explicit start_value
-- starts above it, so keys already stored in tables never collide with it
-- by accident. pg_dump carries it; DROP EXTENSION hilo drops it with
-- everything else.
CREATE TABLE hilo.dropped_names (
    name            text PRIMARY KEY,
    high_water_mark bigint NOT NULL,
    dropped_at      timestamptz NOT NULL DEFAULT pg_catalog.now(),
    -- the dropped sequence's: a name made again keeps node_bits (> 0)
    node_bits       integer NOT NULL DEFAULT 0
);

-- The catalog's incarnation: pools, backend buffers and the allocator's
-- state live in shared memory and outlive the catalog they came from (DROP
-- EXTENSION and CREATE EXTENSION make a new catalog whose seq_id values
-- start at 1 again). Each catalog gets one random value here, never dumped;
-- everything in shared memory is keyed by it as well as by (database,
-- seq_id) (docs/design.md, "Catalog incarnations").
CREATE TABLE hilo.incarnation (
    value bigint NOT NULL
);
CREATE UNIQUE INDEX incarnation_one_row ON hilo.incarnation ((true));
INSERT INTO hilo.incarnation (value)
    VALUES (('x' || pg_catalog.substr(pg_catalog.md5(pg_catalog.gen_random_uuid()::text), 1, 16))
            ::bit(64)::bigint);

-- Multi-node: several PostgreSQL servers ("nodes") hand out IDs of the
-- same sequences without overlaps. Each node keeps serving takes from its
-- own open windows; new windows are claimed through a quorum register that
-- every node stores (docs/quorum-register.md), and the agent keeps every
-- node supplied (docs/multi-node.md).

-- This node's register storage: a random nonce, mixed with the system
-- identifier, the timeline and the database OID into the node's incarnation
-- (a restore or a promotion changes it), and the count of register writes,
-- which a node restored from an old backup cannot keep up (fencing). The
-- row is created on first use.
CREATE TABLE hilo.local_node (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    nonce       bigint NOT NULL,
    write_count bigint NOT NULL DEFAULT 0 CHECK (write_count >= 0),
    -- The restore id whose restored windows and free ranges the allocator
    -- of this database already retired, and when (cluster/restore.cpp).
    restore_id  bigint NOT NULL DEFAULT 0,
    restored_at timestamptz
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

-- What this node's proposers have seen of every node's acceptor writes
-- (register values and lease cells): a node that later answers with a
-- lower count went backwards and is fenced.
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

-- The node_bits sequences whose slice this node may claim in: a majority
-- of the cluster's nodes held the name with the same node_bits when it
-- first claimed there (cluster/window_claim.cpp). Not dumped: a node
-- agrees again.
CREATE TABLE hilo.slice_agreed (
    seq_id    integer PRIMARY KEY REFERENCES hilo.sequences (seq_id) ON DELETE CASCADE,
    agreed_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);

SELECT pg_catalog.pg_extension_config_dump('hilo.sequences', '');
SELECT pg_catalog.pg_extension_config_dump('hilo.sequences_seq_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('hilo.windows', '');
SELECT pg_catalog.pg_extension_config_dump('hilo.free_ranges', '');
SELECT pg_catalog.pg_extension_config_dump('hilo.usage_grants', '');
SELECT pg_catalog.pg_extension_config_dump('hilo.dropped_names', '');
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

-- ---------------------------------------------------------------------------
-- Sequences, takes, pushes, hilo_nextval
-- ---------------------------------------------------------------------------

-- In the order the versions added them (the order pg_proc lists them in).
CREATE FUNCTION hilo_take(seq text, n bigint, partial boolean DEFAULT false)
RETURNS int8multirange
AS 'MODULE_PATHNAME', 'hilo_take'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION hilo_take_ranges(seq text, n bigint, partial boolean DEFAULT false)
RETURNS TABLE (first_id bigint, last_id bigint)
AS 'MODULE_PATHNAME', 'hilo_take_ranges'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1;

CREATE FUNCTION hilo_push(seq text, ranges int8multirange)
RETURNS bigint
AS 'MODULE_PATHNAME', 'hilo_push'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- hilo_push for drivers without multirange support: parallel arrays of
-- inclusive bounds, the shape hilo_take_ranges returns. Unlike a multirange,
-- arrays can overlap, and an overlap is refused.
CREATE FUNCTION hilo_push_ranges(seq text, first_ids bigint[], last_ids bigint[])
RETURNS bigint
AS 'MODULE_PATHNAME', 'hilo_push_ranges'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- start_value NULL (the new default): 1, or above a dropped name's mark.
CREATE FUNCTION hilo_create(seq text,
                            start_value bigint DEFAULT NULL,
                            max_value bigint DEFAULT 9223372036854775806,
                            window_size bigint DEFAULT 1000000,
                            min_open_windows integer DEFAULT 2,
                            block_size integer DEFAULT 1000,
                            monotonic boolean DEFAULT false,
                            node_bits integer DEFAULT 0,
                            ordering text DEFAULT 'none')
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

-- Time-ordered UUID keys (RFC 9562 version 7 layout) that carry a hilo ID
-- of `seq` in place of random bits: unique among the sequence's UUIDs by
-- construction, strictly increasing within a session. hilo_uuid_id and
-- hilo_uuid_time read the ID and the time back (src/core/keys.hpp).
CREATE FUNCTION hilo_uuid(seq text)
RETURNS uuid
AS 'MODULE_PATHNAME', 'hilo_uuid'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION hilo_uuid_id(uuid uuid)
RETURNS bigint
AS 'MODULE_PATHNAME', 'hilo_uuid_id'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION hilo_uuid_time(uuid uuid)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'hilo_uuid_time'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- ---------------------------------------------------------------------------
-- Multi-node: membership, the agent, and what other nodes call over libpq
-- ---------------------------------------------------------------------------

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

-- Refuses on a node its installed configuration does not list (a restored
-- copy, whose register values may have gone back).
CREATE FUNCTION hilo._register_dump()
RETURNS TABLE (key text, value bigint)
AS 'MODULE_PATHNAME', 'hilo_register_dump'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

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
               created_at timestamptz, open_windows bigint, node_bits integer,
               ordering text, settings_version bigint, settings_changed_at timestamptz,
               slice_agreed boolean)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
    SELECT s.name, s.start_value, s.max_value, s.window_size, s.min_open_windows,
           s.block_size, s.owner::text, s.created_at,
           (SELECT count(*) FROM hilo.windows w
             WHERE w.seq_id = s.seq_id
               AND w.next_hi_value < w.window_end_value),
           s.node_bits, s.ordering, s.settings_version, s.settings_changed_at,
           EXISTS (SELECT 1 FROM hilo.slice_agreed a WHERE a.seq_id = s.seq_id)
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
                                     block_size integer, owner text, created_at timestamptz,
                                     node_bits integer DEFAULT 0, ordering text DEFAULT 'none',
                                     settings_version bigint DEFAULT 1,
                                     settings_changed_at timestamptz DEFAULT NULL)
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
    -- With other node_bits its slices here would hold IDs the dropped
    -- sequence handed out on other nodes (hilo_create refuses so too).
    IF EXISTS (SELECT 1 FROM hilo.dropped_names d
                WHERE d.name = _carry_sequence.name
                  AND d.node_bits > 0 AND _carry_sequence.node_bits > 0
                  AND d.node_bits <> _carry_sequence.node_bits) THEN
        RETURN 'a dropped sequence of the name had other node_bits here';
    END IF;
    SELECT r.oid INTO role_oid FROM pg_catalog.pg_roles r
     WHERE r.rolname = _carry_sequence.owner;
    IF role_oid IS NULL THEN
        RETURN pg_catalog.format('role %I does not exist here', owner);
    END IF;
    INSERT INTO hilo.sequences (name, start_value, max_value, window_size, min_open_windows,
                                block_size, owner, high_water_mark, created_at, node_bits,
                                ordering, monotonic, settings_version, settings_changed_at)
    VALUES (name, start_value, max_value, window_size, min_open_windows, block_size,
            role_oid::regrole,
            -- With node_bits this node claims in its own slice, with no
            -- register that outlives a drop: above what a dropped sequence
            -- of the name handed out here (as hilo_create does).
            CASE WHEN node_bits > 0
                 THEN least(greatest(start_value - 1,
                                     coalesce((SELECT d.high_water_mark FROM hilo.dropped_names d
                                                WHERE d.name = _carry_sequence.name), 0)),
                            max_value)
                 ELSE start_value - 1 END,
            created_at, node_bits,
            _carry_sequence.ordering, _carry_sequence.ordering = 'node',
            _carry_sequence.settings_version,
            coalesce(_carry_sequence.settings_changed_at, created_at))
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

-- Applies settings (hilo_alter's) the agent carries from another node, if
-- they are newer than this node's: (settings_version, settings_changed_at),
-- and only to the copy the agent read here (created_at; NULL: any).
-- Returns NULL (this node now has them, or newer ones), or why not.
CREATE FUNCTION hilo._carry_settings(name text, settings_version bigint,
                                     settings_changed_at timestamptz, max_value bigint,
                                     window_size bigint, min_open_windows integer,
                                     block_size integer, created_at timestamptz DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'hilo_carry_settings'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- What the agent passes last saw of each node's copy of a sequence's
-- settings (0: the node lacks the sequence), for hilo.status. Derived: the
-- agent rewrites it every pass, so it is not dumped.
CREATE TABLE hilo.node_settings (
    name             text NOT NULL,
    node_id          integer NOT NULL,
    settings_version bigint NOT NULL,
    seen_at          timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (name, node_id)
);

-- What an agent pass saw of every node's copy of each sequence's settings,
-- written on every node that answered (cluster/carry.cpp).
CREATE FUNCTION hilo._note_settings(names text[], node_ids integer[], versions bigint[])
RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO hilo.node_settings AS s (name, node_id, settings_version)
    SELECT u.n, u.i, u.v FROM unnest(names, node_ids, versions) AS u(n, i, v)
     -- a pass that sees what the last one saw writes nothing: no row
     -- versions, and no row locks either (ON CONFLICT locks the row it
     -- conflicts with, a WAL record each, also where its WHERE is false:
     -- 300 sequences on three nodes were 2,700 records a second)
     WHERE NOT EXISTS (SELECT FROM hilo.node_settings o
                        WHERE o.name = u.n AND o.node_id = u.i AND o.settings_version = u.v)
     ORDER BY u.n, u.i  -- every writer locks rows in one order: no deadlocks
    ON CONFLICT (name, node_id) DO UPDATE
       SET settings_version = excluded.settings_version, seen_at = excluded.seen_at
     WHERE s.settings_version IS DISTINCT FROM excluded.settings_version
$$;

-- Drops a sequence that was dropped on another node, if it is the same one
-- (created at or before it; checked once the sequence's lock is held).
CREATE FUNCTION hilo._drop_carried(name text, created_at timestamptz)
RETURNS boolean
AS 'MODULE_PATHNAME', 'hilo_drop_carried'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

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
    hilo._carry_sequence(text, bigint, bigint, bigint, integer, integer, text, timestamptz,
    integer, text, bigint, timestamptz),
    hilo._carry_settings(text, bigint, timestamptz, bigint, bigint, integer, integer,
    timestamptz), hilo._note_settings(text[], integer[], bigint[]),
    hilo._drop_carried(text, timestamptz), hilo._install_windows(text[], bigint[], bigint[]),
    hilo._watermarks(), hilo._save_watermarks(integer[], bigint[], bigint[], boolean[])
    FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Keys for sharded tables (0.5.0): which node issued an ID
-- ---------------------------------------------------------------------------

-- This node's id in its hilo cluster; NULL on a server in none.
CREATE FUNCTION hilo_node_id()
RETURNS integer
AS 'MODULE_PATHNAME', 'hilo_node_id'
LANGUAGE C STABLE PARALLEL RESTRICTED;

-- The node that issued `id` of `seq`: from the ID's top bits for a sequence
-- with node_bits, otherwise from the windows (this node's own, and the
-- window map the agent carries to every node); NULL if no window holds it.
CREATE FUNCTION hilo_node_of(seq text, id bigint)
RETURNS integer
AS 'MODULE_PATHNAME', 'hilo_node_of'
LANGUAGE C STABLE PARALLEL RESTRICTED;

-- The window map: per sequence name, which node holds each window of every
-- other node (the agent copies every node's windows here each pass).
-- Derived: the agent rebuilds it, so it is not dumped.
CREATE TABLE hilo.window_map (
    name     text NOT NULL,
    first_id bigint NOT NULL,
    last_id  bigint NOT NULL,
    node_id  integer NOT NULL,
    PRIMARY KEY (name, first_id)
);

-- What the agent reads from every node and writes to every node.
CREATE FUNCTION hilo._node_windows()
RETURNS TABLE (name text, first_id bigint, last_id bigint)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
    -- hilo.sequences first, as every catalog access (the lock order
    -- DROP EXTENSION takes: otherwise a deadlock with it).
    SELECT s.name, w.window_start_value, w.window_end_value - 1
      FROM hilo.sequences s JOIN hilo.windows w ON w.seq_id = s.seq_id
     WHERE s.node_bits = 0
$$;

CREATE FUNCTION hilo._map_windows(names text[], firsts bigint[], lasts bigint[],
                                  node_ids integer[])
RETURNS bigint
LANGUAGE sql SET search_path = pg_catalog, pg_temp
AS $$
    -- Windows the map has already are left out first: a pass that finds
    -- no new window locks and writes nothing. hilo.sequences is locked
    -- first, as by every catalog access (the lock order DROP EXTENSION
    -- takes: otherwise a deadlock with it).
    WITH sequences_first AS (SELECT 1 FROM hilo.sequences LIMIT 0),
    new AS MATERIALIZED (
        SELECT u.n, u.f, u.l, u.i FROM unnest(names, firsts, lasts, node_ids) AS u(n, f, l, i)
         WHERE NOT EXISTS (SELECT 1 FROM hilo.window_map m
                            WHERE m.name = u.n AND m.first_id = u.f)
    ), added AS (
        INSERT INTO hilo.window_map (name, first_id, last_id, node_id)
        SELECT u.n, u.f, u.l, u.i FROM new AS u
         -- only sequences this node has: a name dropped here is not mapped
         -- again from a node that the drop has not reached yet. The row
         -- lock orders this with a hilo_drop running at the same time: the
         -- drop waits, then removes these rows too; or this waits for the
         -- drop, and then finds no sequence.
         WHERE EXISTS (SELECT 1 FROM hilo.sequences s WHERE s.name = u.n
                        FOR KEY SHARE OF s)
         ORDER BY u.n, u.f
        ON CONFLICT DO NOTHING RETURNING 1)
    SELECT count(*) FROM added
$$;
REVOKE ALL ON FUNCTION hilo._node_windows(), hilo._map_windows(text[], bigint[], bigint[], integer[])
    FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Usage rights (0.3.0) and hilo_drop's cascade (0.5.0)
-- ---------------------------------------------------------------------------

-- role is a role name as it is stored (case matters, no quotes), or
-- 'public' for every role. Granting twice, or revoking what was not
-- granted, changes nothing and is not an error. Owner (or superuser) only.
CREATE FUNCTION hilo_grant_usage(seq text, role text)
RETURNS void
AS 'MODULE_PATHNAME', 'hilo_grant_usage'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION hilo_revoke_usage(seq text, role text)
RETURNS void
AS 'MODULE_PATHNAME', 'hilo_revoke_usage'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- hilo_drop refuses (2BP01) while a column default calls a hilo function
-- with the sequence's name as a constant; cascade => true drops those
-- defaults, as DROP SEQUENCE ... CASCADE does.
CREATE FUNCTION hilo_drop(seq text, cascade boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'hilo_drop'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- ---------------------------------------------------------------------------
-- Views: what shared memory holds, usage rights, where each sequence stands
-- ---------------------------------------------------------------------------

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

-- The agent's last report, for hilo.status (NULL on a node in no cluster).
CREATE FUNCTION hilo._agent_message()
RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT message FROM hilo._agent_status() LIMIT 1 $$;

-- hilo.status and hilo.buffers show a role only the sequences it may use
-- (owner, member of the owner, a grant to it or to PUBLIC), as
-- hilo.sequences is closed; superusers and members of pg_monitor see all,
-- as in pg_stat_activity. hilo._may_use is hilo_take's own check; it runs
-- as the caller, with the catalog read as the view's owner.
CREATE FUNCTION hilo._may_use(seq_id integer, owner regrole)
RETURNS boolean
AS 'MODULE_PATHNAME', 'hilo_may_use'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
GRANT EXECUTE ON FUNCTION hilo._may_use(integer, regrole) TO PUBLIC;

-- Each backend's buffer: it hands out next_id up to end_id - 1.
CREATE VIEW hilo.buffers AS
SELECT b.pid, s.name AS sequence, b.next_id, b.end_id
  FROM hilo.buffer_slots() b
  JOIN hilo.sequences s ON s.seq_id = b.seq_id
     WHERE pg_catalog.pg_has_role('pg_monitor', 'USAGE')
        OR hilo._may_use(s.seq_id, s.owner);

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
), seen AS (
    -- what the agent last saw of each member node's copy (node_settings)
    SELECT ns.name, ns.node_id, ns.settings_version
      FROM hilo.node_settings ns
     WHERE ns.node_id IN (SELECT (m.value ->> 'id')::integer
                            FROM hilo.cluster c,
                                 pg_catalog.jsonb_array_elements(c.config -> 'nodes') m)
), me AS MATERIALIZED (
    -- once per query: this node's id (0 in no cluster; NULL on a node its
    -- configuration does not list, which has no slice)
    SELECT CASE WHEN hilo_node_id() IS NOT NULL THEN hilo_node_id()::numeric
                WHEN EXISTS (SELECT 1 FROM hilo.cluster WHERE epoch > 0) THEN NULL
                ELSE 0 END AS node_id
), counts AS (
    SELECT s.seq_id, s.name, s.high_water_mark, s.max_value, s.ordering, s.settings_version,
           -- IDs above the high-water mark this node may still claim: up to
           -- max_value, or to the end of its slice (node_bits), which comes first
           CASE WHEN s.node_bits = 0
                THEN greatest(s.max_value - s.high_water_mark, 0)::numeric
                WHEN me.node_id IS NULL OR me.node_id >= 2::numeric ^ s.node_bits THEN 0
                ELSE pg_catalog.trunc(greatest(
                         least(s.max_value::numeric,
                               (me.node_id + 1) * 2::numeric ^ (63 - s.node_bits) - 1)
                         - greatest(s.high_water_mark::numeric,
                                    me.node_id * 2::numeric ^ (63 - s.node_bits) - 1), 0))
           END AS room,
           greatest(s.settings_version,
                    (SELECT max(v.settings_version) FROM seen v WHERE v.name = s.name))
               AS newest_version,
           coalesce(w.windows, 0) AS open_windows,
           coalesce(w.ids, 0) AS ids_in_open_windows,
           coalesce(f.ids, 0) AS free_ids,
           coalesce(p.pool_ids, 0) AS pool_ids,
           coalesce(p.buffered_ids, 0) AS buffered_ids,
           coalesce(p.issued, 0) AS issued_since_start,
           coalesce(p.rate, 0) AS rate
      FROM hilo.sequences s
      CROSS JOIN me
      LEFT JOIN open_windows w ON w.seq_id = s.seq_id
      LEFT JOIN free f ON f.seq_id = s.seq_id
      LEFT JOIN hilo.pool_stats() p ON p.seq_id = s.seq_id
     WHERE pg_catalog.pg_has_role('pg_monitor', 'USAGE')
        OR hilo._may_use(s.seq_id, s.owner)
)
SELECT name AS sequence, high_water_mark, open_windows, ids_in_open_windows, free_ids,
       pool_ids, buffered_ids, issued_since_start,
       round(rate::numeric, 1) AS ids_per_second,
       room + ids_in_open_windows + free_ids + pool_ids
           + buffered_ids AS ids_left,
       CASE WHEN rate > 0 THEN pg_catalog.justify_interval(pg_catalog.make_interval(
                secs => least((room + ids_in_open_windows
                               + free_ids + pool_ids + buffered_ids)::double precision / rate,
                              1e12)))
       END AS lasts,
       hilo._agent_message() AS agent_message,
       ordering, settings_version,
       newest_version - settings_version AS settings_behind,
       ARRAY(SELECT v.node_id FROM seen v
              WHERE v.name = counts.name AND v.settings_version < counts.newest_version
              ORDER BY 1) AS nodes_behind
  FROM counts;

GRANT SELECT ON hilo.buffers, hilo.status TO PUBLIC;

-- Who may use which sequence: its owner, and every role it was granted to
-- ('public': everyone). Everyone may read it, as everyone may read
-- pg_class.relacl.
CREATE VIEW hilo.usage AS
SELECT s.name AS sequence, s.owner::pg_catalog.text AS role, true AS is_owner
  FROM hilo.sequences s
UNION ALL
SELECT s.name, CASE WHEN g.grantee::pg_catalog.oid = 0 THEN 'public'
                    ELSE g.grantee::pg_catalog.text END, false
  FROM hilo.usage_grants g JOIN hilo.sequences s ON s.seq_id = g.seq_id;
GRANT SELECT ON hilo.usage TO PUBLIC;

-- ---------------------------------------------------------------------------
-- Column defaults that name a hilo sequence
-- ---------------------------------------------------------------------------

-- A column or domain default or generation expression created for a hilo sequence
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
    WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'CREATE FOREIGN TABLE', 'ALTER FOREIGN TABLE',
                 'CREATE DOMAIN', 'ALTER DOMAIN')
    EXECUTE FUNCTION hilo._check_defaults();

-- ---------------------------------------------------------------------------
-- Ordering 'cluster' (issue 14 part 3): a leased serving node
-- ---------------------------------------------------------------------------

-- The lease register's acceptor cells, one per 'cluster' sequence name
-- (src/core/lease.hpp): the highest lease ballot this node accepted, the
-- holder it names, the bound of the IDs that holders may have handed out
-- (it only rises), and the round id of the grant that set the ballot (the
-- same grant sent again is accepted again). Written with
-- synchronous_commit = on before the reply leaves the node.
CREATE TABLE hilo.lease_cells (
    seq         text PRIMARY KEY,
    ballot      bigint NOT NULL,
    holder      integer NOT NULL,
    bound       bigint NOT NULL,
    grant_round bigint NOT NULL DEFAULT 0
);
SELECT pg_catalog.pg_extension_config_dump('hilo.lease_cells', '');

-- The acceptor: a batch of READ (0) and GRANT (2) messages from node
-- from_node's lease worker, one row per message in order; refused for a
-- proposer of another configuration epoch or another cluster (a cluster
-- formed again after CREATE EXTENSION may have the same epoch). Each row
-- carries the node's write count after the batch (every cell written
-- counts, as the register's writes do): a proposer that saw a higher one
-- from this node drops the batch, as a copy restored without a trace.
CREATE FUNCTION hilo._lease_handle(epoch bigint, cluster_id bigint, from_node integer, seqs text[],
                                   kinds integer[], request_ids bigint[], expected bigint[],
                                   ballots bigint[], holders integer[], bounds bigint[])
RETURNS TABLE (ballot bigint, holder integer, bound bigint, ok boolean, write_count bigint)
AS 'MODULE_PATHNAME', 'hilo_lease_handle_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Calls that node from_node forwards to this node as the lease holder, each
-- with the settings of its sequence there (start_value - 1, max_value): one
-- row per call, the first of its IDs when served.
CREATE FUNCTION hilo._lease_forward(from_node integer, seqs text[], call_ids bigint[],
                                    counts bigint[], floors bigint[], max_values bigint[])
RETURNS TABLE (call_id bigint, ok boolean, first bigint)
AS 'MODULE_PATHNAME', 'hilo_lease_forward'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- One call that a backend of node from_node sends to this node as the
-- lease holder over its own connection, with the settings of its sequence
-- there: the first of its IDs, NULL when not served.
CREATE FUNCTION hilo._lease_forward_one(from_node integer, seq text, call_id bigint,
                                        count bigint, floor bigint, max_value bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'hilo_lease_forward_one'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- A membership change carries the cells to the new configuration, as it
-- carries the register (the pre-sync, cluster/paxos.cpp): the cells of a
-- majority of the old one (refused on a node its configuration does not
-- list) ...
CREATE FUNCTION hilo._lease_dump()
RETURNS TABLE (seq text, ballot bigint, holder integer, bound bigint, grant_round bigint)
AS 'MODULE_PATHNAME', 'hilo_lease_dump'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- ... raised on a majority of the new one: a higher ballot with its holder
-- and round, a higher bound; returns how many cells changed (each one
-- counts in the node's write count).
CREATE FUNCTION hilo._lease_raise(seqs text[], ballots bigint[], holders integer[],
                                  bounds bigint[], grant_rounds bigint[])
RETURNS bigint
AS 'MODULE_PATHNAME', 'hilo_lease_raise'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION hilo._lease_handle(bigint, bigint, integer, text[], integer[], bigint[],
    bigint[], bigint[], integer[], bigint[]),
    hilo._lease_forward(integer, text[], bigint[], bigint[], bigint[], bigint[]),
    hilo._lease_forward_one(integer, text, bigint, bigint, bigint, bigint),
    hilo._lease_dump(), hilo._lease_raise(text[], bigint[], integer[], bigint[], bigint[])
    FROM PUBLIC;
