-- hilo: the whole current catalog and SQL surface, in one file.
--
-- The Makefile installs this file as hilo--<default_version>.sql, so that
-- CREATE EXTENSION hilo runs it alone. An upgrade script
-- hilo--<from>--<to>.sql holds only what changed between two versions. A
-- catalog change goes both here and into the open upgrade script;
-- test/t/100_upgrade.pl checks that an upgraded catalog equals a fresh one.
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
-- and used-up windows stay: together they record every ID ever reserved
-- (the allocator extends a used-up row over the window used up above it).
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

-- The catalog's creation (the code's word for this table's value): pools,
-- backend buffers and the allocator's
-- state live in shared memory and outlive the catalog they came from (DROP
-- EXTENSION and CREATE EXTENSION make a new catalog whose seq_id values
-- start at 1 again). Each catalog gets one random value here, never dumped;
-- everything in shared memory is keyed by it as well as by (database,
-- seq_id) (docs/design.md, "Catalog creations").
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
    -- of this database already retired, and when (cluster/node/restore.cpp).
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
-- first claimed there (cluster/agent/window_claim.cpp). Not dumped: a node
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
-- hilo.agent_interval; for manual or pg_cron use. Returns what it did;
-- with raise_failure, a pass that did not succeed (no majority, an error)
-- raises its message as an error instead, which pg_cron keeps in
-- cron.job_run_details (it keeps no result and no notice of a success).
CREATE FUNCTION hilo_agent_run(raise_failure boolean DEFAULT false)
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
-- written on every node that answered (cluster/carry/carry.cpp).
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
REVOKE ALL ON FUNCTION hilo_add_node(text, text), hilo_remove_node(text),
    hilo_agent_run(boolean) FROM PUBLIC;
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

-- Per sequence, the IDs this node handed out since the server started, by
-- every path (pools and buffers net of what came back, takes of any size,
-- ordered calls), and their rate: about the last minute, per second.
CREATE FUNCTION hilo.issued_stats()
RETURNS TABLE (seq_id integer, issued bigint, rate double precision)
AS 'MODULE_PATHNAME', 'hilo_issued_stats'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

-- Since when this node has seen its lease cell of a 'cluster' sequence name
-- `holder` (the first time hilo.status read it there since the server
-- started; a holder that changes starts it again): hilo.status's
-- serving_since. NULL where hilo is not preloaded.
CREATE FUNCTION hilo._lease_holder_since(seq text, holder integer)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'hilo_lease_holder_since'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
GRANT EXECUTE ON FUNCTION hilo._lease_holder_since(text, integer) TO PUBLIC;

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

GRANT SELECT ON hilo.buffers TO PUBLIC;

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
-- Ordering 'cluster': a leased serving node
-- ---------------------------------------------------------------------------

-- The lease register's acceptor cells, one per 'cluster' sequence name
-- (src/core/lease.hpp): the highest lease ballot this node accepted, the
-- holder it names, the bound of the IDs that holders may have handed out
-- (it only rises), and the round id of the grant that set the ballot (the
-- same grant sent again is accepted again). lease_us and drift_ppm: the
-- largest hilo.lease_time (in microseconds) and hilo.clock_drift_bound that
-- grants carried since the last one from a holder already serving, which a
-- node taking the lease over waits out (0: none known). Written with
-- synchronous_commit = on before the reply leaves the node.
CREATE TABLE hilo.lease_cells (
    seq         text PRIMARY KEY,
    ballot      bigint NOT NULL,
    holder      integer NOT NULL,
    bound       bigint NOT NULL,
    grant_round bigint NOT NULL DEFAULT 0,
    lease_us    bigint NOT NULL DEFAULT 0,
    drift_ppm   integer NOT NULL DEFAULT 0
);
SELECT pg_catalog.pg_extension_config_dump('hilo.lease_cells', '');

-- The acceptor: a batch of READ (0) and GRANT (2) messages from node
-- from_node's lease worker, one row per message in order; refused for a
-- proposer of another configuration epoch or another cluster (a cluster
-- formed again after CREATE EXTENSION may have the same epoch). Each row
-- carries the node's write count after the batch (every cell written
-- counts, as the register's writes do): a proposer that saw a higher one
-- from this node drops the batch, as a copy restored without a trace.
-- Grants carry their proposer's lease time and drift bound (settled: its
-- lease serves already); rows report the cell's.
CREATE FUNCTION hilo._lease_handle(epoch bigint, cluster_id bigint, from_node integer, seqs text[],
                                   kinds integer[], request_ids bigint[], expected bigint[],
                                   ballots bigint[], holders integer[], bounds bigint[],
                                   lease_uss bigint[], drift_ppms integer[], settled boolean[])
RETURNS TABLE (ballot bigint, holder integer, bound bigint, ok boolean, write_count bigint,
               lease_us bigint, drift_ppm integer)
