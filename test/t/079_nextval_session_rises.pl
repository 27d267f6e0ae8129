# One session's hilo_nextval of one sequence strictly rises (found by
# review). The session's cache entry remembers the last ID it returned, and
# the next is taken above it; an entry made invalid while its sequence
# stayed the same (a hilo_create of the name rolled back, a failed call
# that created a pool) was looked up again as if it were another sequence,
# and forgot it: an ID pushed back meanwhile, lower than the session's
# last, was its next. Both ways an entry is looked up again: alone
# (hilo_nextval_load), and with every sequence at once after many lookups
# (the preload, after 32).
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

my $node = hilo_node('rises', conf => "hilo.naptime = 100ms\n");
$node->safe_psql('postgres',
	"SELECT hilo_create('m' || i, block_size => 4, window_size => 100) FROM generate_series(1, 2) i;"
	  . " SELECT hilo_create('other' || i) FROM generate_series(1, 40) i");

for my $case ([ 'm1', 'looked up alone' ], [ 'm2', 'looked up with every sequence' ])
{
	my ($seq, $how) = @$case;
	my $s = $node->background_psql('postgres');
	my $last = $s->query_safe("SELECT max(hilo_nextval('$seq')) FROM generate_series(1, 20)");
	is($node->safe_psql('postgres', "SELECT hilo_push('$seq', '{[3,3]}')"),
		'1', "$seq: its 20 IDs handed out, 3 pushed back by another session");
	$node->poll_query_until('postgres', 'SELECT count(*) = 0 FROM hilo.free_ranges')
	  or die 'ID 3 never left the free list';
	$s->query_safe("BEGIN; SELECT hilo_drop('$seq'); SELECT hilo_create('$seq'); ROLLBACK");
	$s->query_safe("SELECT hilo_nextval('other' || i) FROM generate_series(1, 40) i")
	  if $seq eq 'm2';
	my $next = $s->query_safe("SELECT hilo_nextval('$seq')");
	cmp_ok($next, '>', $last,
		"$seq: after a drop and create rolled back, $how, the session's next ID ($next) is above its last ($last)");
	$s->quit;
}

$node->stop;
done_testing();
