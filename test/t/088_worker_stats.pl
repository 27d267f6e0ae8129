# What the allocator's transactions do to hilo's tables reaches the
# cumulative statistics while it runs, as a backend's does when idle, so
# that autovacuum sees the dead rows it leaves (every window claimed updates
# hilo.sequences and hilo.windows). A background worker's counts are kept
# back until it exits unless it reports them: with an allocator that never
# went idle, pg_stat_all_tables showed no change to hilo.windows, and
# autovacuum never vacuumed it for that work.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;

# Small windows: takes make the allocator claim (update) windows often.
my $node = hilo_node('worker_stats',
	conf => "hilo.naptime = 100ms\nhilo.allocator_idle_timeout = 1h\n");
$node->safe_psql('postgres', "SELECT hilo_create('s', window_size => 100, block_size => 10)");
my $stats = q{SELECT coalesce(n_tup_ins + n_tup_upd + n_tup_del, 0) FROM pg_stat_all_tables
	WHERE schemaname = 'hilo' AND relname = 'windows'};
my $before = $node->safe_psql('postgres', $stats);
$node->safe_psql('postgres', join('', map { "SELECT hilo_take('s', 50);\n" } 1 .. 200));
my $pid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'hilo allocator'");
ok($pid, "the allocator runs (pid $pid)");
ok( $node->poll_query_until('postgres', "SELECT ($stats) >= $before + 100", 't'),
	'its changes to hilo.windows show in pg_stat_all_tables while it runs');
is($node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'hilo allocator'"),
	$pid, '... the same allocator, still running');
$node->stop;
done_testing();
