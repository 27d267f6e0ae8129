-- hilo 0.1.0: catalog and SQL functions.
\echo Use "CREATE EXTENSION hilo" to load this file. \quit

-- The catalog lives in schema hilo. Callers get no privileges on it: every
-- change goes through the functions below, which run their catalog queries
-- as the extension's owner with a fixed search_path.
CREATE SCHEMA hilo;
REVOKE ALL ON SCHEMA hilo FROM PUBLIC;

CREATE SEQUENCE hilo.sequences_seq_id_seq AS integer;

-- One row per hilo sequence.
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

SELECT pg_catalog.pg_extension_config_dump('hilo.sequences', '');
SELECT pg_catalog.pg_extension_config_dump('hilo.sequences_seq_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('hilo.windows', '');
SELECT pg_catalog.pg_extension_config_dump('hilo.free_ranges', '');

CREATE FUNCTION hilo_create(seq text,
                            start_value bigint DEFAULT 1,
                            max_value bigint DEFAULT 9223372036854775806,
                            window_size bigint DEFAULT 1000000,
                            min_open_windows integer DEFAULT 2,
                            block_size integer DEFAULT 1000)
RETURNS void
AS 'MODULE_PATHNAME', 'hilo_create'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION hilo_drop(seq text)
RETURNS void
AS 'MODULE_PATHNAME', 'hilo_drop'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

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
