# ordering => 'cluster' on three nodes: one node holds a lease
# recorded through the lease register and serves IDs from memory; the
# others forward their callers' calls to it. Clients on every node record
# each call's start, end and IDs on one clock; for any two calls, if a
# returned before b started, b's IDs are all above a's (test/perl/
# HiloLinear.pm checks every pair), and no ID comes twice. Checked with no
# fault, then while the holder is killed with kill -9 and restarted, while
# the (new) holder is cut off by the TCP proxy, while the holder is paused
# with SIGSTOP for 6 times the lease, and with no majority at all
# (calls fail then, none returns an ID out of order).
#
# The same clients on a sequence with the default ordering ('none') break
# the order at once: the checker catches that, so it can fail.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use HiloTest;
use HiloCluster;
use HiloProxy;
use HiloLinear;

my $conf = "hilo.claim_timeout = '5s'\nhilo.lease_time = '1s'\nhilo.clock_drift_bound = 10000\n";
my @nodes = cluster_nodes({ conf => $conf }, qw(n1 n2 n3));
my ($n1, $n2, $n3) = @nodes;
my $proxy = proxied_cluster(@nodes);

create_everywhere(\@nodes,
	c => "ordering => 'cluster', window_size => 1000",
	plain => 'window_size => 1000, block_size => 10');
wait_for_windows(\@nodes, 'plain', 1);
is($n2->safe_psql('postgres', "SELECT ordering FROM hilo.sequences WHERE name = 'c'"),
	'cluster', "the ordering reached n2");

# The node that holds the lease of 'c' as a majority recorded it.
sub holder { return lease_holder(\@nodes, 'c') }

my $dir = PostgreSQL::Test::Utils::tempdir;
my @targets = linear_pairs(@nodes);

sub run_clients
{
	my ($seq, $seconds, $faults, %opts) = @_;
	return linear_run(\@targets, $seq, $seconds, dir => $dir, faults => $faults, %opts);
}

# The postmaster of a node and every process it started.
sub served_by
{
	my ($calls, $re, $from, $to) = @_;
	return grep { $_->{label} =~ $re && $_->{start} > $from && $_->{end} < $to } @$calls;
}

# --- 'none' breaks the order across nodes: the checker sees it.
my ($ok, $failed) = run_clients('plain', 3);
my @violations = linear_check($ok);
cmp_ok(scalar(@$ok), '>', 30, 'ordering none: ' . scalar(@$ok) . ' calls returned IDs');
ok((grep { /^order:/ } @violations), "ordering none: IDs do not rise across nodes ($violations[0])");

# --- 'cluster', no fault.
linear_no_fault_ok('cluster', run_clients('c', 5), \@nodes, 30, 20);
ok(defined holder(), 'cluster: a majority recorded a holder: ' . (holder() ? holder()->name : 'none'));

# --- The holder killed (kill -9 of the postmaster and every process of the
# node at once) and restarted; the next holder cut off by
# the proxy and healed; then a holder paused with SIGSTOP for 6 s (the
# lease is 1 s): its monotonic clock runs on while it is stopped, so when
# it goes on it finds its lease over and serves nothing more.
my %mark;
my ($h1, $h2, $h3);
$mark{start} = time();
# The clients run until 5 s after the last fault (the checks below want
# calls that start 3 s after it), 90 s at most: a loaded machine slows the
# schedule down.
($ok, $failed) = run_clients('c', 90, sub {
	sleep 2;
	$h1 = holder();
	my @pids = node_pids($h1);
	$mark{kill} = time();
	kill 'KILL', @pids;
	$h1->{_pid} = undef;    # as PostgreSQL::Test::Cluster's kill9 leaves it
	# A takeover needs about 2 lease times, more when two nodes try at once
	# or the machine is loaded.
	sleep 8;
	proxy_start_node($proxy, $h1, 'start');
	$mark{restarted} = time();
	sleep 2;
	$h2 = holder();
	$mark{cut_log} = -s $h2->logfile;
	$mark{cut} = time();
	proxy_isolate($proxy, $h2->name);
	sleep 8;
	proxy_rejoin($proxy, $h2->name);
	$mark{rejoined} = time();
	sleep 3;
	$h3 = holder();
	@pids = node_pids($h3);
	$mark{stop_log} = -s $h3->logfile;
	$mark{stop} = time();
	kill 'STOP', @pids;
	sleep 6;
	kill 'CONT', @pids;
	$mark{cont} = time();
}, then => 5);
@violations = linear_check($ok);
is(join("\n", @violations), '', 'cluster under faults: linearizable over '
	  . scalar(@$ok) . ' calls, no ID twice (' . scalar(@$failed) . ' calls failed)');
my ($name1, $name2, $name3) = map { $_->name } ($h1, $h2, $h3);
isnt($name2, $name1, "a new holder after $name1 was killed: $name2");
# (Calls that start within a few ms of the kill may still be answered by
# the dying holder: the failover is measured from calls made 0.1 s later.)
my @after_kill = sort { $a->{end} <=> $b->{end} }
  grep { $_->{label} !~ /^$name1/ && $_->{start} > $mark{kill} + 0.1 } @$ok;
