# Five nodes, the agent worker on each, pgbench takes on each. One node is
# stopped with stop('immediate') and restarted during the load; then two
# nodes (a minority) are stopped and the other three keep serving takes,
# including ones that need new windows from the register. At the end every
# ID any node returned is unique and no two nodes' windows overlap.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use HiloTest;
use HiloRanges;
use HiloCluster;

my $seconds = $ENV{HILO_CLUSTER_FIVE_SECONDS} // 16;
# A stopped node refuses connections at once, so the timeout only matters
# for nodes that are up but slow: on a loaded machine (2 cores for five
# servers and their load) a 1 s timeout made claims fail for want of answers
# from live nodes.
my @nodes = cluster_nodes({ conf => "hilo.claim_timeout = '10s'\n" }, map { "f$_" } 1 .. 5);
my ($f1, $f2, $f3, $f4, $f5) = @nodes;

form_cluster(@nodes);
$f3->safe_psql('postgres',
	"SELECT hilo_create('events', window_size => 5000, min_open_windows => 3)");
wait_for_windows(\@nodes, 'events', 3);
pass('a sequence created on one node reached all five, with windows');

my $start = time;
sub at { my $t = shift; my $left = $start + $t - time; usleep($left * 1e6) if $left > 0 }
my %load = map { $_->name => start_load($_, 'events', seconds => $seconds, max_n => 8000) } @nodes;

at($seconds * 0.25);
$f2->stop('immediate');
usleep(500_000);
$f2->start;
$load{f2_again} = start_load($f2, 'events', seconds => int($seconds * 0.35), max_n => 8000);

# A minority goes away; the majority keeps claiming.
at($seconds * 0.65);
$f4->stop('immediate');
$f5->stop('immediate');

my %done;
for my $name (sort keys %load)
{
	my ($count, $err, $ok) = finish_load($load{$name});
	$done{$name} = $count;
	next if $name eq 'f2' || $name eq 'f4' || $name eq 'f5';    # their node went away
	ok($ok, "load on $name ran without errors ($count takes)") or diag($err);
}

# After the minority left: the others still get new windows from the register.
for my $node ($f1, $f3)
{
	my $before = $node->safe_psql('postgres', 'SELECT count(*) FROM hilo.windows');
	# Far more than the open windows hold: it needs its own claim.
	$node->safe_psql('postgres',
		"INSERT INTO taken (r) SELECT unnest(hilo_take('events', 1000000000))");
	cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM hilo.windows'), '>', $before,
		$node->name . ': with two of five nodes down, a take beyond the open windows succeeds');
}
$f1->poll_query_until('postgres', q{
	SELECT has_majority AND nodes_reachable = 3 AND message LIKE '%3 of 5 nodes answered%'
	  FROM hilo.agent_status})
  or diag($f1->safe_psql('postgres', 'SELECT message FROM hilo.agent_status'));
pass("f1's agent reports 3 of 5 nodes and a majority");
is($f1->safe_psql('postgres',
		"SELECT string_agg(name, ',' ORDER BY node_id) FROM hilo.nodes WHERE reachable"),
	'f1,f2,f3', 'hilo.nodes shows which nodes answer');

$f4->start;
$f5->start;
my @taken = collect_taken(@nodes);
my $ids = 0;
$ids += $_->[1] - $_->[0] for @taken;
note(scalar(@taken) . " ranges, $ids IDs taken on five nodes; takes per load: "
	  . join(', ', map { "$_ $done{$_}" } sort keys %done));
is(first_overlap(@taken), undef, 'every ID returned by any of the five nodes is unique');
is(check_windows_disjoint(all_windows(@nodes)), undef, 'no two nodes have overlapping windows');

done_testing();
