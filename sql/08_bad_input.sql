-- Bad input to every function: NULLs, empty, long and odd names, n at and
-- beyond its limits, multiranges that are empty, unbounded or outside the
-- sequence, arrays that do not line up, values at and near 2^63 - 2. Each
-- call gets a clear error (its SQLSTATE is printed) or a correct answer,
-- and no failed call changes the catalog (a fingerprint of it is compared
-- before and after).
\set sqlstate '\\echo SQLSTATE :LAST_ERROR_SQLSTATE'
\set VERBOSITY default
-- A database of its own: the others' leftovers (06_cluster makes
-- contrib_regression a cluster of one node) must not change the answers.
CREATE DATABASE hilo_bad_input;
\c hilo_bad_input
\set VERBOSITY default
CREATE EXTENSION hilo;

-- Every user-facing function is exercised below; this is the list.
SELECT p.oid::regprocedure AS function
  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'hilo'
 WHERE p.pronamespace = e.extnamespace ORDER BY 1::text;

-- The fingerprint of everything hilo holds: every row of every catalog
-- table, and the IDs waiting in pools (shared memory).
CREATE FUNCTION pg_temp.fingerprint() RETURNS text LANGUAGE sql AS $$
    SELECT md5(concat_ws('|',
        (SELECT string_agg(s::text, ';' ORDER BY s.seq_id) FROM hilo.sequences s),
        (SELECT string_agg(w::text, ';' ORDER BY w.seq_id, w.window_start_value)
           FROM hilo.windows w),
        (SELECT string_agg(f::text, ';' ORDER BY f.seq_id, f.first_id) FROM hilo.free_ranges f),
        (SELECT string_agg(g::text, ';' ORDER BY g.seq_id, g.grantee::oid)
           FROM hilo.usage_grants g),
        (SELECT string_agg(c::text, ';') FROM hilo.cluster c),
        (SELECT string_agg(concat_ws(' ', seq_id, pool_ids, buffered_ids), ';' ORDER BY seq_id)
           FROM hilo.pool_stats())))
