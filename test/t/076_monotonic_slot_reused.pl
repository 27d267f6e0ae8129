# A take from a monotonic sequence (ordering 'node') whose pool slot is
# given to another sequence while the call has not used it yet: the call
# finds its pool stale and looks again, as hilo_nextval does, and returns
# IDs of its own sequence above every ID handed out before. Before, it
# failed with 55000 ("was dropped or changed meanwhile"), about once a
# second under load with hilo.max_sequences = 3.
#
# hilo.pool_attach_delay (for tests) holds the call between finding its
# slot and using it; one pool slot (hilo.max_sequences = 1) makes the reuse
# certain: another session's call of y has x's pool released and takes the
# slot. Both functions that take: hilo_take and hilo_take_ranges, and a
# partial take.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use IPC::Run;
use HiloTest;

my $node = hilo_node('mono_slot', conf => "hilo.max_sequences = 1\nhilo.naptime = 100ms\n");
psql_until_exited($node, 'postgres',
	"SELECT hilo_create('x', ordering => 'node', block_size => 10)");
psql_until_exited($node, 'postgres',
	"SELECT hilo_create('y', start_value => 1000000, block_size => 10)");

sub poll
{
	my ($sql) = @_;
	for (1 .. 300)
	{
		return 1 if psql_until_exited($node, 'postgres', $sql) eq 't';
		usleep(50_000);
	}
	return 0;
}

my $pause_ms = 3000;
my $paused = q{FROM pg_stat_activity
	WHERE query LIKE '%pool_attach_delay%' AND wait_event = 'Extension' AND pid <> pg_backend_pid()};
sub pool_of
{
	my ($seq) = @_;
	return qq{SELECT count(*) = 1 FROM hilo.pool_stats() JOIN hilo.sequences USING (seq_id)
		WHERE name = '$seq'};
}

my @x = (psql_until_exited($node, 'postgres', "SELECT hilo_nextval('x')"));
for my $call ("hilo_take('x', 3)", "hilo_take('x', 3, partial => true)",
	"(SELECT string_agg(first_id || ' ' || last_id, ' ') FROM hilo_take_ranges('x', 3))")
{
	# x has the slot (a session that exits), then the call pauses in it.
	push @x, psql_until_exited($node, 'postgres', "SELECT hilo_nextval('x')");
	ok(poll(pool_of('x')), "x has the one pool slot");
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
			'-c', "SET hilo.pool_attach_delay = '${pause_ms}ms'; SELECT $call" ],
		'>', \$out, '2>', \$err);
	ok(poll("SELECT count(*) = 1 $paused"), "$call found x's pool and pauses");
	my $y = psql_until_exited($node, 'postgres', "SELECT hilo_nextval('y')");
	ok($y >= 1000000, "y had x's pool released and took the slot ($y)");
	ok(poll(pool_of('y')), '... the slot is y\'s now');
	ok($h->finish, "$call succeeds") or diag($err);
	my @got = $out =~ /(\d+)/g;
	my @ids = $call =~ /ranges/
	  ? do { my @b = @got; my @r; while (my ($lo, $hi) = splice(@b, 0, 2)) { push @r, $lo .. $hi } @r }
	  : map { $_->[0] .. $_->[1] - 1 } parse_multirange($out);
	is(scalar(@ids), 3, "$call returns three IDs (@ids)");
	my ($max) = sort { $b <=> $a } @x;
	is(scalar(grep { $_ > $max && $_ < 1000000 } @ids), 3,
		"... of x, above every ID of x handed out before ($max)");
	push @x, @ids;
}

my %seen;
is(scalar(grep { $seen{$_}++ } @x), 0, 'no ID of x twice');
$node->stop;
done_testing();
