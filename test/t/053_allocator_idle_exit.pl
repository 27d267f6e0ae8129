# An allocator exits after hilo.allocator_idle_timeout with nothing to do,
# giving its pools back to the free list first, and starts again on
# demand. While a session holds IDs of its pools it stays. (Before,
# allocators never exited.)
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use HiloTest;

my $node = hilo_node('idle_exit',
	conf => "hilo.allocator_idle_timeout = 1s\nhilo.naptime = 100ms\n");
my $allocators =
  "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'hilo allocator'";

sub poll
{
	my ($sql, $want, $seconds) = @_;
	for (1 .. $seconds * 10)
	{
		return 1 if psql_until_exited($node, 'postgres', $sql) eq $want;
		usleep(100_000);
	}
	return 0;
}

psql_until_exited($node, 'postgres', "SELECT hilo_create('s', block_size => 10)");
my @ids = (psql_until_exited($node, 'postgres', "SELECT hilo_nextval('s')"));
is($ids[0], '1', 'a first ID starts the allocator');
is(psql_until_exited($node, 'postgres', $allocators), '1', 'one allocator runs');
ok(poll($allocators, '0', 30), 'idle for hilo.allocator_idle_timeout, it exits');
is(psql_until_exited($node, 'postgres', q{
	SELECT min(first_id) FROM hilo.free_ranges JOIN hilo.sequences USING (seq_id)
	 WHERE name = 's'}), '2', 'having given its pool (and the buffer given back) to the free list');

# On demand it starts again and hands the given-back IDs out first.
push @ids, psql_until_exited($node, 'postgres', "SELECT hilo_nextval('s')");
is($ids[1], '2', 'the next call starts it again: nothing wasted');
is(psql_until_exited($node, 'postgres', $allocators), '1', 'one allocator runs again');

# A session holding a buffer keeps it.
my $session = $node->background_psql('postgres');
push @ids, $session->query_safe("SELECT hilo_nextval('s')");
usleep(3_000_000);
is(psql_until_exited($node, 'postgres', $allocators), '1',
	'while a session holds IDs of its pool, the allocator stays');
push @ids, $session->query_safe("SELECT hilo_nextval('s')");
$session->quit;
ok(poll($allocators, '0', 30), 'once the session is gone, it exits');
push @ids, map { $_->[0] .. $_->[1] - 1 }
  parse_multirange(psql_until_exited($node, 'postgres', "SELECT hilo_take('s', 300)"));
my %seen;
is(scalar(grep { $seen{$_}++ } @ids), 0, scalar(@ids) . ' IDs over three allocators, none twice');

$node->stop;
done_testing();
