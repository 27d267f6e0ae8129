# A take abandoned after the allocator reserved it goes back to the free
# list; while a session holds hilo_push's lock on that sequence, the return
# waits. The list of such returns once lived in memory that the allocator's
# transaction freed: further takes of other sequences crashed the allocator
# (signal 11, every session of every database restarted), and the
# abandoned IDs were lost.
#
# An unprivileged role holds a push open on its sequence s1. One of its
# takes of s1 is abandoned for certain: the allocator's commit waits for a
# synchronous standby that does not exist, and the take's own
# statement_timeout ends it; then the standby requirement goes away and the
# commit completes. Then several sessions take s1 (with statement_timeouts
# of 1 to 6 ms, which abandon more takes), take s2 and call hilo_nextval
# for a while. The server must not restart, no ID may be received twice,
# and once the push commits, the abandoned take's IDs are on the free list.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use HiloTest;
use HiloRanges;
use HiloStorm;

my $node = hilo_node('abandoned', init => { allows_streaming => 1 },
	conf => "hilo.naptime = 100ms\nmax_connections = 40\nlog_min_messages = warning\n");
$node->safe_psql('postgres', 'CREATE ROLE alice LOGIN');
my $alice = $node->connstr('postgres') . ' user=alice';
$node->safe_psql('postgres', "SELECT hilo_create('s1'), hilo_create('s2')",
	extra_params => [ '-U', 'alice' ]);
my $s1 = $node->safe_psql('postgres', "SELECT seq_id FROM hilo.sequences WHERE name = 's1'");

# The push, held open.
my $pusher = $node->background_psql('postgres', extra_params => [ '-U', 'alice' ]);
$pusher->query_safe('BEGIN');
$pusher->query_safe("SELECT hilo_push('s1', hilo_take('s1', 2000))");

# Commits of the allocator now wait for a standby that never comes.
$node->safe_psql('postgres', "ALTER SYSTEM SET synchronous_standby_names = 'nobody'");
$node->reload;
# (statement_timeout does not end a commit's wait; a cancel does.)
my $probe = $node->background_psql('postgres', on_error_stop => 0);
$probe->query_until(qr/probing/, "\\echo probing\nCREATE TABLE probe ();\n");
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
	  . " AND backend_type = 'client backend'"),
	'commits wait for the synchronous standby');
$node->safe_psql('postgres',
	"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'");
$probe->quit;

my $lowest = $node->safe_psql('postgres',
	"SELECT min(next_hi_value) FROM hilo.windows WHERE seq_id = $s1"
	  . ' AND next_hi_value < window_end_value');
my ($ret, $out, $err) = $node->psql('postgres',
	"SET statement_timeout = '1s'; SELECT hilo_take('s1', 5000)",
	extra_params => [ '-U', 'alice' ]);
like($err, qr/statement timeout/, 'the take was cut short by its statement_timeout');
is($node->safe_psql('postgres',
	"SELECT wait_event FROM pg_stat_activity WHERE backend_type = 'hilo allocator'"),
	'SyncRep', 'while the allocator waited for the standby after reserving it');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET synchronous_standby_names');
$node->reload;
$node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'hilo allocator'"
	  . " AND wait_event = 'SyncRep'")
  or die 'the allocator still waits for the standby';

# Load: takes of s1 cut short at random, takes of s2, nextval of s2. The
# takes of s1 are all larger than a block: s1 gets no pool, which would
# draw the free list in once the push commits.
my $dir = PostgreSQL::Test::Utils::tempdir;
my @ledgers = map { "$dir/c$_" } 1 .. 4;
my @pids = (
	storm_client(conninfo => $alice, name => 'c1', ledger => $ledgers[0], seconds => 8,
		calls => [ [ 1, 'take', 's1', 20000, 1001 ] ],
		timeouts => [ '1ms', '2ms', '3ms', '4ms', '5ms', '6ms' ]),
	storm_client(conninfo => $alice, name => 'c2', ledger => $ledgers[1], seconds => 8,
		calls => [ [ 1, 'take', 's2', 20000 ] ]),
	storm_client(conninfo => $alice, name => 'c3', ledger => $ledgers[2], seconds => 8,
		calls => [ [ 1, 'take', 's2', 5000 ], [ 1, 'nextval', 's2', 50 ] ]),
	storm_client(conninfo => $alice, name => 'c4', ledger => $ledgers[3], seconds => 8,
		calls => [ [ 1, 'take', 's1', 3000, 1001 ] ], timeouts => [ '2ms', '5ms', '0' ]));
storm_wait(60, @pids);

ok(!$node->log_contains(qr/terminated by signal|server process .* was terminated/),
	'no server process died');
my $got = storm_ledgers(@ledgers);
ok(@{ $got->{s2} // [] } > 10, scalar(@{ $got->{s2} // [] }) . ' takes of s2 received');
for my $seq ('s1', 's2')
{
	is(first_overlap(@{ $got->{$seq} // [] }), undef, "no ID of $seq received twice");
}

# The push commits: its lock goes, and what was abandoned comes back.
$pusher->query_safe('COMMIT');
$pusher->quit;
my $hi = $lowest + 5000;
ok($node->poll_query_until('postgres',
	"SELECT coalesce(sum(least(last_id + 1, $hi) - greatest(first_id, $lowest)), 0) = 5000"
	  . " FROM hilo.free_ranges WHERE seq_id = $s1 AND last_id >= $lowest AND first_id < $hi"),
	"the abandoned take's IDs [$lowest,$hi) are back on the free list");
my @free = parse_multirange($node->safe_psql('postgres',
	"SELECT range_agg(int8range(first_id, last_id + 1)) FROM hilo.free_ranges"
	  . " WHERE seq_id = $s1"));
is(first_overlap(@{ $got->{s1} // [] }, @free), undef,
	'no ID of s1 both received and on the free list');
ok(!$node->log_contains(qr/terminated by signal/), 'still no server process died');
$node->stop;
done_testing();
