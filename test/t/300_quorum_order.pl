# ordering => 'quorum' on three nodes: IDs that rise across the
# cluster. Clients on every node record each call's start, end and IDs on
# one clock; for any two calls, if a returned before b started, b's IDs are
# all above a's (test/perl/HiloLinear.pm checks every pair), and no ID comes
# twice. Checked with no fault, then while a node is killed with kill -9 and
# restarted, while a node is cut off by the TCP proxy, and with no majority
# at all (every call fails then; none returns an ID out of order).
#
# The same clients on a sequence with the default ordering ('none') break
# the order at once (each node hands out its own windows): the checker
# catches that, so it can fail.
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

my @nodes = cluster_nodes({ conf => "hilo.claim_timeout = '1s'\n" }, qw(n1 n2 n3));
my ($n1, $n2, $n3) = @nodes;
my $proxy = proxied_cluster(@nodes);

create_everywhere(\@nodes,
	'q' => "ordering => 'quorum'",
	plain => 'window_size => 1000, block_size => 10');
wait_for_windows(\@nodes, 'plain', 1);

# --- The checker itself: a history out of order, and one with an ID twice.
my @bad = linear_check([
	{ label => 'a', start => 1, end => 2, lo => 10, hi => 10 },
	{ label => 'b', start => 3, end => 4, lo => 5, hi => 5 } ]);
