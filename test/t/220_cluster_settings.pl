# Settings and ordering are cluster-wide, on three
# real nodes. The agent worker is off: every pass is a hilo_agent_run() the
# test makes, so what a node has before and after a pass is exact.
#  1. A sequence created with monotonic => true before the cluster existed
#     reaches the other nodes as ordering 'node' (monotonic there too), and
#     the push node 1 refuses is refused on node 2 as well.
#  2. On a node of the cluster, 'node' is refused with a hint at the
#     orderings across the cluster; a 'quorum' sequence created on node 1
#     and a 'cluster' one created on node 2 have their ordering on every
#     node after a pass.
#  3. hilo_alter on node 1 reaches nodes 2 and 3 at the next agent pass,
#     with its settings version.
#  4. Node 3 is stopped while an alter happens: the pass that follows carries
#     it to node 2, and hilo.status on nodes 1 and 2 reports node 3 behind;
#     node 3 comes back with its old copy and catches up at the next pass.
#  5. Two alters on two nodes before either pass: the later one wins on every
#     node. Lowering max_value is refused on a cluster node.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloCluster;

my @nodes = cluster_nodes({ agent => 0 }, qw(n1 n2 n3));
my ($n1, $n2, $n3) = @nodes;
sub sql { my ($node, $query) = @_; return $node->safe_psql('postgres', $query) }
sub pass { my ($node) = @_; return sql($node, 'SELECT hilo_agent_run()') }
sub settings
{
	my ($node, $seq) = @_;
	return sql($node, qq{
		SELECT format('v%s ws=%s mow=%s bs=%s max=%s', settings_version, window_size,
		              min_open_windows, block_size, max_value)
		  FROM hilo.sequences WHERE name = '$seq'});
}
sub each_node { my ($code) = @_; return join(' / ', map { $code->($_) } @nodes) }

# --- 1. monotonic, created before the cluster, reaches every node.
sql($n1, "SELECT hilo_create('mono', monotonic => true, block_size => 5)");
sql($n1, "SELECT hilo_take('mono', 3)");
form_cluster(@nodes);
pass($n1);
is(each_node(sub { sql($_[0], "SELECT ordering || ' ' || monotonic FROM hilo.sequences WHERE name = 'mono'") }),
	'node true / node true / node true', "ordering 'node' (monotonic) on every node");
for my $node ($n1, $n2)
{
	sql($node, "SELECT hilo_take('mono', 2)");
	my ($ret, $out, $err) = $node->psql('postgres', "SELECT hilo_push('mono', '{[1,1]}')");
	like($err, qr/cannot push IDs to hilo sequence "mono": it is monotonic/,
		'a push to the monotonic sequence is refused on ' . $node->name);
}

# --- 2. orderings on a node of the cluster.
my ($ret, $out, $err) = $n2->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT hilo_create('m2', monotonic => true)");
like($err, qr/ERROR:\s+55000: hilo sequence "m2" cannot be ordered per node on a node of a hilo cluster/,
	"'node' on a cluster node: 55000");
like($err, qr/HINT:\s+For IDs that rise across the whole cluster, use ordering => 'cluster' \(a leased serving node\) or 'quorum'/,
	'with a hint at the orderings across the cluster');
sql($n1, "SELECT hilo_create('q', ordering => 'quorum')");
sql($n2, "SELECT hilo_create('o2', ordering => 'cluster')");
pass($n1);
is(each_node(sub { sql($_[0], "SELECT ordering || ' ' || monotonic FROM hilo.sequences WHERE name = 'q'") }),
	'quorum false / quorum false / quorum false', "ordering 'quorum' carried to every node by a pass");
is(each_node(sub { sql($_[0], "SELECT ordering || ' ' || monotonic FROM hilo.sequences WHERE name = 'o2'") }),
	'cluster false / cluster false / cluster false', "ordering 'cluster' carried to every node by a pass");

# --- 3. hilo_alter on node 1 reaches the others at the next pass.
sql($n1, "SELECT hilo_create('orders', max_value => 1000000000000, window_size => 1000,
                              min_open_windows => 2, block_size => 10)");
