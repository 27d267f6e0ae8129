# A membership change first raises a majority of the new configuration to
# the highest register value, and the newest lease cell, that a majority of
# the old one holds (the pre-sync, docs/multi-node.md "Membership"). The
# answers were merged with merge(hash_search(..., &found), found, ...): C++
# leaves the order in which it evaluates arguments open, and GCC read
# `found` before hash_search set it, so each answer after the first
# replaced the value instead of raising it. The pre-sync raised to the last
# answering node's value. Found in CI by TAP 230: a node that missed the
# claims made while it was cut off and a node restored from a backup then
# formed a majority on their old values and handed out IDs that a third
# node had handed out.
#
# Three nodes, no agent worker (nothing claims meanwhile), one register key
# and one lease cell (so that, with the bug, each answer after the first
# replaced the value, whatever order the rows came in). An addition: p1
# holds the highest values, p2 lower ones, and p3 joins; then a removal of
# p3 after p1 was raised again. Each time the other nodes must hold p1's.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloCluster;

my @nodes = cluster_nodes({ agent => 0 }, qw(p1 p2 p3));
my ($p1, $p2, $p3) = @nodes;
form_cluster($p1, $p2);

# Register values and lease cells as a claim or a grant would leave them.
# Raising only makes later claims skip IDs: safe on any node.
sub set_values
{
	my ($node, $value, $ballot, $bound) = @_;
	$node->safe_psql('postgres', "SELECT hilo._register_raise('{k}', '{$value}')");
	$node->safe_psql('postgres',
		"SELECT hilo._lease_raise('{k}', '{$ballot}', '{1}', '{$bound}', '{1}')");
}

sub values_on
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		    "SELECT (SELECT value FROM hilo.register WHERE key = 'k') || ' '"
		  . " || (SELECT ballot || ' ' || bound FROM hilo.lease_cells WHERE seq = 'k')");
}

# --- An addition: the old configuration is p1, p2; p3 joins.
set_values($p1, 6000000, 8, 8000000);
set_values($p2, 3000, 3, 300);
set_values($p3, 4000, 4, 400);
membership_change($p1, "SELECT hilo_add_node('p3', \$\$" . node_conninfo($p3) . "\$\$)");
my @raised = grep { values_on($_) eq '6000000 8 8000000' } @nodes;
cmp_ok(scalar(@raised), '>=', 2,
	'addition: a majority of the new configuration holds the highest register value and the newest lease cell of the old one ('
	  . join(', ', map { $_->name . ': ' . values_on($_) } @nodes) . ')');
is(values_on($p3), '6000000 8 8000000', '... the joining node among them');

# --- A removal: the old configuration is p1, p2, p3 (in that order).
set_values($p1, 9000000, 9, 9500000);
membership_change($p1, "SELECT hilo_remove_node('p3')");
is(values_on($p2), '9000000 9 9500000',
	'removal: p2 holds the highest register value and the newest lease cell of the old configuration');

$_->stop for @nodes;
done_testing();
