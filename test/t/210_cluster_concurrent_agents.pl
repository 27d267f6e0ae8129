# Two agents started at the same moment against the same nodes: no worker
# runs; hilo_agent_run() starts on n1 and on n2 at one instant (both wait for
# the same clock time), round after round, with new sequences each round so
# that both carry them and both claim windows for all three nodes at once.
# The windows must never overlap, whoever won each claim. Then two
# membership changes start at the same moment on two nodes: the nodes must
# end with one configuration, holding exactly the changes that succeeded.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time);
use HiloTest;
use HiloRanges;
use HiloCluster;

my @nodes = cluster_nodes({ agent => 0 }, map { "c$_" } 1 .. 3);
my ($c1, $c2, $c3) = @nodes;
form_cluster(@nodes);

# Runs hilo_agent_run() on each given node, all starting at the same clock
# time; returns, per node, [start, end, message].
sub agents_at_once
{
	my (@on) = @_;
	my $at = sprintf('%.3f', time + 0.8);
	my (@h, @out);
	for my $i (0 .. $#on)
	{
		$out[$i] = '';
		push @h, IPC::Run::start(
			[
				'psql', '-XAtq', '-d', node_conninfo($on[$i]), '-c',
				"SELECT pg_sleep_until(to_timestamp($at));"
				  . " SELECT extract(epoch FROM clock_timestamp()), hilo_agent_run(),"
				  . " extract(epoch FROM clock_timestamp())"
			],
			'>', \$out[$i], '2>', \$out[$i]);
	}
	$_->finish for @h;
	# The last line holds the answer (pg_sleep_until prints an empty one).
	return map { [ split /\|/, (grep { /\S/ } split /\n/, $out[$_])[-1] // '' ] } 0 .. $#on;
}

# Each round: new sequences on c1, and the agents of all three nodes at once.
my ($rounds, $per_round, $overlapping, $failed, $retried) = (8, 12, 0, 0, 0);
for my $round (1 .. $rounds)
{
	my $create = join ';', map {
		"SELECT hilo_create('r${round}_s$_', window_size => 100, min_open_windows => 4)"
	} 1 .. $per_round;
	$c1->safe_psql('postgres', $create);
	my @on = ($c1, $c2, $c3);
	my @runs = agents_at_once(@on);
	for my $i (0 .. $#runs)
	{
		my $r = $runs[$i];
		$failed++ unless defined $r->[1] && $r->[1] =~ /nodes answered/;
		$retried += $1 if defined $r->[1] && $r->[1] =~ /(\d+) of \d+ claims were outvoted/;
		note("round $round: " . $on[$i]->name . " [$r->[0], $r->[2]] " . ($r->[1] // ''));
	}
	my ($a, $b) = @runs;
	$overlapping++ if defined $a->[2] && defined $b->[2]
	  && $a->[0] < $b->[2] && $b->[0] < $a->[2];
}
is($failed, 0, 'every agent run succeeded');
cmp_ok($overlapping, '>=', $rounds / 2,
	"the agents ran at the same time ($overlapping of $rounds rounds)");

# Whether the timed rounds above collide in the register depends on the
# scheduler. A forced round makes the agents collide: c2 and c3 hold their
# register stamp row, which every register call locks, so the read requests
# of both agents queue up there. Once both agents wait on both nodes, the
# locks go: both agents read the same values (a majority needs c2 or c3) and
# ask every node to set the same levels. A node accepts one set per level,
# so the agent whose sets arrive second is outvoted and retries. That needs
# the second agent's read on c2 to run before the first agent's set there;
# on a busy machine the first agent can get that far first, read for read,
# and the round sees no collision (CI saw it once in many runs). So a round
# without a collision is run again with new sequences, up to 5 times.
sub forced_round
{
	my ($attempt) = @_;
	$c1->safe_psql('postgres', join ';',
		map { "SELECT hilo_create('forced${attempt}_s$_', window_size => 100, min_open_windows => 4)" }
		  1 .. $per_round);
	my @holders;
	for my $node ($c2, $c3)
	{
		my $h = $node->background_psql('postgres');
		$h->query_safe('BEGIN');
		is($h->query_safe('SELECT count(*) FROM (SELECT 1 FROM hilo.local_node FOR UPDATE) s'),
			1, "forced round $attempt: " . $node->name . ' holds its register stamp row');
		push @holders, $h;
	}
	my (@forced, @forced_out);
	for my $i (0, 1)
	{
		$forced_out[$i] = '';
		push @forced, IPC::Run::start(
			[ 'psql', '-XAtq', '-d', node_conninfo($nodes[$i]), '-c', 'SELECT hilo_agent_run()' ],
			'>', \$forced_out[$i], '2>', \$forced_out[$i]);
	}
	for my $node ($c2, $c3)
	{
		ok( $node->poll_query_until(
				'postgres', "SELECT count(*) >= 2 FROM pg_stat_activity
				 WHERE query LIKE '%hilo._register_handle(%' AND wait_event_type = 'Lock'"),
			"forced round $attempt: both agents wait for " . $node->name . ' in the register');
	}
	$_->query_safe('COMMIT') for @holders;
	$_->quit for @holders;
	$_->finish for @forced;
	my $outvoted = 0;
	for my $i (0, 1)
	{
		note("forced round $attempt: " . $nodes[$i]->name . ": $forced_out[$i]");
		$outvoted += $1 if $forced_out[$i] =~ /(\d+) of \d+ claims were outvoted/;
		like($forced_out[$i], qr/nodes answered/,
			"forced round $attempt: agent on " . $nodes[$i]->name . ' succeeded');
	}
	return $outvoted;
}
my ($forced_retried, $forced_rounds) = (0, 0);
while ($forced_retried == 0 && $forced_rounds < 5)
{
	$forced_rounds++;
	$forced_retried = forced_round($forced_rounds);
}
cmp_ok($forced_retried, '>', 0,
	"forced rounds: $forced_retried claims were outvoted and retried (in round $forced_rounds of at most 5)");
$retried += $forced_retried;
# The agents' claims really collided in the register: claims outvoted and
# retried, as the agents report them, and register rows last set by a
# second or later attempt.
my $rows = 0;
$rows += $_->safe_psql('postgres', 'SELECT count(*) FROM hilo.register WHERE attempt > 1')
  for @nodes;
cmp_ok($retried + $rows, '>', 0,
	"claims collided: $retried claims retried after being outvoted; $rows register rows set by a retry");

my @windows = all_windows(@nodes);
is(check_windows_disjoint(@windows), undef,
	'two agents at once never produced overlapping windows (' . scalar(@windows) . ' windows)');
my %per;
$per{"$_->[2] $_->[3]"}++ for @windows;
my @short = grep { ($per{$_} // 0) < 4 } map {
	my $n = $_->name;
	(map { my $r = $_; map { "$n r${r}_s$_" } 1 .. $per_round } 1 .. $rounds),
	  map { my $f = $_; map { "$n forced${f}_s$_" } 1 .. $per_round } 1 .. $forced_rounds
} @nodes;
is(scalar @short, 0, 'every node has at least min_open_windows of every sequence')
  or diag("short: @short");
my $extra = grep { $_ > 4 } values %per;
note("$extra (node, sequence) pairs got more than 4 windows: both agents supplied them");

# Takes on all three nodes (of one sequence), from what the agents installed: unique.
for my $node (@nodes)
{
	$node->safe_psql('postgres', join ';',
		map { "INSERT INTO taken (r) SELECT unnest(hilo_take('r1_s1', 70))" } 1 .. 5);
}
is(first_overlap(collect_taken(@nodes)), undef, 'IDs taken on the three nodes are unique');

# Two membership changes started at the same moment from two nodes.
my ($c4, $c5) = cluster_nodes({ agent => 0 }, qw(c4 c5));
my $at = sprintf('%.3f', time + 1);
my (@h, @out);
for my $pair ([ $c1, $c4 ], [ $c2, $c5 ])
{
	my ($via, $new) = @$pair;
	my $i = scalar @h;
	$out[$i] = '';
	my $conninfo = node_conninfo($new);
	push @h, IPC::Run::start(
		[
			'psql', '-XAtq', '-d', node_conninfo($via), '-c',
			"SELECT pg_sleep_until(to_timestamp($at))", '-c',
			"SELECT hilo_add_node('" . $new->name . "', \$\$$conninfo\$\$)"
		],
		'>', \$out[$i], '2>', \$out[$i]);
}
$_->finish for @h;
s/^\s+|\s+$//g for @out;
note("c1 adding c4: $out[0]");
note("c2 adding c5: $out[1]");
my @added = grep { $out[ $_->[0] ] =~ /^\d+$/m } ([ 0, 'c4' ], [ 1, 'c5' ]);
cmp_ok(scalar @added, '>=', 1, 'at least one of two simultaneous changes succeeded');
my $expected = join ',', sort('c1', 'c2', 'c3', map { $_->[1] } @added);
for my $node ($c1, $c2, $c3)
{
	$node->safe_psql('postgres', 'SELECT hilo_agent_run()');
}
my %configs = map {
	$_->name => $_->safe_psql('postgres', 'SELECT epoch, config FROM hilo.cluster')
} $c1, $c2, $c3;
is(scalar(keys %{ { map { $_ => 1 } values %configs } }), 1,
	'the three first nodes hold the same configuration');
is($c1->safe_psql('postgres', "SELECT string_agg(name, ',' ORDER BY name) FROM hilo.nodes"),
	$expected, "it holds exactly the changes that succeeded ($expected)");

done_testing();