AS 'MODULE_PATHNAME', 'hilo_lease_handle_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Calls that node from_node forwards to this node as the lease holder, each
-- with the settings of its sequence there (start_value - 1, max_value): one
-- row per call, the first of its IDs when served, the error its caller
-- raises when it failed here.
CREATE FUNCTION hilo._lease_forward(from_node integer, seqs text[], call_ids bigint[],
                                    counts bigint[], floors bigint[], max_values bigint[])
RETURNS TABLE (call_id bigint, ok boolean, first bigint, sqlstate text, message text,
               detail text, hint text)
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
-- carries the register (the pre-sync, cluster/membership/paxos.cpp): the cells of a
-- majority of the old one (refused on a node its configuration does not
-- list) ...
CREATE FUNCTION hilo._lease_dump()
RETURNS TABLE (seq text, ballot bigint, holder integer, bound bigint, grant_round bigint,
               lease_us bigint, drift_ppm integer)
AS 'MODULE_PATHNAME', 'hilo_lease_dump'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- ... raised on a majority of the new one: a higher ballot with its holder
-- and round, a higher bound, lease time and drift bound (empty arrays:
-- none); returns how many cells changed (each one counts in the node's
-- write count).
CREATE FUNCTION hilo._lease_raise(seqs text[], ballots bigint[], holders integer[],
                                  bounds bigint[], grant_rounds bigint[],
                                  lease_uss bigint[] DEFAULT '{}',
                                  drift_ppms integer[] DEFAULT '{}')
RETURNS bigint
AS 'MODULE_PATHNAME', 'hilo_lease_raise'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION hilo._lease_handle(bigint, bigint, integer, text[], integer[], bigint[],
    bigint[], bigint[], integer[], bigint[], bigint[], integer[], boolean[]),
    hilo._lease_forward(integer, text[], bigint[], bigint[], bigint[], bigint[]),
    hilo._lease_forward_one(integer, text, bigint, bigint, bigint, bigint),
    hilo._lease_dump(),
    hilo._lease_raise(text[], bigint[], integer[], bigint[], bigint[], bigint[], integer[])
    FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Moving columns to hilo and back: hilo_adopt, hilo_raise, hilo_unadopt
-- ---------------------------------------------------------------------------

-- Columns hilo_adopt moved to hilo, by table (a regclass: it follows a
-- rename or a move to another schema, and pg_dump writes it as the table's
-- name, so a dump and restore keeps it too) and column name, and whether
-- each was an identity column ('a' ALWAYS, 'd' BY DEFAULT, '' not):
-- hilo_unadopt gives it back as it was. Written through hilo._note_adopted
-- and hilo._forget_adopted, which check that the caller owns the table.
CREATE TABLE hilo.adopted_columns (
    table_name  regclass NOT NULL,
    column_name name NOT NULL,
    sequence    text NOT NULL,
    identity    "char" NOT NULL CHECK (identity IN ('', 'a', 'd')),
    adopted_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (table_name, column_name)
);
SELECT pg_catalog.pg_extension_config_dump('hilo.adopted_columns', '');

-- Raises a sequence: once this commits, no ID at or below `above` is
-- handed out, by any session (pools, buffers, windows and free ranges
-- included: what they held below it is a gap). Only upwards.
CREATE FUNCTION hilo_raise(seq text, above bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'hilo_raise'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The highest ID a sequence handed out or holds on this node.
CREATE FUNCTION hilo._held_up_to(seq text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'hilo_held_up_to'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- hilo_adopt's and hilo_unadopt's rows of hilo.adopted_columns.
CREATE FUNCTION hilo._note_adopted(tbl regclass, col name, seq text, identity "char")
RETURNS void
AS 'MODULE_PATHNAME', 'hilo_note_adopted'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION hilo._forget_adopted(tbl regclass, col name)
RETURNS "char"
AS 'MODULE_PATHNAME', 'hilo_forget_adopted'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- On a node of a hilo cluster: one node's part of a hilo_raise (its
-- register cell and, with `catalog`, its catalog, in a transaction of its
-- own), sent to every node by the node that raises.
CREATE FUNCTION hilo._raise_node(seq text, above bigint, catalog boolean)
RETURNS void
AS 'MODULE_PATHNAME', 'hilo_raise_node'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The highest value a column holds on this node, or that the sequence it
-- owns (serial, identity) handed out; NULL if the table or the column is
-- not here. hilo_adopt on a node of a cluster asks every other node.
CREATE FUNCTION hilo._column_high(tbl text, col name)
RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    rel regclass := pg_catalog.to_regclass(tbl);
    own regclass;
    high bigint;
    last bigint;
BEGIN
    IF rel IS NULL OR NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = rel
                                     AND attname = col AND attnum > 0 AND NOT attisdropped) THEN
        RETURN NULL;
    END IF;
    EXECUTE pg_catalog.format('SELECT max(%I)::bigint FROM %s', col, rel) INTO high;
    own := pg_catalog.pg_get_serial_sequence(rel::text, col::text)::regclass;
    IF own IS NOT NULL THEN
        EXECUTE pg_catalog.format('SELECT last_value FROM %s WHERE is_called', own) INTO last;
    END IF;
    RETURN greatest(high, last);
