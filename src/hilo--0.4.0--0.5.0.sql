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

-- hilo._drop_carried(name, created_at), the agent's carried drop: C code
-- that checks the copy here is the dropped one (created at or before
-- created_at) once it holds the sequence's lock. Checked before the lock,
-- a copy dropped and made again meanwhile lost its rows kept by name.
CREATE OR REPLACE FUNCTION hilo._drop_carried(name text, created_at timestamptz)
RETURNS boolean
AS 'MODULE_PATHNAME', 'hilo_drop_carried'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

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

CREATE OR REPLACE VIEW hilo.buffers AS
SELECT b.pid, s.name AS sequence, b.next_id, b.end_id
  FROM hilo.buffer_slots() b
  JOIN hilo.sequences s ON s.seq_id = b.seq_id
     WHERE pg_catalog.pg_has_role('pg_monitor', 'USAGE')
        OR hilo._may_use(s.seq_id, s.owner);


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

-- == keys: hilo_uuid, hilo_node_id, hilo_node_of, node_bits (issue 15) ==

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

-- Node slices: hilo_create(..., node_bits => b) gives each node of a cluster
-- the IDs whose top b bits below the sign bit are its node id.
ALTER TABLE hilo.sequences ADD COLUMN node_bits integer NOT NULL DEFAULT 0
    CONSTRAINT node_bits_range CHECK (node_bits BETWEEN 0 AND 16);
-- The node_bits sequences whose slice this node may claim in: a majority
-- of the cluster's nodes held the name with the same node_bits when it
-- first claimed there (cluster/window_claim.cpp). Not dumped: a node
-- agrees again.
CREATE TABLE hilo.slice_agreed (
    seq_id    integer PRIMARY KEY REFERENCES hilo.sequences (seq_id) ON DELETE CASCADE,
    agreed_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
-- Orderings (issue 14): 'none', 'node' (what monotonic meant), 'cluster',
-- 'quorum'; monotonic mirrors 'node'.
ALTER TABLE hilo.sequences ADD COLUMN ordering text NOT NULL DEFAULT 'none'
    CONSTRAINT ordering_values CHECK (ordering IN ('none', 'node', 'cluster', 'quorum'));
UPDATE hilo.sequences SET ordering = 'node' WHERE monotonic;
ALTER TABLE hilo.sequences ADD CONSTRAINT ordering_monotonic
    CHECK (monotonic = (ordering = 'node'));
DROP FUNCTION hilo_create(text, bigint, bigint, bigint, integer, integer, boolean);
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

-- == settings: a sequence's settings are cluster-wide (issue 14, part 1) ==

-- Each hilo_alter raises settings_version (and sets settings_changed_at);
-- the agent carries the newest copy to every node whose copy is older, and
-- a node applies only a copy newer than its own: (version, changed_at).
ALTER TABLE hilo.sequences ADD COLUMN settings_version bigint NOT NULL DEFAULT 1
    CONSTRAINT settings_version_positive CHECK (settings_version >= 1);
ALTER TABLE hilo.sequences ADD COLUMN settings_changed_at timestamptz NOT NULL
    DEFAULT pg_catalog.now();
UPDATE hilo.sequences SET settings_changed_at = created_at;

-- The agent carries node_bits, the ordering and the settings' version
-- with a sequence.
DROP FUNCTION hilo._sequence_report();
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
REVOKE ALL ON FUNCTION hilo._sequence_report() FROM PUBLIC;
DROP FUNCTION hilo._carry_sequence(text, bigint, bigint, bigint, integer, integer, text,
                                   timestamptz);
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
     ORDER BY u.n, u.i  -- every writer locks rows in one order: no deadlocks
    ON CONFLICT (name, node_id) DO UPDATE
       SET settings_version = excluded.settings_version, seen_at = excluded.seen_at
     -- a pass that sees what the last one saw writes nothing (no row
     -- versions, no WAL to flush on every node every pass)
     WHERE s.settings_version IS DISTINCT FROM excluded.settings_version
$$;

REVOKE ALL ON FUNCTION hilo._carry_sequence(text, bigint, bigint, bigint, integer, integer, text,
                                            timestamptz, integer, text, bigint, timestamptz),
    hilo._carry_settings(text, bigint, timestamptz, bigint, bigint, integer, integer,
                         timestamptz),
    hilo._note_settings(text[], integer[], bigint[])
    FROM PUBLIC;

-- hilo.status, once every column it shows exists: the view filtered to
-- usable sequences, with saturated counters and a bounded rate estimate;
-- now also the ordering, this node's settings version, how far it is
-- behind the newest the agent saw, and which nodes are behind.
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
), seen AS (
    -- what the agent last saw of each member node's copy (node_settings)
    SELECT ns.name, ns.node_id, ns.settings_version
      FROM hilo.node_settings ns
     WHERE ns.node_id IN (SELECT (m.value ->> 'id')::integer
                            FROM hilo.cluster c,
                                 pg_catalog.jsonb_array_elements(c.config -> 'nodes') m)
), counts AS (
    SELECT s.seq_id, s.name, s.high_water_mark, s.max_value, s.ordering, s.settings_version,
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
      LEFT JOIN open_windows w ON w.seq_id = s.seq_id
      LEFT JOIN free f ON f.seq_id = s.seq_id
      LEFT JOIN hilo.pool_stats() p ON p.seq_id = s.seq_id
     WHERE pg_catalog.pg_has_role('pg_monitor', 'USAGE')
        OR hilo._may_use(s.seq_id, s.owner)
)
SELECT name AS sequence, high_water_mark, open_windows, ids_in_open_windows, free_ids,
       pool_ids, buffered_ids, issued_since_start,
       round(rate::numeric, 1) AS ids_per_second,
       (max_value - high_water_mark)::numeric + ids_in_open_windows + free_ids + pool_ids
           + buffered_ids AS ids_left,
       CASE WHEN rate > 0 THEN pg_catalog.justify_interval(pg_catalog.make_interval(
                secs => least(((max_value - high_water_mark)::numeric + ids_in_open_windows
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
-- formed again after CREATE EXTENSION may have the same epoch).
CREATE FUNCTION hilo._lease_handle(epoch bigint, cluster_id bigint, from_node integer, seqs text[],
                                   kinds integer[], request_ids bigint[], expected bigint[],
                                   ballots bigint[], holders integer[], bounds bigint[])
RETURNS TABLE (ballot bigint, holder integer, bound bigint, ok boolean)
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
-- and round, a higher bound; returns how many cells changed.
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