$$;
-- Waits (at most 30 s) until the allocator has opened a sequence's windows,
-- so that it has nothing left to do that would change the catalog.
CREATE FUNCTION pg_temp.settled(seq text, windows int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..300 LOOP
        IF (SELECT count(*) FROM hilo.windows w JOIN hilo.sequences s USING (seq_id)
             WHERE s.name = seq AND w.next_hi_value < w.window_end_value) >= windows THEN
            RETURN true;
        END IF;
        PERFORM pg_sleep(0.1);
    END LOOP;
    RETURN false;
END $$;

-- A sequence with something in every table: windows, a free range, a grant.
-- block_size 1, so that no call below leaves IDs in a pool.
SELECT hilo_create('b', max_value => 1000000, window_size => 1000, min_open_windows => 1,
                   block_size => 1);
SELECT hilo_take('b', 10);
SELECT hilo_push('b', '{[3,4]}');
SELECT hilo_grant_usage('b', 'public');
SELECT hilo_take('b', 1) AS recycled;
SELECT hilo_push('b', '{[3,3]}');  -- 3 again: the allocator moves it to the pool
SELECT pg_temp.settled('b', 1);
SELECT pg_sleep(1);  -- the allocator's idle rounds (every 200 ms here) are done by now
SELECT pg_temp.fingerprint() AS before \gset

-- hilo_create
SELECT hilo_create(NULL);
:sqlstate
-- (start_value => NULL is the default: sql/10_dependents.sql)
SELECT hilo_create('x', max_value => NULL);
:sqlstate
SELECT hilo_create('x', window_size => NULL);
:sqlstate
SELECT hilo_create('x', min_open_windows => NULL);
:sqlstate
SELECT hilo_create('x', block_size => NULL);
:sqlstate
SELECT hilo_create('x', monotonic => NULL);
:sqlstate
SELECT hilo_create('');
:sqlstate
SELECT hilo_create(repeat('n', 256));
:sqlstate
SELECT hilo_create(repeat('n', 1048576));
:sqlstate
-- 86 three-byte characters are 258 bytes: too long, however few characters.
SELECT hilo_create(repeat('€', 86));
:sqlstate
SELECT hilo_create(repeat('é', 128));  -- 128 characters but 256 bytes
:sqlstate
SELECT hilo_create('x', start_value => 0);
:sqlstate
SELECT hilo_create('x', start_value => -1);
:sqlstate
SELECT hilo_create('x', start_value => -9223372036854775808);
:sqlstate
SELECT hilo_create('x', max_value => 9223372036854775807);
:sqlstate
SELECT hilo_create('x', start_value => 10, max_value => 9);
:sqlstate
SELECT hilo_create('x', window_size => 0);
:sqlstate
SELECT hilo_create('x', window_size => -9223372036854775808);
:sqlstate
SELECT hilo_create('x', min_open_windows => 0);
:sqlstate
SELECT hilo_create('x', block_size => -2147483648);
:sqlstate
SELECT hilo_create('x', block_size => -1);
:sqlstate
SELECT hilo_create('b');
:sqlstate

-- hilo_drop
SELECT hilo_drop(NULL);
:sqlstate
SELECT hilo_drop('');
:sqlstate
SELECT hilo_drop(repeat('n', 1048576));
:sqlstate
SELECT hilo_drop('B');
:sqlstate

-- hilo_alter
SELECT hilo_alter(NULL);
:sqlstate
SELECT hilo_alter('nope', block_size => 5);
:sqlstate
SELECT hilo_alter('b', max_value => 5);
:sqlstate
SELECT hilo_alter('b', max_value => 9223372036854775807);
:sqlstate
SELECT hilo_alter('b', window_size => 0);
:sqlstate
SELECT hilo_alter('b', min_open_windows => -1);
:sqlstate
SELECT hilo_alter('b', block_size => 0);
:sqlstate

-- hilo_raise (the rest of its cases: 17_raise_unadopt)
SELECT hilo_raise(NULL, 1);
:sqlstate
SELECT hilo_raise('b', NULL);
:sqlstate
SELECT hilo_raise('', 1);
:sqlstate
SELECT hilo_raise('nope', 1);
:sqlstate
SELECT hilo_raise('b', -1);
:sqlstate
SELECT hilo_raise('b', 1000000);
:sqlstate
SELECT hilo_raise('b', 9223372036854775807);
:sqlstate

-- hilo_adopt and hilo_unadopt (the rest of their cases: 16_adopt and
-- 17_raise_unadopt)
SELECT hilo_adopt(NULL, 'id');
:sqlstate
SELECT hilo_adopt('pg_class', NULL);
:sqlstate
SELECT hilo_adopt('pg_class', 'oid');
:sqlstate
SELECT hilo_unadopt(NULL, 'id');
:sqlstate
SELECT hilo_unadopt('pg_class', 'oid');
:sqlstate

-- hilo_take and hilo_take_ranges
SELECT hilo_take(NULL, 1);
:sqlstate
SELECT hilo_take('b', NULL);
:sqlstate
SELECT hilo_take('b', 1, NULL);
:sqlstate
SELECT hilo_take('', 1);
:sqlstate
SELECT hilo_take(repeat('n', 1048576), 1);
:sqlstate
SELECT hilo_take('b', 0);
:sqlstate
SELECT hilo_take('b', -1);
:sqlstate
SELECT hilo_take('b', -9223372036854775808);
:sqlstate
SELECT hilo_take('b', 9223372036854775807);
:sqlstate
SELECT hilo_take('b', 1000000);  -- one more than is left
:sqlstate
SELECT * FROM hilo_take_ranges('b', 0);
:sqlstate
SELECT * FROM hilo_take_ranges('b', 9223372036854775807);
:sqlstate
SELECT * FROM hilo_take_ranges(NULL, 1);
:sqlstate
SELECT * FROM hilo_take_ranges('b', NULL);
:sqlstate

-- hilo_push
SELECT hilo_push(NULL, '{[5,5]}');
:sqlstate
SELECT hilo_push('b', NULL);
:sqlstate
SELECT hilo_push('b', '{[1,)}');
:sqlstate
SELECT hilo_push('b', '{(,5]}');
:sqlstate
SELECT hilo_push('b', '{[0,0]}');
:sqlstate
SELECT hilo_push('b', '{[-5,-1]}');
:sqlstate
SELECT hilo_push('b', '{[1000001,1000001]}');
:sqlstate
SELECT hilo_push('b', '{[9223372036854775806,9223372036854775806]}');
:sqlstate
SELECT hilo_push('b', '{[5,5],[500,600]}');  -- 5 was handed out, 500..600 were not
:sqlstate
SELECT hilo_push('b', '{[3,3]}');  -- pushed back above: it waits in the pool
:sqlstate
SELECT hilo_push('b', int8multirange('empty'::int8range));  -- nothing: an answer, not an error
SELECT hilo_push('b', '{}');
-- PostgreSQL itself refuses what cannot be a multirange of bigints.
SELECT hilo_push('b', '{[5,3]}');
:sqlstate
SELECT hilo_push('b', '{[9223372036854775807,9223372036854775807]}');
:sqlstate

-- hilo_push_ranges
SELECT hilo_push_ranges('b', '{5}', NULL);
:sqlstate
SELECT hilo_push_ranges('b', '{5,6}', '{5}');
:sqlstate
SELECT hilo_push_ranges('b', '{5,NULL}', '{5,6}');
:sqlstate
SELECT hilo_push_ranges('b', '{{5,6},{7,8}}', '{{5,6},{7,8}}');
:sqlstate
SELECT hilo_push_ranges('b', '{6}', '{5}');
:sqlstate
SELECT hilo_push_ranges('b', '{5,6}', '{6,7}');
:sqlstate
SELECT hilo_push_ranges('b', '{9223372036854775807}', '{9223372036854775807}');
:sqlstate
SELECT hilo_push_ranges('b', '{-9223372036854775808}', '{9223372036854775807}');
:sqlstate
SELECT hilo_push_ranges('b', '{}', '{}');

-- hilo_nextval
SELECT hilo_nextval(NULL);
:sqlstate
SELECT hilo_nextval('');
:sqlstate
SELECT hilo_nextval(repeat('n', 1048576));
:sqlstate
SELECT hilo_nextval('nope');
:sqlstate

-- hilo_uuid, hilo_uuid_id, hilo_uuid_time
SELECT hilo_uuid('');
:sqlstate
SELECT hilo_uuid(repeat('n', 1048576));
:sqlstate
SELECT hilo_uuid_id('00000000-0000-0000-0000-000000000000');
:sqlstate
SELECT hilo_uuid_time('ffffffff-ffff-ffff-ffff-ffffffffffff');
:sqlstate

-- Usage rights
SELECT hilo_grant_usage('b', '');
:sqlstate
SELECT hilo_grant_usage('b', repeat('r', 1048576));
:sqlstate
SELECT hilo_revoke_usage('b', NULL);
:sqlstate

-- Nodes (this server is in no cluster)
SELECT hilo_add_node(NULL, 'dbname=postgres');
:sqlstate
SELECT hilo_add_node('n1', NULL);
:sqlstate
SELECT hilo_add_node('', 'dbname=postgres');
:sqlstate
SELECT hilo_add_node(repeat('n', 64), 'dbname=postgres');
:sqlstate
SELECT hilo_add_node('n1', '=bad');
:sqlstate
SELECT hilo_add_node('n1', 'host=/nonexistent port=1');
:sqlstate
SELECT hilo_remove_node(NULL);
:sqlstate
SELECT hilo_remove_node('nobody');
:sqlstate

-- After all of that, the catalog is exactly as it was.
SELECT pg_temp.fingerprint() = :'before' AS nothing_changed;

-- The push refused as a whole pushed nothing: 5 is still handed out, so it
-- can be pushed now.
SELECT hilo_push('b', '{[5,5]}');

-- The top of the ID space: IDs up to 2^63 - 2, so that int8range can hold
-- the last one. A take gets exactly what is asked or nothing; with partial,
-- what is left; then 2200H.
SELECT hilo_create('top', start_value => 9223372036854775800, window_size => 3,
                   block_size => 1);
SELECT hilo_take('top', 5);
SELECT hilo_take('top', 3);
:sqlstate
SELECT hilo_take('top', 3, partial => true);
SELECT hilo_take('top', 1, partial => true);
:sqlstate
SELECT hilo_push('top', '{[9223372036854775806,9223372036854775806]}');
SELECT hilo_take('top', 1);
SELECT hilo_take('top', 9223372036854775807, partial => true);
:sqlstate
-- hilo_nextval at the very end, in a sequence of three IDs.
SELECT hilo_create('top_n', start_value => 9223372036854775804, block_size => 2);
SELECT hilo_nextval('top_n'), hilo_nextval('top_n'), hilo_nextval('top_n');
SELECT hilo_nextval('top_n');
:sqlstate
-- hilo_uuid at the very end: the ID's top bit sits in rand_a.
SELECT hilo_create('top_u', start_value => 9223372036854775805);
SELECT hilo_uuid_id(hilo_uuid('top_u')), hilo_uuid_id(hilo_uuid('top_u'));
SELECT hilo_uuid('top_u');
:sqlstate
-- A sequence of one ID.
SELECT hilo_create('one', start_value => 9223372036854775806);
SELECT * FROM hilo_take_ranges('one', 1);
SELECT * FROM hilo_take_ranges('one', 1);
:sqlstate
-- Names at the limits: 255 bytes, and 85 three-byte characters.
SELECT hilo_create(repeat('n', 255));
SELECT hilo_take(repeat('n', 255), 1);
SELECT hilo_create(repeat('€', 85));
SELECT hilo_nextval(repeat('€', 85));
SELECT hilo_create(E'odd \' " \\ name');
SELECT hilo_take(E'odd \' " \\ name', 2);

\c contrib_regression
DROP DATABASE hilo_bad_input;