END $$;

REVOKE ALL ON FUNCTION hilo._raise_node(text, bigint, boolean), hilo._column_high(text, name)
    FROM PUBLIC;

-- What hilo_adopt and hilo_unadopt read from the other nodes of a hilo
-- cluster (NULL on a node in no cluster): the column's highest value
-- there (hilo._column_high), and the highest ID the sequence handed out
-- or holds there or that its register cell records. 08006 naming a node
-- that does not answer.
CREATE FUNCTION hilo._cluster_column_high(tbl regclass, col name)
RETURNS bigint
AS 'MODULE_PATHNAME', 'hilo_cluster_column_high'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION hilo._cluster_held_up_to(seq text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'hilo_cluster_held_up_to'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The checks hilo_adopt and hilo_unadopt share, in the order of their
-- errors: arguments (22004), a read-only transaction (25006), a table
-- (42809; a view, a foreign table, ...), the caller owns it (42501), it is not a
-- partition or an inheritance child (0A000: its parent's default is the
-- one inserts through the parent use). Then the table, its partitions and
-- inheritance children are locked ACCESS EXCLUSIVE, and the column is
-- looked up (42703) and checked to be smallint, integer or bigint (42804).
-- Returns the column.
CREATE FUNCTION hilo._adopt_checks(function_name text, tbl regclass, col name)
RETURNS pg_catalog.pg_attribute
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    rel pg_class;
    att pg_attribute;
BEGIN
    IF tbl IS NULL OR col IS NULL THEN
        RAISE EXCEPTION 'argument "%" of %() must not be NULL',
              CASE WHEN tbl IS NULL THEN 'tbl' ELSE 'col' END, function_name
              USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.current_setting('transaction_read_only')::boolean THEN
        RAISE EXCEPTION 'cannot execute %() in a read-only transaction', function_name
              USING ERRCODE = 'read_only_sql_transaction';
    END IF;
    SELECT * INTO rel FROM pg_class WHERE oid = tbl;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'relation with OID % does not exist', tbl::oid
              USING ERRCODE = 'undefined_table';
    END IF;
    IF rel.relkind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION '"%" is not a table', tbl
              USING ERRCODE = 'wrong_object_type',
                    DETAIL = pg_catalog.format('It is %s.',
                        CASE rel.relkind WHEN 'v' THEN 'a view' WHEN 'm' THEN 'a materialized view'
                                         WHEN 'f' THEN 'a foreign table' WHEN 'S' THEN 'a sequence'
                                         ELSE 'not a table' END),
                    HINT = 'Only columns of ordinary and partitioned tables take IDs from a sequence.';
    END IF;
    IF NOT pg_has_role(rel.relowner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table %', tbl USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = tbl) THEN
        RAISE EXCEPTION '"%" is a partition or an inheritance child', tbl
              USING ERRCODE = 'feature_not_supported',
                    DETAIL = 'Inserts through its parent use the parent''s default.',
                    HINT = pg_catalog.format('Call %s() on the parent table: it moves the '
                                             'parent and every partition and child.',
                                             function_name);
    END IF;
    -- ACCESS EXCLUSIVE on the table and (LOCK recurses) every partition and
    -- child: an INSERT holds ROW EXCLUSIVE until its transaction ends, so
    -- once this is granted every insert that could have stored an ID has
    -- committed or rolled back, and none can start until this transaction
    -- ends: the maximum read next cannot grow behind our back. ALTER
    -- TABLE ... SET DEFAULT takes this lock anyway; taking it first avoids
    -- a lock upgrade (a deadlock with a second hilo_adopt of the table).
    EXECUTE pg_catalog.format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', tbl);
    SELECT * INTO att FROM pg_attribute
     WHERE attrelid = tbl AND attname = col AND attnum > 0 AND NOT attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'column "%" of relation "%" does not exist', col, tbl
              USING ERRCODE = 'undefined_column';
    END IF;
    IF att.atttypid NOT IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype) THEN
        RAISE EXCEPTION 'column "%" of table "%" is of type %', col, tbl,
              pg_catalog.format_type(att.atttypid, att.atttypmod)
              USING ERRCODE = 'datatype_mismatch',
                    DETAIL = 'A sequence feeds only smallint, integer and bigint columns.';
    END IF;
    RETURN att;
END $$;

-- The table and every partition and inheritance child below it.
CREATE FUNCTION hilo._table_tree(tbl regclass)
RETURNS SETOF regclass
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    WITH RECURSIVE tree(relid) AS (
        SELECT tbl::oid
        UNION
        SELECT i.inhrelid FROM pg_inherits i JOIN tree t ON i.inhparent = t.relid
    )
    SELECT relid::regclass FROM tree
$$;

-- Moves a serial, bigserial, identity or DEFAULT nextval(...) column to a
-- hilo sequence (default name: the old sequence's) that starts above the
-- column's maximum and above the old sequence's last_value; its max_value
-- is the column type's. The DEFAULT becomes hilo_nextval(seq); the
-- identity property or the sequence the column owned is dropped (one that
-- another column still uses is left, with a NOTICE). ordering and
-- node_bits are hilo_create's. In the caller's transaction: a rollback
-- changes nothing.
CREATE FUNCTION hilo_adopt(tbl regclass, col name, seq text DEFAULT NULL,
                           ordering text DEFAULT 'none', node_bits integer DEFAULT 0)
RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    att pg_attribute;
    rel regclass;
    old_seqs oid[] := '{}';
    old_seq oid;
    own_seq oid;
    expr text;
    type_max bigint;
    above bigint;
    last bigint;
BEGIN
    att := hilo._adopt_checks('hilo_adopt', tbl, col);
    type_max := CASE att.atttypid WHEN 'int2'::regtype THEN 32767
                                  WHEN 'int4'::regtype THEN 2147483647
                                  ELSE 9223372036854775806 END;
    -- The sequences that feed the column in the table and below it.
    FOR rel IN SELECT * FROM hilo._table_tree(tbl) LOOP
        SELECT pg_get_expr(d.adbin, d.adrelid), s.refobjid INTO expr, old_seq
          FROM pg_attribute a
          JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
          LEFT JOIN pg_depend s ON s.classid = 'pg_attrdef'::regclass AND s.objid = d.oid
                               AND s.refclassid = 'pg_class'::regclass
                               AND s.refobjid IN (SELECT oid FROM pg_class WHERE relkind = 'S')
         WHERE a.attrelid = rel AND a.attname = col;
        IF expr ~ 'hilo_nextval\(' THEN
            RAISE EXCEPTION 'column "%" of table "%" already takes its IDs from hilo', col, rel
                  USING ERRCODE = 'object_not_in_prerequisite_state',
                        DETAIL = pg_catalog.format('Its default is %s.', expr);
        END IF;
        IF old_seq IS NULL OR expr !~ '^nextval\(' THEN
            old_seq := pg_get_serial_sequence(rel::text, col::text)::regclass;  -- identity
        END IF;
        IF old_seq IS NULL AND rel = tbl THEN
            RAISE EXCEPTION 'column "%" of table "%" takes no IDs from a sequence', col, tbl
                  USING ERRCODE = 'object_not_in_prerequisite_state',
                        DETAIL = CASE WHEN expr IS NULL THEN 'It has no default.'
                                      ELSE pg_catalog.format('Its default is %s.', expr) END,
                        HINT = 'hilo_adopt() moves serial, bigserial, identity and DEFAULT '
                               'nextval(...) columns. For another column, create a sequence '
                               'with hilo_create() and set DEFAULT hilo_nextval(...).';
        END IF;
        IF old_seq IS NOT NULL AND NOT old_seq = ANY (old_seqs) THEN
            old_seqs := old_seqs || old_seq;
        END IF;
    END LOOP;

    -- Above every stored ID and every value the old sequences handed out
    -- (nextval outside the table, or rows since deleted).
    EXECUTE pg_catalog.format('SELECT max(%I)::bigint FROM %s', col, tbl) INTO above;
    above := coalesce(above, 0);
    FOREACH old_seq IN ARRAY old_seqs LOOP
        EXECUTE pg_catalog.format('SELECT last_value FROM %s', old_seq::regclass) INTO last;
        above := greatest(above, last);
    END LOOP;
    -- On a node of a cluster, every other node's table too (08006 if one
    -- does not answer): the table is per node, the sequence cluster-wide.
    above := greatest(above, hilo._cluster_column_high(tbl, col));
    IF above >= type_max THEN
        RAISE EXCEPTION 'column "%" of table "%" has no IDs left', col, tbl
              USING ERRCODE = 'sequence_generator_limit_exceeded',
                    DETAIL = pg_catalog.format('It holds or was handed IDs up to %s; its type '
                                               'ends at %s.', above, type_max);
    END IF;
    seq := coalesce(seq, (SELECT relname FROM pg_class WHERE oid = old_seqs[1]));

    -- Created without start_value, it starts above a dropped hilo sequence
    -- of the name too; then raised above the column.
    PERFORM @extschema@.hilo_create(seq, max_value => type_max,
                                    ordering => hilo_adopt.ordering,
                                    node_bits => hilo_adopt.node_bits);
    IF above > hilo._held_up_to(seq) THEN
        PERFORM @extschema@.hilo_raise(seq, above);
    END IF;

    -- The switch. DROP IDENTITY recurses to partitions; a partition of an
    -- older major may hold its own identity.
    FOR rel IN SELECT * FROM hilo._table_tree(tbl) LOOP
        IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = rel AND attname = col
                                                AND attidentity <> '') THEN
            EXECUTE pg_catalog.format('ALTER TABLE %s ALTER COLUMN %I DROP IDENTITY', rel, col);
        END IF;
    END LOOP;
    EXECUTE pg_catalog.format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %I.hilo_nextval(%L)',
                              tbl, col, '@extschema@', seq);
    -- The old sequences the column owned go, unless another default still
    -- calls them; those it did not own stay.
    FOREACH old_seq IN ARRAY old_seqs LOOP
        CONTINUE WHEN NOT EXISTS (SELECT 1 FROM pg_class WHERE oid = old_seq);
        SELECT refobjid INTO own_seq FROM pg_depend
         WHERE classid = 'pg_class'::regclass AND objid = old_seq AND deptype = 'a'
           AND refclassid = 'pg_class'::regclass
           AND refobjid IN (SELECT * FROM hilo._table_tree(tbl));
        IF EXISTS (SELECT 1 FROM pg_depend WHERE classid = 'pg_attrdef'::regclass
                                             AND refclassid = 'pg_class'::regclass
                                             AND refobjid = old_seq) THEN
            RAISE NOTICE 'sequence % is left: another column''s default still uses it',
                         old_seq::regclass;
            IF own_seq IS NOT NULL THEN
                EXECUTE pg_catalog.format('ALTER SEQUENCE %s OWNED BY NONE', old_seq::regclass);
            END IF;
        ELSIF own_seq IS NOT NULL THEN
            EXECUTE pg_catalog.format('DROP SEQUENCE %s', old_seq::regclass);
        ELSE
            RAISE NOTICE 'sequence % is left: the column did not own it', old_seq::regclass;
        END IF;
    END LOOP;

    PERFORM hilo._note_adopted(tbl, col, seq, att.attidentity);
    RETURN seq;
