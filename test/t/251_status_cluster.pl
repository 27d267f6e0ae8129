# hilo.status on the nodes of a three-node cluster: ids_left never exceeds
# what the sequence can still hand out (a cluster node's windows come from
# the quorum register without raising its high-water mark: they were
# counted twice, above max_value and 2^63 - 1 for a fresh sequence); the
# IDs of ordered calls and of takes larger than block_size are counted,
# with a rate; serving_node names the lease holder of an ordering
# 'cluster' sequence on every node, and ordering says which it is.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloCluster;

my $conf = "hilo.lease_time = '1s'\n";
my @nodes = cluster_nodes({ conf => $conf }, qw(n1 n2 n3));
my ($n1, $n2, $n3) = @nodes;
form_cluster(@nodes);

create_everywhere(\@nodes,
	c => "ordering => 'cluster', window_size => 1000",
	plain => 'window_size => 1000, block_size => 10',
	small => 'window_size => 100, block_size => 10, max_value => 100000');
wait_for_windows(\@nodes, 'plain', 1);
wait_for_windows(\@nodes, 'small', 1);

# Fresh: at most max_value - start_value + 1 left on every node.
for my $node (@nodes)
{
	my $name = $node->name;
	is( $node->safe_psql('postgres', q{
			SELECT string_agg(format('%s %s', st.sequence,
			                         st.ids_left <= s.max_value - s.start_value + 1), ', '
			                  ORDER BY st.sequence)
			  FROM hilo.status st JOIN hilo.sequences s ON s.name = st.sequence}),
		'c t, plain t, small t',
		"$name: ids_left of fresh sequences within max_value - start_value + 1");
	is($node->safe_psql('postgres', q{SELECT ids_left FROM hilo.status WHERE sequence = 'small'}),
		$node->safe_psql('postgres', q{
			WITH mine AS (SELECT coalesce(sum(w.window_end_value - w.next_hi_value), 0) AS open
			                FROM hilo.windows w JOIN hilo.sequences s USING (seq_id)
			               WHERE s.name = 'small'),
			     claimed AS (SELECT greatest(
			                   (SELECT max(w.window_end_value) - 1 FROM hilo.windows w
			                      JOIN hilo.sequences s USING (seq_id) WHERE s.name = 'small'),
			                   (SELECT max(last_id) FROM hilo.window_map WHERE name = 'small'))
			                   AS top)
			SELECT 100000 - top + open FROM mine, claimed}),
		"$name: ids_left of 'small' is its open windows and the unclaimed room");
}

# Ordered calls and huge takes count, with a rate.
wait_until_served(\@nodes, 'c');
$n2->safe_psql('postgres', q{SELECT hilo_nextval('c') FROM generate_series(1, 50)});
$n1->safe_psql('postgres', q{
	DO $$ BEGIN FOR i IN 1..3 LOOP PERFORM hilo_take('plain', 25000); END LOOP; END $$});
# (the allocator updates rates once a second at most)
ok( $n2->poll_query_until('postgres', q{
		SELECT issued_since_start >= 51 AND ids_per_second > 0 AND lasts IS NOT NULL
		  FROM hilo.status WHERE sequence = 'c'}),
	"n2: the ordered calls of 'c' counted, with a rate and a forecast");
ok( $n1->poll_query_until('postgres', q{
		SELECT issued_since_start = 75000 AND ids_per_second > 0 AND lasts IS NOT NULL
		  FROM hilo.status WHERE sequence = 'plain'}),
	"n1: takes of 25000 (block_size 10) counted, with a rate and a forecast");

# serving_node: the holder a majority recorded, on every node; NULL for a
# sequence that is not 'cluster'.
my $holder = wait_for_lease_holder(\@nodes, 'c', 30);
ok(defined $holder, "a majority recorded a lease holder of 'c'");
my $holder_id = $holder->safe_psql('postgres', 'SELECT hilo_node_id()');
for my $node (@nodes)
{
	my $name = $node->name;
	ok( $node->poll_query_until('postgres', qq{
			SELECT serving_node = $holder_id FROM hilo.status WHERE sequence = 'c'}),
		"$name: serving_node of 'c' is the holder (node $holder_id)");
	is( $node->safe_psql('postgres', q{
			SELECT string_agg(format('%s %s %s', sequence, ordering,
			                         coalesce(serving_node::text, '-')), ', ' ORDER BY sequence)
			  FROM hilo.status WHERE sequence <> 'c'}),
		'plain none -, small none -', "$name: no serving node for the others, and their ordering");
}

# serving_since: since when each node has seen the holder in its cell; it
# stays while the holder does (the age grows), NULL without a holder.
my @since = map {
	$_->safe_psql('postgres', q{
		SELECT serving_since FROM hilo.status WHERE sequence = 'c' AND serving_node IS NOT NULL})
} @nodes;
sleep 1;
for my $i (0 .. $#nodes)
{
	my $name = $nodes[$i]->name;
	isnt($since[$i], '', "$name: serving_since of 'c' is known");
	is( $nodes[$i]->safe_psql('postgres', qq{
			SELECT serving_since = '$since[$i]' AND clock_timestamp() - serving_since >= '1s'
			  FROM hilo.status WHERE sequence = 'c' AND serving_node = $holder_id}),
		't', "$name: serving_since stays while the holder serves; the age grows");
	is( $nodes[$i]->safe_psql('postgres', q{
			SELECT count(*) FROM hilo.status WHERE sequence <> 'c' AND serving_since IS NOT NULL}),
		'0', "$name: no serving_since for the others");
}

done_testing();
