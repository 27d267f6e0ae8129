# ordering => 'cluster': a change of the cluster's members fails no call of
# a node that stays a member and can reach a majority. A lease worker that
# reads a new configuration starts its leases over; the calls of its own
# callers then in flight start again under the new leases (they returned
# nothing, so new IDs from a new lease keep the order), and a worker that
# sends requests as of an old configuration, refused by acceptors that
# installed a newer one, reads its configuration again at once rather than
# at its next periodic read (5 s).
#
# Clients on three members call while a fourth node joins and leaves again,
# then while max_value is raised (which starts the leases over too), with a
# claim timeout (6 s) far above any handover (a lease time of 1 s): every
# call returns, in order. Before this (answers "the lease
# worker started over" to every call in flight) this test saw failed calls.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use HiloTest;
use HiloCluster;
use HiloLinear;

my $conf =
  "hilo.claim_timeout = '6s'\nhilo.lease_time = '1s'\nhilo.clock_drift_bound = 10000\n";
my @nodes = cluster_nodes({ conf => $conf }, qw(n1 n2 n3 n4));
my ($n1, $n2, $n3, $n4) = @nodes;
form_cluster($n1, $n2, $n3);

$n1->safe_psql('postgres',
	"SELECT hilo_create('c', ordering => 'cluster', max_value => 4000000000000000000)");
wait_until_served([$n1, $n2, $n3], 'c');

my $dir = PostgreSQL::Test::Utils::tempdir;
my $h = linear_clients([ linear_pairs($n1, $n2, $n3) ],
	'c', dir => $dir, seconds => 120, takes => 1, until_stopped => 1);
my $t0 = time();
sub step { diag sprintf('%5.1f s: %s', time() - $t0, $_[0]) }
sleep 2;
step('adding n4');
membership_change($n1, "SELECT hilo_add_node('n4', \$\$" . node_conninfo($n4) . "\$\$)");
$n4->poll_query_until('postgres', "SELECT count(*) = 1 FROM hilo.sequences WHERE name = 'c'")
  or die 'the sequence never reached n4';
step('n4 has the sequence');
sleep 6;    # every member's worker read the change (every 5 s at most)
membership_change($n1, "SELECT hilo_remove_node('n4')");
step('n4 removed');
sleep 6;
# A raised max_value reaches each node's callers at once (n1) or with the
# agent's next pass: every lease starts over under the new settings, and
# the calls in flight then start again.
$n1->safe_psql('postgres', "SELECT hilo_alter('c', max_value => 5000000000000000000)");
step('max_value raised');
for my $node ($n2, $n3)
{
	$node->poll_query_until('postgres',
		"SELECT max_value = 5000000000000000000 FROM hilo.sequences WHERE name = 'c'")
	  or die 'the new max_value never reached ' . $node->name;
}
step('every node has it');
sleep 4;
linear_stop($h);
linear_wait($h);
step('clients ended');
my ($ok, $failed) = linear_calls($h);

is(join("\n", linear_check($ok)), '',
	'cluster across a join, a removal and an alter: linearizable over ' . scalar(@$ok) . ' calls');
is(scalar(@$failed), 0, 'no call of a member failed across the changes')
  or diag(join("\n", map { "$_->{label} at $_->{start}: $_->{error}" } grep { defined } @$failed[0 .. 4]));
for my $node ($n1, $n2, $n3)
{
	my $name = $node->name;
	cmp_ok(scalar(grep { $_->{label} =~ /^$name/ } @$ok), '>', 20, "clients on $name were served");
}

done_testing();
