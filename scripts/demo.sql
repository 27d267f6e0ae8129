-- What scripts/demo.sh shows. Each statement is echoed before its result.
\pset null '(null)'
CREATE EXTENSION hilo;

-- A sequence with small windows, so the demo shows several.
SELECT hilo_create('orders', window_size => 1000, min_open_windows => 2, block_size => 10);

-- Take IDs: exactly n, as an int8multirange.
SELECT hilo_take('orders', 10) AS ten_ids;
SELECT hilo_take('orders', 5) AS five_more;

-- The same as rows, for drivers without multirange support.
SELECT * FROM hilo_take_ranges('orders', 3);

-- A take is durable and not undone by the caller's rollback:
BEGIN;
SELECT hilo_take('orders', 4) AS taken_then_rolled_back;
ROLLBACK;
SELECT hilo_take('orders', 4) AS after_rollback_never_the_same;

-- Give back what was not used. Pushed IDs come back first, lowest first.
SELECT hilo_push('orders', '{[3,5], [8,9]}') AS recycled;
SELECT hilo_take('orders', 7) AS recycled_first_then_fresh;

-- Pushes are checked: this range was never handed out.
\set ON_ERROR_STOP 0
SELECT hilo_push('orders', '{[500,600]}');
-- ... and this one is free already.
SELECT hilo_push('orders', '{[16,16]}');
SELECT hilo_push('orders', '{[16,16]}');
\set ON_ERROR_STOP 1

-- A big take costs the same as a small one.
SELECT hilo_take('orders', 1000000000000) AS a_trillion;

-- The catalog: windows and the free list.
SELECT window_start_value, window_end_value, next_hi_value
  FROM hilo.windows JOIN hilo.sequences USING (seq_id)
 WHERE name = 'orders' ORDER BY window_start_value;
SELECT first_id, last_id FROM hilo.free_ranges ORDER BY first_id;

-- hilo_nextval for column defaults: served from this session's buffer.
SELECT hilo_create('invoices', block_size => 100);
CREATE TABLE invoices (id bigint PRIMARY KEY DEFAULT hilo_nextval('invoices'), total numeric);
INSERT INTO invoices (total) VALUES (10), (20), (30) RETURNING id, total;
SELECT sequence, next_id, end_id FROM hilo.buffers WHERE pid = pg_backend_pid();
SELECT sequence, open_windows, pool_ids, buffered_ids, issued_since_start
  FROM hilo.status ORDER BY sequence;