like($bad[0] // '', qr/^order: b returned 5\.\.5/, 'the checker finds a call below an earlier one');
@bad = linear_check([
	{ label => 'a', start => 1, end => 2, lo => 1, hi => 10 },
	{ label => 'b', start => 1, end => 2, lo => 10, hi => 12 } ]);
like($bad[0] // '', qr/^unique:/, 'the checker finds an ID twice');
# Seven calls inside a's IDs, and one inside b's: up to five named, then
# the count.
@bad = linear_check([
	{ label => 'a', start => 1, end => 2, lo => 1, hi => 100 },
	map({ { label => "c$_", start => 1, end => 2, lo => 10 * $_, hi => 10 * $_ + 1 } } 1 .. 7),
	{ label => 'b', start => 1, end => 2, lo => 200, hi => 210 },
	{ label => 'd', start => 1, end => 2, lo => 205, hi => 205 } ]);
is(join("\n", @bad), join("\n",
	(map { "unique: [1,101) on a and [@{[10 * $_]},@{[10 * $_ + 2]}) on c$_" } 1 .. 5),
	'unique: 8 overlaps in all'), 'the checker names five overlaps and counts them all');
is(scalar(linear_check([
	{ label => 'a', start => 1, end => 3, lo => 10, hi => 10 },
	{ label => 'b', start => 2, end => 4, lo => 5, hi => 5 } ])), 0,
	'overlapping calls may come in any order');

my $dir = PostgreSQL::Test::Utils::tempdir;
my @targets = linear_pairs(@nodes);

sub run_clients
{
	my ($seq, $seconds, $faults) = @_;
	return linear_run(\@targets, $seq, $seconds, dir => $dir, faults => $faults);
}

# --- 'none' breaks the order across nodes: the checker sees it.
my ($ok, $failed) = run_clients('plain', 3);
my @violations = linear_check($ok);
cmp_ok(scalar(@$ok), '>', 30, 'ordering none: ' . scalar(@$ok) . ' calls returned IDs');
ok((grep { /^order:/ } @violations), "ordering none: IDs do not rise across nodes ($violations[0])");
ok(!(grep { /^unique:/ } @violations), 'ordering none: no ID twice');

# --- 'quorum', no fault.
linear_no_fault_ok('quorum', run_clients('q', 4), \@nodes, 50, 5);

# --- The claim server (order/quorum/quorum_server.cpp) makes every claim of its
# node over connections it keeps: six sessions on n1 that each call in turn
# (each would lead its own batch without it) open no connection of their
# own to n2.
sub hilo_connections_on_n2
{
	return $n2->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'hilo'");
}
$n1->safe_psql('postgres', "SELECT hilo_nextval('q')");
my $conns_before = hilo_connections_on_n2();
my @sessions = map { dbi_session($n1, 'postgres') } 1 .. 6;
$_->selectrow_array("SELECT hilo_nextval('q')") for @sessions;
my $conns_after = hilo_connections_on_n2();
cmp_ok($conns_after - $conns_before, '<', 3,
	"claim server: six sessions' calls on n1 opened no connections of their own to n2 ($conns_before -> $conns_after)");
$_->disconnect for @sessions;

# --- 'quorum' under faults: kill -9 of n3 and restart; n2 cut off and back;
# no majority (n1 and n2 cut off); everything healed.
my %mark;
($ok, $failed) = run_clients('q', 20, sub {
	sleep 2;
	$mark{kill} = time();
	$n3->kill9;
	sleep 2;
	proxy_start_node($proxy, $n3, 'start');
	$mark{restarted} = time();
	sleep 2;
	$mark{cut} = time();
	proxy_isolate($proxy, 'n2');
	sleep 2;
	proxy_rejoin($proxy, 'n2');
	$mark{rejoined} = time();
	sleep 2;
	@mark{qw(no_majority healed)} = proxy_isolate_for($proxy, 3, 'n1', 'n2');
});
@violations = linear_check($ok);
is(join("\n", @violations), '', 'quorum under faults: linearizable over '
	  . scalar(@$ok) . ' calls, no ID twice (' . scalar(@$failed) . ' calls failed)');
my @while_killed = grep {
	$_->{label} =~ /^n[12]/ && $_->{start} > $mark{kill} + 0.5 && $_->{end} < $mark{restarted}
} @$ok;
cmp_ok(scalar(@while_killed), '>', 0,
	'quorum: n1 and n2 served while n3 was down (' . scalar(@while_killed) . ' calls)');
my @while_cut = grep {
	$_->{label} =~ /^n[13]/ && $_->{start} > $mark{cut} + 0.5 && $_->{end} < $mark{rejoined}
} @$ok;
cmp_ok(scalar(@while_cut), '>', 0,
	'quorum: n1 and n3 served while n2 was cut off (' . scalar(@while_cut) . ' calls)');
my @n2_cut = grep {
	$_->{label} =~ /^n2/ && $_->{start} > $mark{cut} + 0.2 && $_->{end} < $mark{rejoined}
} @$ok;
is(scalar(@n2_cut), 0, 'quorum: n2, cut off, served no call');
my @no_majority = grep {
	$_->{start} > $mark{no_majority} + 0.2 && $_->{end} < $mark{healed}
} @$ok;
is(scalar(@no_majority), 0, 'quorum: with no majority no call returned IDs');
my @failed_then = grep {
	$_->{start} > $mark{no_majority} + 0.2 && $_->{end} < $mark{healed}
} @$failed;
cmp_ok(scalar(@failed_then), '>', 0, 'quorum: calls failed clearly with no majority')
  and like($failed_then[0]{error}, qr/majority|register|reach/i, "the error says why: $failed_then[0]{error}");
# A 'quorum' sequence has no open windows: no error may say they still work.
my @about_windows = grep { $_->{error} =~ /open window/ } @$failed;
is(scalar(@about_windows), 0, 'quorum: no error speaks of open windows')
  or diag $about_windows[0]{error};
my @after = grep { $_->{start} > $mark{healed} + 2 } @$ok;
cmp_ok(scalar(@after), '>', 0, 'quorum: served again after the heal');

# --- Pushes are refused; a take is one range.
my ($ret, $out, $err) = $n1->psql('postgres', "SELECT hilo_push('q', '{[1,1]}')");
like($err, qr/cannot push IDs to hilo sequence "q": it is ordered across the cluster/,
	'quorum: pushes are refused');
is($n2->safe_psql('postgres', "SELECT count(*) FROM unnest(hilo_take('q', 1000))"), '1',
	'quorum: a take of 1000 is one range');

proxy_stop($proxy);
done_testing();
