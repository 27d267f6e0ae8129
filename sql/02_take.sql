-- hilo_take and hilo_take_ranges.
\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
\set VERBOSITY default
-- block_size 1: these takes go through the allocator, not a pool (05_nextval
-- covers pools), so the IDs below do not depend on pool refills.
SELECT hilo_create('t', block_size => 1);

-- Exactly n IDs, from the lowest open window.
SELECT hilo_take('t', 2);
SELECT hilo_take('t', 10);
SELECT hilo_take('t', 100);
SELECT hilo_take('t', 2, partial => true);

-- The same as rows of inclusive bounds.
SELECT * FROM hilo_take_ranges('t', 5);
SELECT sum(last_id - first_id + 1) FROM hilo_take_ranges('t', 12345);

-- Large n costs the same; ranges cover exactly n IDs.
SELECT hilo_take('t', 1000000);
SELECT hilo_take('t', 1000000000000);
SELECT sum(upper(r) - lower(r)) AS ids
  FROM unnest(hilo_take('t', 2500000)) AS r;

-- Takes never repeat and are durable past the caller's rollback.
CREATE TABLE taken (r int8range);
BEGIN;
INSERT INTO taken SELECT unnest(hilo_take('t', 7));
ROLLBACK;
INSERT INTO taken SELECT unnest(hilo_take('t', 7));
INSERT INTO taken SELECT unnest(hilo_take('t', 7));
SELECT count(*) AS overlapping_pairs FROM taken a JOIN taken b
    ON a.ctid < b.ctid AND a.r && b.r;

-- A take in the same statement as a push of what it took: the next take
-- gets those IDs back, before fresh ones.
SELECT lower(r) AS pushed_from FROM unnest(hilo_take('t', 3)) AS r \gset
SELECT hilo_push('t', int8multirange(int8range(:pushed_from, :pushed_from + 3)));
SELECT hilo_push('t', hilo_take('t', 3));
SELECT hilo_take('t', 6) = int8multirange(int8range(:pushed_from, :pushed_from + 6))
    AS pushed_ids_come_back_first;


-- Errors: n must be positive (22023).
SELECT hilo_take('t', 0);
:sqlstate
SELECT hilo_take('t', -1);
:sqlstate
SELECT * FROM hilo_take_ranges('t', -9223372036854775808);
:sqlstate
-- Unknown sequence (42704); names are case-sensitive.
SELECT hilo_take('nope', 1);
:sqlstate
SELECT hilo_take('T', 1);
:sqlstate
SELECT * FROM hilo_take_ranges('nope', 1);
:sqlstate
-- (NULL arguments: sql/08_bad_input.sql.)
-- Bad names (22023).
SELECT hilo_take('', 1);
:sqlstate
SELECT hilo_take(repeat('y', 256), 1);
:sqlstate
-- Read-only transaction (25006).
BEGIN READ ONLY;
SELECT hilo_take('t', 1);
:sqlstate
ROLLBACK;
BEGIN;
SET TRANSACTION READ ONLY;
SELECT * FROM hilo_take_ranges('t', 1);
:sqlstate
ROLLBACK;
-- A sequence created in the same, uncommitted transaction: its IDs are
-- reserved in that transaction (sql/11_one_transaction.sql has the rest).
BEGIN;
SELECT hilo_create('fresh');
SELECT hilo_take('fresh', 1);
ROLLBACK;
-- One changed in it is not usable until the change commits (55000).
BEGIN;
SELECT hilo_alter('t', block_size => 7);
SELECT hilo_take('t', 1);
:sqlstate
ROLLBACK;

-- Exhaustion (2200H): without partial nothing is reserved.
SELECT hilo_create('small', start_value => 10, max_value => 29, window_size => 5);
SELECT hilo_take('small', 8);
SELECT hilo_take('small', 13);
:sqlstate
SELECT hilo_take('small', 12);
SELECT hilo_take('small', 1);
:sqlstate
SELECT hilo_take('small', 1, partial => true);
:sqlstate
SELECT hilo_take('small', 5, partial => true);
:sqlstate
-- After an exhaustion error, the IDs are still there.
SELECT hilo_create('small2', start_value => 1, max_value => 10, window_size => 3);
SELECT hilo_take('small2', 11);
:sqlstate
SELECT hilo_take('small2', 10);

-- Partial hands out what remains, recycled IDs included.
SELECT hilo_create('small3', max_value => 10, window_size => 4);
SELECT hilo_take('small3', 10);
SELECT hilo_push('small3', '{[2,3],[7,7]}');
SELECT hilo_take('small3', 100);
:sqlstate
SELECT hilo_take('small3', 100, partial => true);
SELECT hilo_take('small3', 1, partial => true);
:sqlstate

-- The very top of the ID space: 2^63 - 2 is the last ID.
SELECT hilo_create('top', start_value => 9223372036854775800);
SELECT hilo_take('top', 5);
SELECT * FROM hilo_take_ranges('top', 2);
SELECT hilo_take('top', 1);
:sqlstate
SELECT hilo_push('top', '{[9223372036854775800,9223372036854775806]}');
SELECT * FROM hilo_take_ranges('top', 7);
SELECT hilo_take('top', 1, partial => true);
:sqlstate

-- A sequence of one ID.
SELECT hilo_create('one', start_value => 42, max_value => 42);
SELECT hilo_take('one', 1);
SELECT hilo_take('one', 1);
:sqlstate

-- Windows of the size asked for, min_open_windows of them open.
SELECT hilo_create('w', window_size => 10, min_open_windows => 3, block_size => 1);
SELECT hilo_take('w', 4);
SELECT window_start_value, window_end_value, next_hi_value
  FROM hilo.windows JOIN hilo.sequences USING (seq_id)
 WHERE name = 'w' ORDER BY window_start_value;
-- Windows used up one after another are one row: hilo.windows does not
-- grow with every window a take uses up.
SELECT hilo_take('w', 25);
SELECT window_start_value, window_end_value, next_hi_value
  FROM hilo.windows JOIN hilo.sequences USING (seq_id)
 WHERE name = 'w' ORDER BY window_start_value;
-- Takes larger than the open windows (the rest claimed above them, used
-- up, a row of its own until the window above it is used up): a row or
-- two below the open windows, covering every ID handed out and no other
-- (a push is checked against them).
SELECT count(hilo_take('w', k)) FROM generate_series(1, 40) k;
SELECT window_start_value, window_end_value, next_hi_value
  FROM hilo.windows JOIN hilo.sequences USING (seq_id)
 WHERE name = 'w' ORDER BY window_start_value;
SELECT hilo_push('w', '{[1,1], [880,880]}');
SELECT hilo_push('w', '{[881,881]}');
:sqlstate