ok(@after_kill && $after_kill[0]{end} < $mark{restarted},
	'cluster: served again while the old holder was down');
note(sprintf('holder killed -> first ID from the next holder: %.2f s (%s, started %.3f s after the kill, IDs %s..%s)',
		$after_kill[0]{end} - $mark{kill}, $after_kill[0]{label},
		$after_kill[0]{start} - $mark{kill}, $after_kill[0]{lo}, $after_kill[0]{hi})) if @after_kill;
# For the record: the calls that ended around the kill.
my @around = grep { $_->{end} > $mark{kill} - 0.02 } sort { $a->{end} <=> $b->{end} } @$ok;
for my $c (@around[ 0 .. ($#around < 14 ? $#around : 14) ])
{
	note(sprintf('around the kill: %s [%+.3f, %+.3f] %s..%s', $c->{label},
			$c->{start} - $mark{kill}, $c->{end} - $mark{kill}, $c->{lo}, $c->{hi}));
}
my @while_cut = served_by($ok, qr/^(?!$name2)/, $mark{cut} + 0.2, $mark{rejoined});
cmp_ok(scalar(@while_cut), '>', 0,
	"cluster: the other nodes served while the holder $name2 was cut off ("
	  . scalar(@while_cut) . ' calls)');
my @cut_off = served_by($ok, qr/^$name2/, $mark{cut} + 1.5, $mark{rejoined});
is(scalar(@cut_off), 0, "cluster: $name2, cut off, served nothing once its lease ran out");
my @while_stopped = served_by($ok, qr/^(?!$name3)/, $mark{stop} + 0.2, $mark{cont});
cmp_ok(scalar(@while_stopped), '>', 0,
	"cluster: the others served while $name3 was stopped (" . scalar(@while_stopped) . ' calls)');
# Each holder that stopped serving said why (lease_worker.cpp, log_lease_end).
like(slurp_file($h2->logfile, $mark{cut_log}),
	qr/no longer serving sequence "c"\n.*DETAIL:  Its lease ran out \d+ ms after its last granted renewal was sent[;,] /,
	"$name2, cut off, logged that its lease ran out without a granted renewal");
my ($stall) = slurp_file($h3->logfile, $mark{stop_log})
  =~ /no longer serving sequence "c"\n.*DETAIL:  .* this worker went up to (\d+) ms between two passes\./;
cmp_ok($stall // 0, '>=', 5000, "$name3, stopped for 6 s, logged its worker's longest pause: "
	  . ($stall // 'none') . ' ms');
my @after = grep { $_->{start} > $mark{cont} + 3 } @$ok;
note(sprintf('the fault schedule ended %.1f s after the clients started', $mark{cont} - $mark{start}));
cmp_ok(scalar(@after), '>', 0, 'cluster: served after the pause');

# --- No majority: two nodes cut off for longer than hilo.claim_timeout.
# Nothing is served (once the lease ran out); calls fail clearly.
($ok, $failed) = run_clients('c', 14, sub {
	sleep 2;
	@mark{qw(no_majority healed)} = proxy_isolate_for($proxy, 9, 'n1', 'n2');
});
@violations = linear_check($ok);
is(join("\n", @violations), '', 'cluster with no majority: linearizable, no ID twice');
my @no_majority = served_by($ok, qr/./, $mark{no_majority} + 1.5, $mark{healed});
is(scalar(@no_majority), 0, 'cluster: with no majority no call returned IDs');
my @failed_then =
  grep { $_->{start} > $mark{no_majority} && $_->{start} < $mark{healed} } @$failed;
cmp_ok(scalar(@failed_then), '>', 0, 'cluster: calls failed with no majority')
  and like($failed_then[0]{error}, qr/no node served the call within hilo.claim_timeout/,
	"the error says why: $failed_then[0]{error}");

# --- Pushes are refused; a take is one range, on the holder and forwarded.
my ($ret, $out, $err) = $n1->psql('postgres', "SELECT hilo_push('c', '{[1,1]}')");
like($err, qr/cannot push IDs to hilo sequence "c": it is ordered across the cluster/,
	'cluster: pushes are refused');
$n1->poll_query_until('postgres', "SELECT hilo_nextval('c') > 0") or die 'not served again';
for my $node (@nodes)
{
	is($node->safe_psql('postgres', "SELECT count(*) FROM unnest(hilo_take('c', 5000))"), '1',
		'cluster: a take of 5000 is one range on ' . $node->name);
}

# For docs/multi-node.md: what a caller sees, and the lease cells.
for my $node (@nodes)
{
	note('on ' . $node->name . ': ' . $node->safe_psql('postgres',
		"SELECT hilo_node_id() AS node, hilo_nextval('c') AS nextval, hilo_take('c', 3) AS take",
		extra_params => [ '-P', 'footer=off', '-A', '-F', ' | ' ]));
}
note("the cells on n1:\n" . $n1->safe_psql('postgres',
	'SELECT seq, ballot >> 16 AS round, ballot & 65535 AS by_node, holder, bound'
	  . ' FROM hilo.lease_cells',
	extra_params => [ '-P', 'footer=off', '-A', '-F', ' | ' ]));

proxy_stop($proxy);
done_testing();