pass($n1);
is(each_node(sub { settings($_[0], 'orders') }),
	join(' / ', ('v1 ws=1000 mow=2 bs=10 max=1000000000000') x 3), 'orders on every node, version 1');
sql($n1, "SELECT hilo_alter('orders', NULL, 5000, 3, NULL)");
is(settings($n2, 'orders'), 'v1 ws=1000 mow=2 bs=10 max=1000000000000',
	'node 2 has the old settings until a pass');
like(pass($n1), qr/carried settings to 2 sequence copies/, 'the pass says it carried them');
is(each_node(sub { settings($_[0], 'orders') }),
	join(' / ', ('v2 ws=5000 mow=3 bs=10 max=1000000000000') x 3),
	"hilo_alter('orders', NULL, 5000, 3, NULL) on node 1 reached nodes 2 and 3");
is(sql($n1, "SELECT settings_version || ' ' || settings_behind || ' ' || nodes_behind::text
               FROM hilo.status WHERE sequence = 'orders'"), '2 0 {}', 'nobody behind');
# In that pass the agent topped every node up to the new min_open_windows,
# with windows of the new size.
for my $node ($n2, $n3)
{
	is(sql($node, q{SELECT count(*) || ' open, ' || count(*) FILTER
	                         (WHERE w.window_end_value - w.window_start_value = 5000) || ' of 5000'
	                  FROM hilo.windows w JOIN hilo.sequences s USING (seq_id)
	                 WHERE s.name = 'orders' AND w.next_hi_value < w.window_end_value}),
		'3 open, 1 of 5000', $node->name . ' has min_open_windows 3, the new one of window_size 5000');
}

# --- 4. node 3 misses an alter.
$n3->stop;
sql($n1, "SELECT hilo_alter('orders', max_value => 2000000000000, block_size => 20)");
like(pass($n1), qr/2 of 3 nodes answered/, 'a pass with node 3 down');
is(settings($n2, 'orders'), 'v3 ws=5000 mow=3 bs=20 max=2000000000000', 'node 2 has the alter');
pass($n2);
for my $node ($n1, $n2)
{
	is(sql($node, "SELECT settings_version || ' ' || settings_behind || ' ' || nodes_behind::text
	                 FROM hilo.status WHERE sequence = 'orders'"),
		'3 0 {3}', 'hilo.status on ' . $node->name . ' reports node 3 behind');
}
$n3->start;
is(settings($n3, 'orders'), 'v2 ws=5000 mow=3 bs=10 max=1000000000000',
	'node 3 comes back with its old copy');
like(pass($n3), qr/3 of 3 nodes answered/, "node 3's own pass");
is(settings($n3, 'orders'), 'v3 ws=5000 mow=3 bs=20 max=2000000000000',
	'node 3 caught up at the next agent pass');
is(sql($n3, "SELECT settings_version || ' ' || settings_behind || ' ' || nodes_behind::text
               FROM hilo.status WHERE sequence = 'orders'"), '3 0 {}', 'node 3 is not behind');
pass($n1);
is(sql($n1, "SELECT nodes_behind::text FROM hilo.status WHERE sequence = 'orders'"), '{}',
	"and node 1's next pass sees it");

# --- 5. concurrent alters: the later one wins everywhere; no lowering.
sql($n2, "SELECT hilo_alter('orders', window_size => 6000)");
sql($n3, "SELECT hilo_alter('orders', window_size => 7000)");
pass($n1);
is(each_node(sub { settings($_[0], 'orders') }),
	join(' / ', ('v4 ws=7000 mow=3 bs=20 max=2000000000000') x 3),
	'two alters at version 4: the later (node 3) wins on every node');
($ret, $out, $err) = $n2->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT hilo_alter('orders', max_value => 1500000000000)");
like($err, qr/ERROR:\s+0A000: cannot lower max_value of hilo sequence "orders" on a node of a hilo cluster/,
	'lowering max_value on a cluster node: 0A000');
is(settings($n2, 'orders'), 'v4 ws=7000 mow=3 bs=20 max=2000000000000', 'and nothing changed');

is(check_windows_disjoint(all_windows(@nodes)), undef, "no two windows of any nodes overlap");
done_testing();
