# ordering => 'cluster': calls that backends send to the holder themselves
# (order/lease/lease_route.cpp), in batches over one connection
# (hilo.forward_connections = 1), while that connection's backend on the
# holder is stopped with SIGSTOP (the batch in flight hangs) and the calls
# waiting on the forwarding node (the one that leads the batch, and those
# whose tickets wait for it) are cancelled with pg_cancel_backend, then
# terminated with pg_terminate_backend. A cancelled or terminated caller
# gives its ticket up, or a leader fails its batch, and everything else
# goes the lease worker's way: the cancelled calls fail with 57014, the
# terminated ones lose their connection, nothing else fails, every call
# that returned is in order (no ID twice), and the node is served by its
# backends directly again afterwards.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IPC::Run;
use HiloTest;
use HiloCluster;
use HiloLinear;

my $conf = "hilo.claim_timeout = '6s'\nhilo.lease_time = '1s'\nhilo.clock_drift_bound = 10000\n"
  . "max_connections = 200\n";
my ($holder, @nodes) = cluster_serving('c', $conf);
ok($holder, 'a node holds the lease');
my ($f, $g) = grep { $_->name ne $holder->name } @nodes;
set_forward_connections($f, 1);
set_forward_connections($g, 0);

# Six recorded callers on f, and pgbench's six beside them in a tight loop
# so that the one connection is always busy and batches form.
my $dir = PostgreSQL::Test::Utils::tempdir;
my $h = linear_clients([ map { [ $f, $f->name . "_$_" ] } 1 .. 6 ], 'c',
	dir => $dir, seconds => 90, takes => 1, until_stopped => 1);
my ($bench, $bench_err) = start_nextval_bench($f, 'c', $dir, 6, 20);
sleep 2;

# Five times: the holder's backend of f's connection stopped for 1.5 s;
# meanwhile every recorded call of f that waits (wait event type
# Extension: a leader on the holder's answer, a follower on its leader) is
# cancelled (rounds 1-3) or terminated (rounds 4-5: pg_terminate_backend,
# a FATAL exit that runs no PG_CATCH, so the backend's exit callback fails
# a leader's batch and gives a follower's ticket up; without it the ring
# kept their slots for ever and f never called the holder directly again).
my ($stops, $cancelled, $terminated) = (0, 0, 0);
for my $round (1 .. 5)
{
	my $pid = $holder->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'hilo forward' LIMIT 1");
	if ($pid eq '')
	{
		usleep(300_000);
		next;
	}
	kill 'STOP', $pid;
	$stops++;
	my $how = $round <= 3 ? 'pg_cancel_backend' : 'pg_terminate_backend';
	my $until = time() + 1.5;
	while (time() < $until)
	{
		my $n = $f->safe_psql('postgres',
			"SELECT count(*) FILTER (WHERE $how(pid)) FROM pg_stat_activity"
			  . " WHERE application_name <> 'hilo_bench' AND wait_event_type = 'Extension'"
			  . " AND query LIKE '%hilo_%(''c''%' AND pid <> pg_backend_pid()");
		$round <= 3 ? ($cancelled += $n) : ($terminated += $n);
		usleep(20_000);
	}
	kill 'CONT', $pid;
	sleep 2;
}
my $t_end = time();
# f's backends call the holder directly again (over a new connection: the
# stopped one was given up, and its backend may not have gone yet): a
# 'hilo forward' backend on the holder ran a statement after the last stop.
my $direct = 0;
for (1 .. 30)
{
	$direct = $holder->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'hilo forward'"
		  . " AND query LIKE '%hilo._lease_forward%' AND state_change > to_timestamp($t_end)");
	last if $direct > 0;
	usleep(100_000);
}
cmp_ok($direct, '>=', 1, "f's backends call the holder directly again");
sleep 1;
linear_stop($h);
linear_wait($h);
ok($bench->finish, 'pgbench beside them ran without an error') or diag($$bench_err);
my ($ok, $failed) = linear_calls($h);
cmp_ok($stops, '>=', 2, "the holder's backend of f's connection was stopped $stops times");
cmp_ok($cancelled, '>', 0, "waiting calls were cancelled ($cancelled)");
cmp_ok($terminated, '>', 0, "waiting calls were terminated ($terminated)");
is(join("\n", linear_check($ok)), '', 'linearizable over ' . scalar(@$ok) . ' calls, no ID twice');
# A terminated call's client sees its connection end (and connects again).
my @other = grep {
	$_->{error} !~ /canceling statement due to user request|terminating connection due to administrator command|server closed the connection unexpectedly|no connection to the server/
} @$failed;
is(scalar(@other), 0, scalar(@$failed) . ' calls failed, every one cancelled or terminated')
  or diag(join("\n", map { "$_->{label}: $_->{error}" } @other[ 0 .. ($#other < 4 ? $#other : 4) ]));
my $late = grep { $_->{start} > $t_end } @$ok;
cmp_ok($late, '>', 10, "f was served after the last stop ($late calls)");

# A full ring: 150 callers on f, one connection (its leader), the holder's
# backend of it stopped. The ring keeps 128 tickets (HILO_ROUTE_RING)
# waiting for the stopped batch; a caller that finds it full goes the lease
# worker's way at once and is served while the others wait, until the
# batch times out (2 x a quarter of the lease time: 500 ms) and the
# waiting tickets go that way too. Completions in [0.1 s, 0.4 s] after the
# stop can only be calls that found the ring full.
$dir = PostgreSQL::Test::Utils::tempdir;
open my $fh, '>', "$dir/nextval.sql" or die $!;
print $fh "SELECT hilo_nextval('c');\n";
close $fh;
my ($bout, $berr) = ('', '');
my $many = IPC::Run::start(
	[ 'pgbench', '-n', '-c', 150, '-j', 2, '-T', 12, '-l', '--log-prefix', "$dir/ring",
	  '-f', "$dir/nextval.sql", $f->connstr('postgres') . ' application_name=hilo_bench' ],
	'>', \$bout, '2>', \$berr, IPC::Run::timeout(120));
$f->poll_query_until('postgres',
	"SELECT count(*) >= 150 FROM pg_stat_activity WHERE application_name = 'hilo_bench'")
  or die 'pgbench never had its 150 clients';
sleep 1;
my $pid = $holder->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE application_name = 'hilo forward' LIMIT 1");
isnt($pid, '', "the holder has f's connection");
my $stopped_at = time();
kill 'STOP', $pid;
sleep 1;
kill 'CONT', $pid;
$many->finish;
like($bout, qr/number of failed transactions: 0 /, 'the 150 callers: no call failed')
  or diag($berr);
my ($in_window, $total) = (0, 0);
for my $log (glob("$dir/ring.*"))
{
	open my $lf, '<', $log or die $!;
	while (<$lf>)
	{
		my @f = split ' ';
		my $end = $f[4] + $f[5] / 1e6;
		$total++;
		$in_window++ if $end > $stopped_at + 0.1 && $end < $stopped_at + 0.4;
	}
}
note("$total calls; $in_window ended 0.1 to 0.4 s after the stop");
cmp_ok($in_window, '>', 20,
	'callers that found the ring full were served through the worker while the batch hung');

$_->stop for @nodes;
done_testing();
