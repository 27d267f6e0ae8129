# A membership change first raises a majority of the new configuration to
# the highest register value, and the newest lease cell, that a majority of
# the old one holds (the pre-sync, docs/multi-node.md "Membership"). The
# answers were merged with merge(hash_search(..., &found), found, ...): C++
# leaves the order in which it evaluates arguments open, and GCC read
# `found` before hash_search set it, so each answer after the first
# replaced the value instead of raising it. The pre-sync raised to the last
# answering node's value. Found in CI by TAP 055: a node that missed the
# claims made while it was cut off and a node restored from a backup then
# formed a majority on their old values and handed out IDs that a third
# node had handed out.
#
# Three nodes, no agent worker (nothing claims meanwhile). The first node of
# the configuration holds the highest register value and the newest lease
# cell, the third lower ones; the change removes the third, and the second
# node must then hold the first's. Once for a removal, once for an addition.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloCluster;

my @nodes = map { cluster_node($_, agent => 0) } qw(p1 p2 p3);
my ($p1, $p2, $p3) = @nodes;
form_cluster(@nodes);

# Register values and lease cells as a claim or a grant would leave them.
# Raising only makes later claims skip IDs: safe on any node.
sub set_values
{
	my ($node, $key, $value, $ballot, $bound) = @_;
	$node->safe_psql('postgres', "SELECT hilo._register_raise('{$key}', '{$value}')");
	$node->safe_psql('postgres',
		"SELECT hilo._lease_raise('{$key}', '{$ballot}', '{1}', '{$bound}', '{1}')");
}

sub values_on
{
	my ($node, $key) = @_;
	return $node->safe_psql('postgres',
		    "SELECT (SELECT value FROM hilo.register WHERE key = '$key') || ' '"
		  . " || (SELECT ballot || ' ' || bound FROM hilo.lease_cells WHERE seq = '$key')");
}

# --- A removal: the old configuration is p1, p2, p3 (in that order).
set_values($p1, 'r', 5000000, 9, 7000000);
set_values($p2, 'r', 1000, 1, 100);
set_values($p3, 'r', 2000, 2, 200);
membership_change($p1, "SELECT hilo_remove_node('p3')");
is(values_on($p2, 'r'), '5000000 9 7000000',
	'removal: p2 holds the highest register value and the newest lease cell of the old configuration');

# --- An addition: the old configuration is p1, p2; p3 joins.
set_values($p1, 'a', 6000000, 8, 8000000);
set_values($p2, 'a', 3000, 3, 300);
set_values($p3, 'a', 4000, 4, 400);
membership_change($p1,
	"SELECT hilo_add_node('p3', \$\$" . node_conninfo($p3) . "\$\$)");
my @raised = grep { values_on($_, 'a') eq '6000000 8 8000000' } @nodes;
cmp_ok(scalar(@raised), '>=', 2,
	'addition: a majority of the new configuration holds the highest register value and the newest lease cell ('
	  . join(', ', map { $_->name . ': ' . values_on($_, 'a') } @nodes) . ')');
is(values_on($p3, 'a'), '6000000 8 8000000', '... the joining node among them');

$_->stop for @nodes;
done_testing();
