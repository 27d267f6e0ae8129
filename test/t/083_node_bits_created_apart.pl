# One name created apart on two nodes with different node_bits, before
# either saw the other's copy (found by review). Slices of different widths
# overlap: node 1's slice of 2 bits and node 2's slice of 3 bits both begin
# at 2^61, and both nodes claimed there with no network at all: the same
# IDs from both. Now a node claims in its slice only once a majority of the
# nodes hold the name with its node_bits (it carries its copy to the nodes
# that lack the name, as the agent would, and reads every node's): each
# node holds one copy of a name, so only one width can have a majority.
# The agent worker is off: nothing carries the copies but the takes.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloCluster;

my @nodes = map { cluster_node($_, agent => 0) } qw(a1 a2 a3);
my ($a1, $a2, $a3) = @nodes;
form_cluster(@nodes);
is(join(',', map { $_->safe_psql('postgres', 'SELECT hilo_node_id()') } @nodes), '1,2,3', 'node ids');

$a1->safe_psql('postgres', "SELECT hilo_create('d', node_bits => 2, window_size => 100)");
$a2->safe_psql('postgres', "SELECT hilo_create('d', node_bits => 3, window_size => 100)");

sub take
{
	my ($node) = @_;
	my ($ret, $out, $err) = $node->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT lower(r) || ',' || upper(r) FROM unnest(hilo_take('d', 5)) r");
	return $ret == 0 ? [ split /,/, $out ] : $err;
}
my $on1 = take($a1);
my $on2 = take($a2);
note 'a1: ' . (ref $on1 ? "@$on1" : $on1) . '; a2: ' . (ref $on2 ? "@$on2" : $on2);
ok(!(ref $on1 && ref $on2 && $on1->[0] < $on2->[1] && $on2->[0] < $on1->[1]),
	'the two nodes did not hand out the same IDs');
ok(ref $on1, 'a1, whose node_bits a majority took (a1 and a3), hands out IDs');
like(ref $on2 ? '' : $on2,
	qr/ERROR:\s+55000: hilo sequence "d" has node_bits 3 on this node but not on a majority of the hilo cluster's nodes/,
	'a2, created apart with other node_bits, is refused (55000)');
like(ref $on2 ? '' : $on2, qr/DETAIL:.*node "a1" has node_bits 2, node "a3" has node_bits 2/,
	'... naming what the other nodes have');
is($a3->safe_psql('postgres', "SELECT node_bits FROM hilo.sequences WHERE name = 'd'"), '2',
	"a1's take carried its copy to a3");
my $on3 = take($a3);
ok(ref $on3 && $on3->[0] >> 61 == 3, 'a3 agrees with a majority and hands out IDs in its slice');

like($a3->safe_psql('postgres', 'SELECT hilo_agent_run()'),
	qr/sequence "d" has node_bits 3 on node "a2" but 2 where it was created first/,
	"the agent's pass says so");

# The hint's way out: drop the sequence (on any node: the agent drops it on
# every node) and create it again with one node_bits.
$a2->safe_psql('postgres', "SELECT hilo_drop('d')");
$a1->safe_psql('postgres', 'SELECT hilo_agent_run()');
is(join(',', map { $_->safe_psql('postgres', "SELECT count(*) FROM hilo.sequences WHERE name = 'd'") } @nodes),
	'0,0,0', 'the drop reached every node');
$a1->safe_psql('postgres', "SELECT hilo_create('d', node_bits => 2, window_size => 100)");
$a1->safe_psql('postgres', 'SELECT hilo_agent_run()');
my $again = take($a2);
ok(ref $again && $again->[0] >> 61 == 2, 'made again: a2 hands out IDs in its slice of 2 bits');
my $after = take($a1);
ok(ref $after && $after->[0] >= $on1->[1], 'and a1 above the IDs it handed out before');

$_->stop for @nodes;
done_testing();
