# 50 databases used one after another, with default settings
# (max_worker_processes = 8, one slot taken by the logical replication
# launcher). Each database's allocator takes a background worker slot; when
# none is free, the allocator of the least recently active idle database
# gives its pools back and exits to make room, and starts again when its
# database needs it. (Before, the 8th database got 53400: "No background
# worker slot is free".)
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

my $ndb = 50;
my $node = hilo_node('databases');
is($node->safe_psql('postgres', 'SHOW max_worker_processes'), '8', 'default worker slots');

# Every new database gets the extension from template1.
$node->safe_psql('template1', 'CREATE EXTENSION hilo');
my (%ok, @errors);
for my $i (1 .. $ndb)
{
	$node->safe_psql('postgres', "CREATE DATABASE d$i");
	# One script after another: the next starts once this one's backend
	# has exited (its buffer given back, its database idle).
	my $out = eval {
		psql_until_exited($node, "d$i",
			"SELECT hilo_create('s', block_size => 100);"
			  . " SELECT hilo_nextval('s'), hilo_take('s', 3), hilo_take('s', 1000)");
	} // '';
	my $err = $@;
	my $last = (split /\n/, $out)[-1] // '';
	if (!$err && $last =~ /^1\|\{\[17,20\)\}\|\{\[\d+,\d+\)\}$/)
	{
		$ok{$i} = 1;
	}
	else
	{
		push @errors, "d$i: $out $err";
	}
}
is(scalar(keys %ok), $ndb, "all $ndb databases used hilo, one after another")
  or diag join("\n", @errors[0 .. ($#errors > 4 ? 4 : $#errors)]);
cmp_ok($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'hilo allocator'"),
	'<=', 7, 'never more allocators than free worker slots');

# The first databases again: their allocators start again, and what their
# pools held went back to the free list: handed out now, nothing twice.
# (A sequence used by one session fills its session buffer in blocks of 16
# first, so the first take after one hilo_nextval starts at 17; the pool gave
# back [20,101) and the buffer [2,17), lowest first.)
for my $i (1 .. 3)
{
	my $got = $node->safe_psql("d$i", "SELECT hilo_nextval('s'), hilo_take('s', 3)");
	is($got, '2|{[20,23)}',
		"d$i again: continues from the IDs its pool and buffer gave back");
}
$node->stop;
done_testing();
