-- hilo 0.1.0 -> 0.2.0.
--
-- 0.1.0 is the first released catalog; its install script is frozen. A
-- fresh CREATE EXTENSION hilo runs hilo--0.1.0.sql and then this script, so
-- this is the one place where 0.2.0 differs from 0.1.0. The shared library
-- serves both: every C function accepts the argument lists of both versions.
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
