# Nothing wasted: a backend that exits gives its buffer back to the pool
# and the next backend gets those IDs; a clean restart writes pools and
# buffers back to the free list, so the next IDs continue from the lowest
# unused one. Two databases with the same sequence name never share IDs'
# buffers. hilo.max_sequences bounds the pools in shared memory: a further
# sequence is served once the least recently used idle pool has given its
# IDs back to the free list (it was refused with 53400 before).
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

my $node = hilo_node('buffers', conf => "hilo.max_sequences = 3\n");
psql_until_exited($node, 'postgres', "SELECT hilo_create('s', block_size => 100)");

# One session takes three IDs and exits: 4..100 go back to the pool.
is(psql_until_exited($node, 'postgres',
        "SELECT hilo_nextval('s'), hilo_nextval('s'), hilo_nextval('s')"),
    '1|2|3', 'a first session gets 1, 2, 3');
is(psql_until_exited($node, 'postgres', "SELECT hilo_nextval('s')"), '4',
    'the next session continues with what the first left in its buffer');
is(psql_until_exited($node, 'postgres', "SELECT hilo_take('s', 3)"), '{[5,8)}',
    'and so does a small take');

# A clean restart: the pool (and any buffers) go to the free list; nothing
# is skipped.
psql_until_exited($node, 'postgres',
    "SELECT hilo_nextval('s') FROM generate_series(1, 10)");  # 8..17
$node->restart;  # fast shutdown
is(psql_until_exited($node, 'postgres', "SELECT hilo_nextval('s')"), '18',
    'after a clean restart nextval continues from the lowest unused ID');
is(psql_until_exited($node, 'postgres', "SELECT hilo_take('s', 2)"), '{[19,21)}',
    'and a take continues right after it');
cmp_ok(psql_until_exited($node, 'postgres',
        "SELECT count(*) FROM hilo.free_ranges JOIN hilo.sequences USING (seq_id)"
      . " WHERE name = 's'"), '<=', 1,
    'the written-back IDs are one merged free range (or already back in a pool)');

# Same name in two databases: separate catalogs, separate pools, and a
# session in one never serves the other's buffer.
psql_until_exited($node, 'postgres', 'CREATE DATABASE other');
psql_until_exited($node, 'other', "CREATE EXTENSION hilo; SELECT hilo_create('s', block_size => 100)");
my $in_other = psql_until_exited($node, 'other', "SELECT hilo_nextval('s')");
is($in_other, '1', 'the other database has its own sequence s');
is(psql_until_exited($node, 'postgres', "SELECT hilo_nextval('s')"), '21',
    'the first database is unaffected');
is(psql_until_exited($node, 'other', q{
    SELECT count(*) FROM hilo.buffers b JOIN pg_stat_activity a USING (pid)
     WHERE a.datname <> current_database()}), '0',
    'hilo.buffers shows only this database');

# hilo.status measures the rate IDs go at, and how long the rest lasts.
psql_until_exited($node, 'postgres', "SELECT count(hilo_nextval('s')) FROM generate_series(1, 50000)");
$node->poll_query_until('postgres',
    "SELECT ids_per_second > 0 AND lasts IS NOT NULL FROM hilo.status WHERE sequence = 's'")
  or fail('hilo.status never showed a rate');
pass('hilo.status shows a rate and how long the remaining IDs last');
is(psql_until_exited($node, 'postgres',
        "SELECT lasts > interval '30000 years' FROM hilo.status WHERE sequence = 's'"),
    't', 'which, for a sequence that can go up to 2^63 - 2, is practically forever');
like(psql_until_exited($node, 'postgres',
        "SELECT issued_since_start FROM hilo.status WHERE sequence = 's'"),
    qr/^\d{5,}$/, 'and counts the IDs issued since start');

# hilo.max_sequences = 3 (pools over all databases: postgres.s, other.s).
psql_until_exited($node, 'postgres', "SELECT hilo_create('t'); SELECT hilo_create('u')");
is(psql_until_exited($node, 'postgres', "SELECT hilo_nextval('t')"), '1', 'a third pool fits');
is(psql_until_exited($node, 'postgres', "SELECT hilo_nextval('u')"), '1',
    'a fourth sequence is served too, not refused');
is(psql_until_exited($node, 'postgres', "SELECT count(*) FROM hilo.pool_stats()")
     + psql_until_exited($node, 'other', "SELECT count(*) FROM hilo.pool_stats()"), 3,
    'the least recently used pool made room: still 3 pools');
is(psql_until_exited($node, 'other', q{
    SELECT count(*) > 0 FROM hilo.free_ranges JOIN hilo.sequences USING (seq_id)
     WHERE name = 's'}), 't', 'it was the other database\'s: its IDs went back to its free list');
is(psql_until_exited($node, 'other', "SELECT hilo_nextval('s')"), '2',
    'and are handed out from there: nothing wasted');
# Dropping a sequence frees its pool.
psql_until_exited($node, 'postgres', "SELECT hilo_drop('t')");
is(psql_until_exited($node, 'postgres', "SELECT hilo_nextval('u')"), '2',
    'after a drop the others go on');

$node->stop;
done_testing();
