# No take may wait on a request slot or a buffer that nobody will release.
#
# A backend's request slot is its process slot: the next process to get
# that slot, in any database, uses it. If a caller abandons its request
# after the allocator that served it has gone (terminated, or stopped by
# DROP DATABASE ... WITH (FORCE)), nobody will ever clear the slot; the
# next backend with that process slot waited for it forever (one stuck for
# minutes, others hit statement_timeout on their first take).
#
# Made deterministic here: the allocator's commit waits for a synchronous
# standby that does not exist while a caller in database d1 waits for its
# take; the caller is stopped (SIGSTOP), the standby requirement goes, the
# allocator publishes the reply into the slot of the stopped caller, then
# the allocator goes (terminated / DROP DATABASE d1 WITH (FORCE)), and the
# caller, resumed, dies on its pending SIGTERM with its request abandoned.
# The next new session takes from another database, with a
# statement_timeout as the bound: it must get its IDs.
#
# Also: a take right after the allocator was terminated, while another
# session idles holding a buffer, is served by a new allocator (the old
# one waited 5 s for the buffer before it went).
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use HiloTest;

my $node = hilo_node('slotleft', init => { allows_streaming => 1 },
	conf => "log_min_messages = warning\n");
$node->safe_psql('postgres', "SELECT hilo_create('s')");

sub set_standby
{
	my ($names) = @_;
	$node->safe_psql('postgres',
		$names ? "ALTER SYSTEM SET synchronous_standby_names = '$names'"
		: 'ALTER SYSTEM RESET synchronous_standby_names');
	$node->reload;
}

sub allocator_pid
{
	my ($db) = @_;
	return $node->safe_psql('postgres', "SELECT pid FROM pg_stat_activity"
		  . " WHERE backend_type = 'hilo allocator' AND datname = '$db'");
}

my $probes = 0;

# Leaves a caller in $db stopped with the reply to its take in its slot;
# returns the caller's pid.
sub stopped_caller_with_reply
{
	my ($db) = @_;
	$node->safe_psql($db, "SELECT hilo_take('s', 5000)");    # its allocator runs
	set_standby('gone');
	$probes++;
	commits_wait_for_gone_standby($node, $db, "probe_$probes");

	my $caller = $node->background_psql($db, on_error_stop => 0);
	my $pid = $caller->query_safe('SELECT pg_backend_pid()');
	$caller->query_until(qr/taking/, "\\echo taking\nSELECT hilo_take('s', 5000);\n");
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'hilo allocator'"
		  . " AND datname = '$db' AND wait_event = 'SyncRep'")
	  or die 'the allocator does not wait for the standby';
	kill 'STOP', $pid or die "cannot stop $pid";
	set_standby(undef);
	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
	  or die 'the allocator still waits';
	return ($pid, $caller);
}

sub wait_gone
{
	my ($pid) = @_;
	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid")
	  or die "process $pid did not exit";
}

# The next sessions (the first gets the freed process slot) take with a
# bound; each must get its IDs.
sub next_sessions_take
{
	my ($db, $what) = @_;
	my $ok = 1;
	for my $i (1 .. 3)
	{
		my ($ret, $out, $err) = $node->psql($db,
			"SET statement_timeout = '20s'; SELECT hilo_take('s', 5000)");
		$ok = 0 unless $ret == 0 && $out =~ /^\{\[/;
		diag("take $i: $err") if $ret != 0;
	}
	ok($ok, $what);
}

$node->safe_psql('postgres', 'CREATE DATABASE d1');
$node->safe_psql('postgres', 'CREATE DATABASE d2');
for my $db ('d1', 'd2')
{
	$node->safe_psql($db, 'CREATE EXTENSION hilo');
	$node->safe_psql($db, "SELECT hilo_create('s')");
}

# 1. The allocator is terminated.
my ($pid, $caller) = stopped_caller_with_reply('d1');
my $allocator = allocator_pid('d1');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($allocator), pg_terminate_backend($pid)");
wait_gone($allocator);
kill 'CONT', $pid;
wait_gone($pid);
$caller->{run}->kill_kill;
next_sessions_take('d2',
	'after a terminated allocator left a slot abandoned, new sessions of another database take');

# 2. DROP DATABASE d1 WITH (FORCE) stops the allocator and the caller.
($pid, $caller) = stopped_caller_with_reply('d1');
$allocator = allocator_pid('d1');
my $dropper = $node->background_psql('postgres', on_error_stop => 0);
$dropper->query_until(qr/dropping/, "\\echo dropping\nDROP DATABASE d1 WITH (FORCE);\n");
wait_gone($allocator);
kill 'CONT', $pid;
wait_gone($pid);
$caller->{run}->kill_kill;
my ($dropped) = $dropper->query('SELECT 1');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = 'd1'"),
	'0', 'd1 was dropped');
$dropper->quit;
next_sessions_take('d2',
	'after DROP DATABASE ... WITH (FORCE) left a slot abandoned, new sessions of another database take');

# 3. A buffer held by an idle session does not hold up the next allocator.
my $idle = $node->background_psql('d2');
$idle->query_safe("SELECT hilo_nextval('s')");
$allocator = allocator_pid('d2');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($allocator)");
my ($ret, $out, $err) = $node->psql('d2',
	"SET statement_timeout = '4s'; SELECT hilo_take('s', 5000)");
is($ret, 0, 'a take right after the allocator was terminated does not wait for an idle buffer')
  or diag($err);
$idle->quit;
ok(!$node->log_contains(qr/terminated by signal/), 'no server process died');
$node->stop;
done_testing();
