-- hilo 0.3.0 -> 0.4.0
--
-- hilo.status.lasts, how long the IDs left last at the recent rate, was
-- capped at 10^15 seconds, past what an interval holds (about 9.2 * 10^12
-- seconds): make_interval wrapped around, and a sequence with the default
-- max_value showed a large negative interval. It is now capped at 10^12
-- seconds (about 31,700 years) and shown in years, months and days.

\echo Use "ALTER EXTENSION hilo UPDATE TO '0.4.0'" to load this file. \quit

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
       CASE WHEN rate > 0 THEN pg_catalog.justify_interval(pg_catalog.make_interval(
                secs => least(((max_value - high_water_mark)::numeric + ids_in_open_windows
                               + free_ids + pool_ids + buffered_ids)::double precision / rate,
                              1e12)))
       END AS lasts,
       hilo._agent_message() AS agent_message
  FROM counts;