END $$;

-- The way back: a native sequence owned by the column, starting above
-- every ID the hilo sequence handed out or holds and above the column's
-- maximum; DEFAULT nextval(...), or the identity the column had when it
-- was adopted. The hilo sequence is dropped unless another default still
-- uses it (then a NOTICE). Returns the native sequence.
CREATE FUNCTION hilo_unadopt(tbl regclass, col name)
RETURNS regclass
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    att pg_attribute;
    expr text;
    seq text;
    start bigint;
    type_max bigint;
    had_identity "char";
    nsp name;
    seq_name text;
    result regclass;
    i integer := 0;
BEGIN
    att := hilo._adopt_checks('hilo_unadopt', tbl, col);
    SELECT pg_get_expr(d.adbin, d.adrelid) INTO expr
      FROM pg_attrdef d WHERE d.adrelid = tbl AND d.adnum = att.attnum;
    seq := pg_catalog.replace((pg_catalog.regexp_match(expr,
               '^(?:[^(]*\.)?hilo_nextval\(''((?:[^'']|'''')*)''(?:::text|::character varying)?\)$'))[1],
               '''''', '''');
    IF seq IS NULL THEN
        RAISE EXCEPTION 'column "%" of table "%" takes no IDs from a hilo sequence', col, tbl
              USING ERRCODE = 'object_not_in_prerequisite_state',
                    DETAIL = CASE WHEN expr IS NULL THEN 'It has no default.'
                                  ELSE pg_catalog.format('Its default is %s.', expr) END;
    END IF;
    EXECUTE pg_catalog.format('SELECT max(%I)::bigint FROM %s', col, tbl) INTO start;
    -- On a node of a cluster, what it handed out or holds on every node.
    start := greatest(coalesce(start, 0), hilo._held_up_to(seq), hilo._cluster_held_up_to(seq));
    type_max := CASE att.atttypid WHEN 'int2'::regtype THEN 32767
                                  WHEN 'int4'::regtype THEN 2147483647
                                  ELSE 9223372036854775807 END;
    IF start >= type_max THEN
        RAISE EXCEPTION 'column "%" of table "%" has no IDs left', col, tbl
              USING ERRCODE = 'sequence_generator_limit_exceeded',
                    DETAIL = pg_catalog.format('hilo handed out or holds IDs up to %s; its '
                                               'type ends at %s.', start, type_max);
    END IF;
    start := start + 1;
    SELECT n.nspname INTO nsp
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tbl;
    had_identity := hilo._forget_adopted(tbl, col);

    IF coalesce(had_identity, '') <> '' THEN
        EXECUTE pg_catalog.format('ALTER TABLE %s ALTER COLUMN %I DROP DEFAULT', tbl, col);
        EXECUTE pg_catalog.format('ALTER TABLE %s ALTER COLUMN %I ADD GENERATED %s AS IDENTITY '
                                  '(START WITH %s)', tbl, col,
                                  CASE had_identity WHEN 'a' THEN 'ALWAYS' ELSE 'BY DEFAULT' END,
                                  start);
        result := pg_get_serial_sequence(tbl::text, col::text)::regclass;
    ELSE
        -- serial's name, or the first free one after it
        LOOP
            seq_name := pg_catalog.format('%s_%s_seq',
                                          (SELECT relname FROM pg_class WHERE oid = tbl), col)
                        || CASE WHEN i > 0 THEN i::text ELSE '' END;
            EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n
                                                 ON n.oid = c.relnamespace
                                   WHERE c.relname = seq_name AND n.nspname = nsp);
            i := i + 1;
        END LOOP;
        EXECUTE pg_catalog.format('CREATE SEQUENCE %I.%I AS %s START WITH %s OWNED BY %s.%I',
                                  nsp, seq_name, att.atttypid::regtype, start, tbl, col);
        result := pg_catalog.format('%I.%I', nsp, seq_name)::regclass;
        EXECUTE pg_catalog.format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT nextval(%L::regclass)',
                                  tbl, col, result);
    END IF;
    BEGIN
        PERFORM @extschema@.hilo_drop(seq);
    EXCEPTION WHEN dependent_objects_still_exist THEN
        RAISE NOTICE 'hilo sequence "%" is left: another default still uses it', seq;
    END;
    RETURN result;
END $$;

-- ---------------------------------------------------------------------------
-- Logical replication: a subscriber keeps its own catalog
-- ---------------------------------------------------------------------------

-- A publication FOR ALL TABLES carries hilo's catalog tables as it carries
-- any table. On a subscriber with hilo, the rows its apply and table-sync
-- workers write there never reach the catalog (hilo._replicated_row below):
-- the subscriber keeps its own node, incarnation, windows and settings, and
-- the publisher's rows only raise the subscriber's sequence of the same name
-- above every ID the publisher's windows cover, or make it, so that after a
-- switchover no ID comes twice (docs/logical-replication.md).
-- What each subscription's publisher told of its sequences, by its seq_id:
-- the name (from its hilo.sequences row, which may come after its windows),
-- the highest ID its windows cover, the roles granted its use (applied to a
-- sequence this table made: created_here). Not dumped: it describes this
-- server's subscriptions.
CREATE TABLE hilo.replicated_marks (
    subscription    oid NOT NULL,
    seq_id          integer NOT NULL,
    name            text,
    high_water_mark bigint NOT NULL DEFAULT 0,
    grantees        regrole[] NOT NULL DEFAULT '{}',
    created_here    boolean NOT NULL DEFAULT false,
    PRIMARY KEY (subscription, seq_id)
);

-- No ID of sequence `seq` at or below `above` is handed out after the
-- caller commits (catalog raised, pool and buffers stale); false if there
-- is no such sequence (sql/replicated.cpp).
CREATE FUNCTION hilo._raise_replicated(seq text, above bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'hilo_raise_replicated'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION hilo._raise_replicated(text, bigint) FROM PUBLIC;

-- BEFORE each row of every hilo table, enabled only for the replica role
-- (ALTER TABLE ... ENABLE REPLICA TRIGGER: it fires in the apply worker and
-- in the table sync's COPY, never in ordinary sessions). A row the apply or
-- table-sync worker of a subscription writes (trigger depth 1; hilo's own
-- writes, among them this function's, pass) is dropped: an INSERT becomes
-- a mark, an UPDATE or DELETE is skipped. An UPDATE that finds no row
-- never reaches a trigger: the marks come from inserted windows' ends, not
-- from next_hi_value.
CREATE FUNCTION hilo._replicated_row() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    sub oid;
    mark hilo.replicated_marks;
BEGIN
    IF pg_trigger_depth() = 1 THEN
        SELECT s.subid INTO sub FROM pg_stat_subscription s
         WHERE s.pid = pg_backend_pid() LIMIT 1;
    END IF;
    IF sub IS NULL THEN
        IF TG_OP = 'DELETE' THEN
            RETURN OLD;
        END IF;
        RETURN NEW;
    END IF;
    -- An UPDATE or DELETE reaches this only on a row of the subscriber's
    -- own that has the key of one of the publisher's (seq_ids of both count
    -- from 1): skipped, at once, so that it waits for nothing while it holds
    -- that row.
    IF TG_OP <> 'INSERT' THEN
        RETURN NULL;
    END IF;
    -- The table syncs of several hilo tables and the apply worker, one at a
    -- time until each commits: each of them locks marks and sequences in
    -- the order its rows come, which differs between tables.
    PERFORM pg_advisory_xact_lock(hashtext('hilo'), hashtext('hilo._replicated_row'));
    IF TG_TABLE_NAME = 'sequences' THEN
        INSERT INTO hilo.replicated_marks AS m (subscription, seq_id, name, high_water_mark)
        VALUES (sub, NEW.seq_id, NEW.name, greatest(NEW.high_water_mark, NEW.start_value - 1))
        ON CONFLICT (subscription, seq_id) DO UPDATE
           SET name = excluded.name,
               high_water_mark = greatest(m.high_water_mark, excluded.high_water_mark)
        RETURNING * INTO mark;
        IF NOT EXISTS (SELECT FROM hilo.sequences WHERE name = NEW.name) THEN
            -- The publisher's settings; above its mark and a dropped
            -- sequence's of the name here.
            INSERT INTO hilo.sequences (name, start_value, max_value, window_size,
                                        min_open_windows, block_size, owner, high_water_mark,
                                        created_at, monotonic, node_bits, ordering,
                                        settings_version, settings_changed_at)
            SELECT NEW.name, NEW.start_value, NEW.max_value, NEW.window_size,
                   NEW.min_open_windows, NEW.block_size, NEW.owner,
                   least(NEW.max_value, greatest(mark.high_water_mark,
                       (SELECT d.high_water_mark FROM hilo.dropped_names d
                         WHERE d.name = NEW.name))),
                   NEW.created_at, NEW.monotonic, NEW.node_bits, NEW.ordering,
                   NEW.settings_version, NEW.settings_changed_at;
            UPDATE hilo.replicated_marks SET created_here = true
             WHERE subscription = sub AND seq_id = NEW.seq_id
            RETURNING * INTO mark;
        END IF;
    ELSIF TG_TABLE_NAME = 'windows' THEN
        INSERT INTO hilo.replicated_marks AS m (subscription, seq_id, high_water_mark)
        VALUES (sub, NEW.seq_id, NEW.window_end_value - 1)
        ON CONFLICT (subscription, seq_id) DO UPDATE
           SET high_water_mark = excluded.high_water_mark
         WHERE m.high_water_mark < excluded.high_water_mark
        RETURNING * INTO mark;
    ELSIF TG_TABLE_NAME = 'usage_grants' THEN
        INSERT INTO hilo.replicated_marks AS m (subscription, seq_id, grantees)
        VALUES (sub, NEW.seq_id, ARRAY[NEW.grantee])
        ON CONFLICT (subscription, seq_id) DO UPDATE
           SET grantees = m.grantees || excluded.grantees
         WHERE NOT excluded.grantees[1] = ANY (m.grantees)
        RETURNING * INTO mark;
    ELSIF TG_TABLE_NAME = 'dropped_names' THEN
        INSERT INTO hilo.dropped_names AS d (name, high_water_mark)
        VALUES (NEW.name, NEW.high_water_mark)
        ON CONFLICT (name) DO UPDATE
           SET high_water_mark = greatest(d.high_water_mark, excluded.high_water_mark);
        PERFORM hilo._raise_replicated(NEW.name, NEW.high_water_mark);
    END IF;
    IF mark.name IS NOT NULL THEN
        -- A sequence the subscriber dropped meanwhile: one made again
        -- under the name starts above the mark.
        IF NOT hilo._raise_replicated(mark.name, mark.high_water_mark) THEN
            INSERT INTO hilo.dropped_names AS d (name, high_water_mark)
            VALUES (mark.name, mark.high_water_mark)
            ON CONFLICT (name) DO UPDATE
               SET high_water_mark = greatest(d.high_water_mark, excluded.high_water_mark);
        END IF;
        IF mark.created_here THEN
            INSERT INTO hilo.usage_grants (seq_id, grantee)
            SELECT s.seq_id, g FROM hilo.sequences s, unnest(mark.grantees) g
             WHERE s.name = mark.name
            ON CONFLICT DO NOTHING;
        END IF;
    END IF;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION hilo._replicated_row() FROM PUBLIC;

-- On every table of the catalog while this database has a subscription,
-- and only then: PostgreSQL locks the row for a BEFORE ROW trigger of an
-- UPDATE or DELETE before it asks whether the trigger is enabled, which
-- costs each of the allocator's updates a lock record in the WAL. Creates
-- or drops the trigger on every table (in the order the tables were made,
-- as DROP EXTENSION locks them), as this database's subscriptions say, and
-- forgets the marks of dropped subscriptions.
CREATE FUNCTION hilo._guard_subscriptions() RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    wanted boolean := EXISTS (SELECT FROM pg_subscription s JOIN pg_database d ON d.oid = s.subdbid
                               WHERE d.datname = current_database());
    t regclass;
    present boolean;
BEGIN
    FOR t IN SELECT c.oid FROM pg_class c
              WHERE c.relnamespace = 'hilo'::regnamespace AND c.relkind = 'r' ORDER BY c.oid
    LOOP
        present := EXISTS (SELECT FROM pg_trigger
                            WHERE tgrelid = t AND tgname = 'replicated_row');
        IF wanted AND NOT present THEN
            EXECUTE format('CREATE TRIGGER replicated_row BEFORE INSERT OR UPDATE OR DELETE ON %s'
                           ' FOR EACH ROW EXECUTE FUNCTION hilo._replicated_row()', t);
            EXECUTE format('ALTER TABLE %s ENABLE REPLICA TRIGGER replicated_row', t);
        ELSIF present AND NOT wanted THEN
            EXECUTE format('DROP TRIGGER replicated_row ON %s', t);
        END IF;
    END LOOP;
    -- What a dropped subscription told (its raises are done).
    DELETE FROM hilo.replicated_marks m
     WHERE NOT EXISTS (SELECT FROM pg_subscription s WHERE s.oid = m.subscription);
END $$;
REVOKE ALL ON FUNCTION hilo._guard_subscriptions() FROM PUBLIC;

CREATE FUNCTION hilo._subscriptions_changed() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM hilo._guard_subscriptions();
END $$;
REVOKE ALL ON FUNCTION hilo._subscriptions_changed() FROM PUBLIC;
CREATE EVENT TRIGGER hilo_subscriptions ON ddl_command_end
    WHEN TAG IN ('CREATE SUBSCRIPTION', 'DROP SUBSCRIPTION')
    EXECUTE FUNCTION hilo._subscriptions_changed();

-- ---------------------------------------------------------------------------
-- hilo.status (last: it reads the lease cells of ordering 'cluster')
-- ---------------------------------------------------------------------------

-- Per sequence: where it stands and how long what is left lasts
-- (docs/monitoring.md says what each column counts).
CREATE VIEW hilo.status AS
WITH open_windows AS (
    SELECT seq_id, count(*) AS windows,
           sum(window_end_value - next_hi_value)::numeric AS ids
      FROM hilo.windows
     WHERE next_hi_value < window_end_value
     GROUP BY seq_id
), mapped_top AS (
    -- the highest ID of other nodes' windows (the agent's window map)
    SELECT name, max(last_id) AS last_id
      FROM hilo.window_map
     GROUP BY name
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
    SELECT s.seq_id, s.name, s.high_water_mark, s.start_value, s.max_value, s.ordering,
           s.settings_version, lc.holder AS serving_node,
           -- IDs above everything handed out or claimed that this node may
           -- still claim: up to max_value, or to the end of its slice
           -- (node_bits), which comes first
           CASE WHEN s.node_bits = 0
                THEN greatest(s.max_value::numeric
                              - greatest(s.high_water_mark, ot.last_id, mt.last_id, lc.bound,
                                         rg.value),
                              0)
                WHEN me.node_id IS NULL OR me.node_id >= 2::numeric ^ s.node_bits THEN 0
                ELSE pg_catalog.trunc(greatest(
                         least(s.max_value::numeric,
                               (me.node_id + 1) * 2::numeric ^ (63 - s.node_bits) - 1)
                         - greatest(s.high_water_mark::numeric, ot.last_id::numeric,
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
           coalesce(i.issued, 0) AS issued_since_start,
           coalesce(i.rate, 0) AS rate
      FROM hilo.sequences s
      CROSS JOIN me
      LEFT JOIN open_windows w ON w.seq_id = s.seq_id
      -- the highest ID of this node's windows: on a cluster node its windows
      -- come from the quorum register, above a high-water mark they need not
      -- raise. Windows never overlap: the end of the one that starts last,
      -- through the primary key, not every window of every sequence.
      LEFT JOIN LATERAL (SELECT ow.window_end_value - 1 AS last_id
                           FROM hilo.windows ow
                          WHERE ow.seq_id = s.seq_id
                          ORDER BY ow.window_start_value DESC LIMIT 1) ot ON true
      LEFT JOIN mapped_top mt ON mt.name = s.name
      LEFT JOIN hilo.lease_cells lc ON lc.seq = s.name AND s.ordering = 'cluster'
                                   AND lc.holder <> 0
      -- the highest ID any node may have claimed, as this node's register
      -- cell has it (windows, ordering 'quorum' claims)
      LEFT JOIN hilo.register rg ON rg.key = s.name
      LEFT JOIN free f ON f.seq_id = s.seq_id
      LEFT JOIN hilo.pool_stats() p ON p.seq_id = s.seq_id
      LEFT JOIN hilo.issued_stats() i ON i.seq_id = s.seq_id
     WHERE pg_catalog.pg_has_role('pg_monitor', 'USAGE')
        OR hilo._may_use(s.seq_id, s.owner)
), totals AS (
    SELECT counts.*,
           -- never more than the sequence has left to hand out
           least(room + ids_in_open_windows + free_ids + pool_ids + buffered_ids,
                 greatest(max_value::numeric - start_value + 1, 0)) AS ids_left
      FROM counts
)
SELECT name AS sequence, high_water_mark, open_windows, ids_in_open_windows, free_ids,
       pool_ids, buffered_ids, issued_since_start,
       round(rate::numeric, 1) AS ids_per_second,
       ids_left,
       CASE WHEN rate > 0 THEN pg_catalog.justify_interval(pg_catalog.make_interval(
                secs => least(ids_left::double precision / rate, 1e12)))
       END AS lasts,
       hilo._agent_message() AS agent_message,
       ordering, settings_version,
       newest_version - settings_version AS settings_behind,
       ARRAY(SELECT v.node_id FROM seen v
              WHERE v.name = totals.name AND v.settings_version < totals.newest_version
              ORDER BY 1) AS nodes_behind,
       serving_node,
       CASE WHEN serving_node IS NOT NULL
            THEN hilo._lease_holder_since(name, serving_node) END AS serving_since
  FROM totals;

GRANT SELECT ON hilo.status TO PUBLIC;

-- This file's last statement: a table made above gets the trigger too.
SELECT hilo._guard_subscriptions();
