# hilo_adopt, hilo_raise and hilo_unadopt on three real nodes. The table is
# per node and the sequence cluster-wide, and the other nodes' pools and
# windows would have to learn of a raise: none of that is carried yet, so on
# a node of a cluster all three refuse (0A000, with a hint) and change
# nothing on any node, while the nodes keep serving from their pools. A
# column adopted on a node before it joins is carried like any sequence.
# The agent worker is off: every pass is a hilo_agent_run() the test makes.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloCluster;

my @nodes = map { cluster_node($_, agent => 0) } qw(n1 n2 n3);
my ($n1, $n2, $n3) = @nodes;
sub sql { my ($node, $query) = @_; return $node->safe_psql('postgres', $query) }
sub pass { my ($node) = @_; return sql($node, 'SELECT hilo_agent_run()') }
sub each_node { my ($code) = @_; return join(' / ', map { $code->($_) } @nodes) }
sub refused
{
	my ($node, $query) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$query");
	return $err;
}
sub id_default
{
	my ($node, $table) = @_;
	return sql($node, "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef
	                    WHERE adrelid = '$table'::regclass");
}

# Before the cluster: node 1 adopts its orders table, which holds IDs up
# to 500; the sequence is carried to the others once they join.
sql($n1, 'CREATE TABLE early (id bigserial PRIMARY KEY, v text)');
sql($n1, 'INSERT INTO early (id, v) VALUES (500, \'old\')');
is(sql($n1, "SELECT hilo_adopt('early', 'id')"), 'early_id_seq', 'adopted before the cluster');

# Every node has rows of its own in a bigserial table.
for my $i (0 .. 2)
{
	sql($nodes[$i], 'CREATE TABLE orders (id bigserial PRIMARY KEY, v text)');
	sql($nodes[$i], "INSERT INTO orders (v) SELECT 'row' FROM generate_series(1, " . (10 * ($i + 1)) . ')');
}
form_cluster(@nodes);
pass($n1);
is(each_node(sub { sql($_[0], "SELECT start_value > 500 FROM hilo.sequences WHERE name = 'early_id_seq'") }),
	't / t / t', 'the adopted sequence reached every node, starting above the column');

# --- hilo_adopt on a cluster node: refused, nothing created anywhere.
like(refused($n1, "SELECT hilo_adopt('orders', 'id')"),
	qr/ERROR:\s+0A000: hilo_adopt\(\) is not supported on a node of a hilo cluster/,
	'hilo_adopt on a cluster node: 0A000');
like(refused($n2, "SELECT hilo_adopt('orders', 'id')"),
	qr/HINT:\s+Move the column to hilo before the node joins the cluster/, 'with a hint');
pass($n1);
is(each_node(sub { id_default($_[0], 'orders') }),
	join(' / ', ("nextval('orders_id_seq'::regclass)") x 3), 'every default unchanged');
is(each_node(sub { sql($_[0], "SELECT count(*) FROM hilo.sequences WHERE name = 'orders_id_seq'") }),
	'0 / 0 / 0', 'no hilo sequence on any node');

# --- hilo_raise on a cluster node while the others serve from pools.
sql($n1, "SELECT hilo_create('r', window_size => 1000, block_size => 10)");
pass($n1);
my %before = map { $_->name => sql($_, "SELECT hilo_nextval('r')") } @nodes;
like(refused($n1, "SELECT hilo_raise('r', 100000)"),
	qr/ERROR:\s+0A000: cannot raise hilo sequence "r" on a node of a hilo cluster/,
	'hilo_raise on a cluster node: 0A000');
pass($n1);
is(each_node(sub { sql($_[0], "SELECT start_value FROM hilo.sequences WHERE name = 'r'") }),
	'1 / 1 / 1', 'start_value unchanged on every node');
for my $node (@nodes)
{
	my $next = sql($node, "SELECT hilo_nextval('r')");
	ok($next > $before{ $node->name } && $next < 100000,
		$node->name . ' goes on serving from its pool');
}

# --- hilo_unadopt on a cluster node: refused, the column stays on hilo.
like(refused($n1, "SELECT hilo_unadopt('early', 'id')"),
	qr/ERROR:\s+0A000: hilo_unadopt\(\) is not supported on a node of a hilo cluster/,
	'hilo_unadopt on a cluster node: 0A000');
is(id_default($n1, 'early'), "hilo_nextval('early_id_seq'::text)", 'the column stays on hilo');
is(sql($n1, "SELECT count(*) FROM hilo.adopted_columns"), '1', 'and is still recorded');

is(check_windows_disjoint(all_windows(@nodes)), undef, 'no two windows of any nodes overlap');
done_testing();
