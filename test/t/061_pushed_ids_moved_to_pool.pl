# IDs pushed back to a sequence whose pool serves hilo_nextval are moved
# into the pool by the allocator, with nobody calling anything: the push's
# commit marks the pool (alloc/pool_state.cpp) and wakes the allocator,
# which looks at the marked pools before its next batch. It skips that look
# while no pool was marked since its last one (alloc/pool_refill.cpp); each
# round here marks the pool again after the allocator has gone idle, and
# each time the free list must empty into the pool.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

my $node = hilo_node('pushmoved');
$node->safe_psql('postgres', "SELECT hilo_create('n')");
my $free = "SELECT count(*) = 0 FROM hilo.free_ranges JOIN hilo.sequences USING (seq_id)
             WHERE name = 'n'";

for my $round (1 .. 4) {
	# The pool serves hilo_nextval.
	$node->safe_psql('postgres', "SELECT hilo_nextval('n') FROM generate_series(1, 3)");
	# Nothing pending: the allocator's last look left no pool marked.
	sleep 1;
	$node->safe_psql('postgres', "SELECT hilo_push('n', hilo_take('n', 5))");
	ok($node->poll_query_until('postgres', $free, 't'),
		"round $round: the pushed IDs moved into the pool")
	  or diag($node->safe_psql('postgres', "SELECT * FROM hilo.free_ranges"));
}
$node->stop;
done_testing();
