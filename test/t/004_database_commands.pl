# A database's allocator stays connected to it. Commands that need the
# database free of connections (DROP, RENAME, SET TABLESPACE, use as a
# TEMPLATE) must still work: hilo stops the allocator first, and the next
# take starts a new one.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

my $node = hilo_node('dbcommands');

sub allocator_count
{
    my ($db) = @_;
    return $node->safe_psql('postgres',
        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'hilo allocator'"
          . " AND datname = '$db'");
}

sub start_allocator_in
{
    my ($db) = @_;
    $node->safe_psql($db, "CREATE EXTENSION IF NOT EXISTS hilo");
    $node->safe_psql($db, "SELECT hilo_create('s') WHERE NOT EXISTS "
          . "(SELECT 1 FROM hilo.sequences WHERE name = 's')");
    # More than a block: served by the allocator, not from the pool.
    my $took = $node->safe_psql($db, "SELECT hilo_take('s', 5000)");
    is(allocator_count($db), '1', "an allocator runs in $db");
    return $took;
}

$node->safe_psql('postgres', 'CREATE DATABASE d1');
my @before = parse_multirange(start_allocator_in('d1'));
$node->safe_psql('postgres', 'ALTER DATABASE d1 RENAME TO d2');
pass('renamed a database with a running allocator');
push @before, parse_multirange(start_allocator_in('d2'));
$node->safe_psql('postgres', 'CREATE DATABASE d3 TEMPLATE d2');
pass('copied a database with a running allocator');
my @copy = parse_multirange($node->safe_psql('d3', "SELECT hilo_take('s', 3)"));
my $highest = 0;
$highest = $_->[1] > $highest ? $_->[1] : $highest for @before;
ok(@copy && $copy[0][0] >= $highest,
    "the copy carries the catalog and continues above all IDs taken before ($highest)");

start_allocator_in('d2');
$node->safe_psql('postgres', 'DROP DATABASE d2');
pass('dropped a database with a running allocator');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = 'd2'"),
    '0', 'd2 is gone');
$node->stop;
done_testing();
