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

my @nodes = cluster_nodes({ agent => 0 }, qw(a1 a2 a3));
my ($a1, $a2, $a3) = @nodes;
form_cluster(@nodes);
is(join(',', map { $_->safe_psql('postgres', 'SELECT hilo_node_id()') } @nodes), '1,2,3', 'node ids');

$a1->safe_psql('postgres', "SELECT hilo_create('d', node_bits => 2, window_size => 100)");
$a2->safe_psql('postgres', "SELECT hilo_create('d', node_bits => 3, window_size => 100)");

sub take
{
	my ($node, $seq) = @_;
	$seq //= 'd';
	my ($ret, $out, $err) = $node->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT lower(r) || ',' || upper(r) FROM unnest(hilo_take('$seq', 5)) r");
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
	qr/sequence "d" has node_bits 3 on node "a2" but 2 in the copy the agent carries/,
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

# Made again with other node_bits: refused. Each node lifts only its own
# high-water mark above what it handed out; a2's slice of 3 bits begins at
# 2^61, where a1 handed out the dropped sequence's IDs.
$a1->safe_psql('postgres', "SELECT hilo_drop('d')");
my ($ret, $out, $err) = $a1->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT hilo_create('d', node_bits => 3, window_size => 100)");
like($err, qr/ERROR:\s+55000: hilo sequence "d" cannot be created with node_bits 3: a dropped sequence of the name had node_bits 2/,
	'made again with other node_bits: refused (55000)');
like($err, qr/HINT:\s+Create it with node_bits => 2, or under another name/, '... with a hint');
$a1->safe_psql('postgres', 'SELECT hilo_agent_run()');
($ret, $out, $err) = $a2->psql('postgres', "SELECT hilo_create('d', node_bits => 3, window_size => 100)");
like($err, qr/cannot be created with node_bits 3/, 'on a2 too, where the drop was carried');

# A copy a node still holds of a sequence dropped elsewhere does not count.
# 'e' (2 bits) reaches every node, unused on a2 and a3. a2 drops it and
# makes it again with 3 bits, then a1 with 2; a3 still holds the dropped
# one. a1's first take must not count a3's dropped copy as agreeing: else,
# once a pass drops that copy, a2's first take carries its own (3 bits) to
# a3 and finds a majority too, and both hand out IDs from 2^61 on.
$a1->safe_psql('postgres', "SELECT hilo_create('e', node_bits => 2, window_size => 100)");
$a1->safe_psql('postgres', 'SELECT hilo_agent_run()');
$a2->safe_psql('postgres', "SELECT hilo_drop('e'); SELECT hilo_create('e', node_bits => 3, window_size => 100)");
$a1->safe_psql('postgres', "SELECT hilo_drop('e'); SELECT hilo_create('e', node_bits => 2, window_size => 100)");
my $e1 = $a1->psql('postgres', "SELECT hilo_take('e', 5)");
# One pass drops the old copy on a3; before the next carries a copy there,
# a2's first take carries its own.
$a1->safe_psql('postgres', 'SELECT hilo_agent_run()');
is($a3->safe_psql('postgres', "SELECT count(*) FROM hilo.sequences WHERE name = 'e'"), '0',
	"the pass dropped a3's old copy of 'e'");
my $e2 = $a2->psql('postgres', "SELECT hilo_take('e', 5)");
ok(!($e1 == 0 && $e2 == 0),
	"a1 (2 bits) and a2 (3 bits) do not both hand out IDs of 'e' (a1: "
	  . ($e1 == 0 ? 'IDs' : 'refused') . ', a2: ' . ($e2 == 0 ? 'IDs' : 'refused') . ')');

# Made again with other node_bits on a node that never handed out IDs of
# the name, which its own mark cannot know: 'g' (3 bits) handed out IDs
# only on a2. a1 drops it and makes it with 2 bits; the passes drop the old
# one on a2 and a3 and carry the new one to a3 (a2 refuses it). a1 must not
# count a3 and hand out a2's old IDs (both slices begin at 2^61).
$a2->safe_psql('postgres', "SELECT hilo_create('g', node_bits => 3, window_size => 100)");
$a2->safe_psql('postgres', 'SELECT hilo_agent_run()');
my $g2 = take($a2, 'g');
$a1->safe_psql('postgres', "SELECT hilo_drop('g'); SELECT hilo_create('g', node_bits => 2, window_size => 100)");
$a1->safe_psql('postgres', 'SELECT hilo_agent_run()') for 1 .. 2;
my $g1 = take($a1, 'g');
note 'g on a2: ' . (ref $g2 ? "@$g2" : $g2) . '; on a1: ' . (ref $g1 ? "@$g1" : $g1);
ok(ref $g2 && !(ref $g1 && $g1->[0] < $g2->[1] && $g2->[0] < $g1->[1]),
	"a1 does not hand out a2's old IDs of 'g'");
like(ref $g1 ? '' : $g1,
	qr/ERROR:\s+55000: hilo sequence "g" has node_bits 2, but a dropped sequence of the name handed out IDs with other node_bits/,
	'a1 is refused (55000), naming the node');

# A node that joins gets the copy whose node_bits a majority agreed on, not
# the oldest: 'f' is made on a2 with 3 bits first, then on a1 with 2. a1's
# first take agrees with a3; two nodes join. Had they got the oldest copy
# (3 bits), a2 would find a majority of the five (a2, a4, a5) too.
$a2->safe_psql('postgres', "SELECT hilo_create('f', node_bits => 3, window_size => 100)");
$a1->safe_psql('postgres', "SELECT hilo_create('f', node_bits => 2, window_size => 100)");
is($a1->psql('postgres', "SELECT hilo_take('f', 5)"), 0, "a1's take of 'f' agrees with a3");
my @more = cluster_nodes({ agent => 0 }, qw(a4 a5));
add_node($a1, $_) for @more;
push @nodes, @more;
is(join(',', map { $_->safe_psql('postgres', "SELECT node_bits FROM hilo.sequences WHERE name = 'f'") } @more),
	'2,2', 'the joining nodes got the agreed copy (2 bits)');
($ret, $out, $err) = $a2->psql('postgres', "SELECT hilo_take('f', 5)");
like($err, qr/has node_bits 3 on this node but not on a majority/, 'a2 (3 bits) is still refused with five nodes');

$_->stop for @nodes;
done_testing();
