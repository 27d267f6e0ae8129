# An allocator whose caller's request slot was reused by a backend of
# another database still exits when idle (and can be evicted).
#
# The allocator keeps a take's reply ("retained") until it sees the slot
# idle or holding a new request. It looked only at slots holding its own
# database's requests: when its caller copied the reply and left before the
# allocator's next pass, and a backend of another database (given the same
# PGPROC, which PostgreSQL hands out last-in-first-out) wrote a request into
# the slot, the reply stayed retained for ever and the allocator never
# exited, keeping a worker slot and a hilo.max_databases entry.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

# A long naptime: the allocator sleeps between passes unless woken, so
# the caller is gone and the slot reused before it looks again.
my $node = hilo_node('slot_reused',
	conf => "hilo.allocator_idle_timeout = 1s\nhilo.naptime = 5s\n");
for my $db (qw(db1 db2))
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, "CREATE EXTENSION hilo");
	$node->safe_psql($db, "SELECT hilo_create('big', block_size => 10)");
}
my $no_allocator_of = sub {
	my ($db) = @_;
	return "SELECT count(*) = 0 FROM pg_stat_activity"
	  . " WHERE backend_type = 'hilo allocator' AND datname = '$db'";
};

my %ranges;
for my $round (1 .. 3)
{
	# A take larger than block_size goes to the allocator, which retains
	# its reply; the session ends at once, and the next one (another
	# database) gets its PGPROC and slot.
	for my $db (qw(db1 db2))
	{
		push @{ $ranges{$db} },
		  parse_multirange($node->safe_psql($db, "SELECT hilo_take('big', 5000)"));
	}
}
ok($node->poll_query_until('postgres', $no_allocator_of->('db1')),
	"db1's allocator exits once idle, its caller's slot now db2's");
ok($node->poll_query_until('postgres', $no_allocator_of->('db2')),
	"so does db2's");
for my $db (qw(db1 db2))
{
	my @ids = sort { $a <=> $b } map { $_->[0] .. $_->[1] - 1 } @{ $ranges{$db} };
	my %seen;
	is(scalar(grep { $seen{$_}++ } @ids), 0, "$db: " . scalar(@ids) . ' IDs, none twice');
}
$node->stop;
done_testing();
