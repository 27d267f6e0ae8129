# An allocator whose commit waits for a synchronous standby that is gone
# must still end on pg_terminate_backend and on pg_ctl stop -m fast, as
# PostgreSQL's own backends do. Before the fix it
# ignored SIGTERM there: still waiting 20 s after pg_terminate_backend, and
# a fast shutdown waited for it. Its callers must then get an error, never
# IDs the standby did not confirm.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use HiloTest;

my $node = hilo_node('syncgone', init => { allows_streaming => 1 },
	conf => "log_min_messages = warning\n");
$node->safe_psql('postgres', "SELECT hilo_create('s')");
$node->safe_psql('postgres', "SELECT hilo_take('s', 5000)");    # starts the allocator

$node->safe_psql('postgres', "ALTER SYSTEM SET synchronous_standby_names = 'gone'");
$node->reload;
commits_wait_for_gone_standby($node, 'postgres', 'probe');

# Polls $sql (true/false) for up to $seconds; a bound far above what a
# prompt exit takes, only so that a wait that never ends fails the test.
sub within
{
	my ($seconds, $sql) = @_;
	my $deadline = time() + $seconds;
	while (time() < $deadline)
	{
		return 1 if $node->safe_psql('postgres', $sql) eq 't';
		usleep(100_000);
	}
	return 0;
}

my $allocator_waits = "SELECT count(*) = 1 FROM pg_stat_activity"
  . " WHERE backend_type = 'hilo allocator' AND wait_event = 'SyncRep'";
my $taker = $node->background_psql('postgres', on_error_stop => 0);
$taker->query_until(qr/taking/, "\\echo taking\nSELECT hilo_take('s', 5000);\n");
ok(within(60, $allocator_waits), 'a take makes the allocator wait for the standby');

$node->safe_psql('postgres', "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
	  . " WHERE backend_type = 'hilo allocator'");
if (!ok(within(20,
			"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'hilo allocator'"),
		'pg_terminate_backend ends the allocator waiting for the standby'))
{
	$taker->{run}->kill_kill;
	$node->stop('immediate');
	done_testing();
	exit;
}
$taker->query('SELECT 1');
like($taker->{stderr}, qr/synchronous standby did not confirm|allocator exited/,
	'the take got an error, not IDs the standby did not confirm');
$taker->quit;

# Again, now with pg_ctl stop -m fast.
$taker = $node->background_psql('postgres', on_error_stop => 0);
$taker->query_until(qr/taking/, "\\echo taking\nSELECT hilo_take('s', 5000);\n");
ok(within(60, $allocator_waits), 'again the allocator waits for the standby');
my $stopped = PostgreSQL::Test::Utils::system_log('pg_ctl', '-D', $node->data_dir, '-m', 'fast',
	'-t', '20', 'stop');
is($stopped, 0, 'pg_ctl stop -m fast ends it too');
$node->_update_pid(0) if $stopped == 0;
$taker->{run}->kill_kill;
ok(!$node->log_contains(qr/terminated by signal/), 'no server process died');
done_testing();
