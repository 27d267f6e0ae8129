# hilo_adopt, hilo_raise and hilo_unadopt on three real nodes. The table is
# per node and the sequence cluster-wide: hilo_adopt on one node starts the
# sequence above the column's maximum on every node; hilo_raise on one node
# keeps every node, also those serving from their pools and windows under
# load, from handing out an ID at or below the mark once it returns;
# hilo_unadopt starts the native sequence above all the hilo sequence
# handed out or holds on any node. With a node down, adopt and raise are
# refused, naming it, and change nothing on the others. A column adopted on
# a node before it joins is carried like any sequence. The agent worker is
# off: every pass is a hilo_agent_run() the test makes.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloCluster;
use HiloRanges qw(first_overlap);

my @nodes = cluster_nodes({ agent => 0 }, qw(n1 n2 n3));
my ($n1, $n2, $n3) = @nodes;
sub sql { my ($node, $query) = @_; return $node->safe_psql('postgres', $query) }
sub pass { my ($node) = @_; return sql($node, 'SELECT hilo_agent_run()') }
sub each_node { my ($code, @on) = @_; return join(' / ', map { $code->($_) } (@on ? @on : @nodes)) }
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
sub start_value
{
	my ($node, $seq) = @_;
	return sql($node, "SELECT start_value FROM hilo.sequences WHERE name = '$seq'");
}

# Before the cluster: node 1 adopts its table "early", which holds IDs up
# to 500; the sequence is carried to the others once they join.
sql($n1, 'CREATE TABLE early (id bigserial PRIMARY KEY, v text)');
sql($n1, 'INSERT INTO early (id, v) VALUES (500, \'old\')');
is(sql($n1, "SELECT hilo_adopt('early', 'id')"), 'early_id_seq', 'adopted before the cluster');

# Every node has rows of its own in a bigserial table; node 3's reach 7000,
# node 2's sequence handed out up to 8000 (rows since deleted).
for my $i (0 .. 2)
{
	sql($nodes[$i], 'CREATE TABLE orders (id bigserial PRIMARY KEY, v text)');
	sql($nodes[$i], "INSERT INTO orders (v) SELECT 'row' FROM generate_series(1, " . (10 * ($i + 1)) . ')');
	sql($nodes[$i], 'CREATE TABLE later (id bigserial PRIMARY KEY, v text)');
}
sql($n3, "INSERT INTO orders (id, v) VALUES (7000, 'explicit')");
sql($n2, "SELECT setval('orders_id_seq', 8000)");
form_cluster(@nodes);
pass($n1);
is(each_node(sub { sql($_[0], "SELECT start_value > 500 FROM hilo.sequences WHERE name = 'early_id_seq'") }),
	't / t / t', 'the adopted sequence reached every node, starting above the column');

# --- hilo_adopt on node 1: above every node's column and old sequence.
is(sql($n1, "SELECT hilo_adopt('orders', 'id')"), 'orders_id_seq', 'hilo_adopt on a cluster node');
is(id_default($n1, 'orders'), "hilo_nextval('orders_id_seq'::text)", 'node 1 takes its IDs from hilo');
pass($n1);
is(each_node(sub { start_value($_[0], 'orders_id_seq') > 8000 ? 'above' : start_value($_[0], 'orders_id_seq') }),
	'above / above / above',
	'the sequence starts above the maximum and the old sequence of every node, on every node');
my $row = sql($n1, "INSERT INTO orders (v) VALUES ('new') RETURNING id");
ok($row > 8000, "node 1 inserts above every node's IDs ($row)");
ok(sql($n2, "SELECT hilo_nextval('orders_id_seq')") > 8000, 'node 2 hands out above them too');

# --- hilo_raise on node 1 while nodes 2 and 3 serve from their pools and
# windows under load. Each row of "taken" records when its statement began.
sql($n1, "SELECT hilo_create('r', window_size => 1000, block_size => 10)");
pass($n1);
for my $node (@nodes)
{
	sql($node, 'ALTER TABLE taken ADD COLUMN at timestamptz NOT NULL DEFAULT statement_timestamp()');
	sql($node, "SELECT hilo_nextval('r')");    # a pool and open windows below the mark
}
my $above = 100000;
# A take that needs the allocator while its node applies the raise fails
# with 55P03 (retry), as during hilo_alter: the load skips those.
my $dir = PostgreSQL::Test::Utils::tempdir;
my %script = (
	take => "INSERT INTO taken (r) SELECT unnest(hilo_take('r', 1 + (random() * 49)::int));",
	nextval => "INSERT INTO taken (r) SELECT int8range(v, v + 1) FROM hilo_nextval('r') v;");
for my $name (keys %script)
{
	open my $fh, '>', "$dir/$name.sql" or die $!;
	print $fh "DO \$\$ BEGIN $script{$name} EXCEPTION WHEN lock_not_available THEN NULL; END \$\$;\n";
	close $fh;
}
my @loads = map
{
	my $load = { node => $_, out => '', err => '' };
	$load->{harness} = IPC::Run::start(
		[ 'pgbench', '-n', '-c', 2, '-j', 1, '-T', 8, '-f', "$dir/take.sql", '-f', "$dir/nextval.sql",
		  node_conninfo($_) ],
		'>', \$load->{out}, '2>', \$load->{err}, IPC::Run::timeout(180));
	$load;
} ($n2, $n3);
sleep 2;
my ($ret, $out, $err) = $n1->psql('postgres', "SELECT hilo_raise('r', $above)");
is($ret . $err, '0', 'hilo_raise on a cluster node returns under load on the others');
my $raised_at = sql($n1, 'SELECT clock_timestamp()');
is(each_node(sub { start_value($_[0], 'r') }), join(' / ', ($above + 1) x 3),
	'start_value raised on every node before it returned');
is(each_node(sub { sql($_[0], "SELECT hilo_nextval('r') > $above") }), 't / t / t',
	'no node hands out an ID at or below the mark');
for my $load (@loads)
{
	my ($done, $err, $ok) = finish_load($load);
	ok($ok, $load->{node}->name . " load ran ($done transactions)") or diag($err);
}
for my $node ($n2, $n3)
{
	my ($late, $below) = split /\|/, sql($node, "SELECT count(*), count(*) FILTER (WHERE lower(r) <= $above)
	                                             FROM taken WHERE at > '$raised_at'");
	ok($late > 0, $node->name . " served $late takes after the raise returned");
	is($below, 0, $node->name . ': none of them at or below the mark');
}
my @taken = collect_taken(@nodes);
is(first_overlap(map { [ $_->[0], $_->[1] ] } @taken), undef, 'no ID handed out twice across the nodes');

# The other nodes apply a raise as its transaction commits: one that
# rolls back changes nothing on any node, and so does one rolled back
# with its savepoint; two raises in one transaction work.
sql($n1, "BEGIN; SELECT hilo_raise('r', 200000); SELECT hilo_raise('r', 300000); ROLLBACK;");
is(each_node(sub { start_value($_[0], 'r') }), join(' / ', ($above + 1) x 3),
	'a rolled-back raise changes nothing on any node');
sql($n1, "BEGIN; SELECT hilo_raise('r', 200000); SAVEPOINT s; SELECT hilo_raise('r', 300000);
          ROLLBACK TO s; COMMIT;");
is(each_node(sub { start_value($_[0], 'r') }), join(' / ', (200001) x 3),
	'a raise rolled back to its savepoint is left out, the one before it applied on every node');
my $low_raise = sql($n2, "SELECT hilo_nextval('r')");
ok($low_raise > 200000 && $low_raise < 300000, "node 2 serves above the committed mark only ($low_raise)");

# --- A node down: hilo_raise and hilo_adopt refuse, naming it, and change
# nothing on the nodes that answer.
$n3->stop('immediate');
my $down = refused($n1, "SELECT hilo_raise('r', 400000)");
note($down);
like($down,
	qr/ERROR:\s+08006: cannot raise hilo sequence "r": 1 of the cluster's 3 nodes did not answer.*node "n3"/s,
	'hilo_raise with a node down: 08006 naming it');
is(each_node(sub { start_value($_[0], 'r') }, $n1, $n2), '200001 / 200001',
	'nothing raised on the others');
ok(sql($n2, "SELECT hilo_nextval('r')") < 400000, 'node 2 serves below the refused mark');
like(refused($n1, "SELECT hilo_adopt('later', 'id')"),
	qr/ERROR:\s+08006: hilo_adopt\(\) cannot read the maximum of table public.later on every node.*node "n3"/s,
	'hilo_adopt with a node down: 08006 naming it');
is(id_default($n1, 'later'), "nextval('later_id_seq'::regclass)", 'the default is unchanged');
is(each_node(sub { sql($_[0], "SELECT count(*) FROM hilo.sequences WHERE name = 'later_id_seq'") }, $n1, $n2),
	'0 / 0', 'no hilo sequence made');
$n3->start;

# --- hilo_unadopt on node 1: the native sequence starts above every window
# node 2 and 3 hold, and above their register cells.
pass($n1);
sql($n2, "SELECT hilo_nextval('orders_id_seq')");
sql($n3, "SELECT hilo_nextval('orders_id_seq')");
my $held = 0;
for my $w (all_windows(@nodes))
{
	$held = $w->[1] - 1 if $w->[3] eq 'orders_id_seq' && $w->[1] - 1 > $held;
}
for my $node (@nodes)
{
	my $v = register_value($node, 'orders_id_seq');
	$held = $v if $v ne '' && $v > $held;
}
is(sql($n1, "SELECT hilo_unadopt('orders', 'id')"), 'orders_id_seq', 'hilo_unadopt on a cluster node');
my $start = sql($n1, "SELECT start_value FROM pg_sequences WHERE sequencename = 'orders_id_seq'");
ok($start > $held, "the native sequence starts above all the cluster holds ($start > $held)");
is(id_default($n1, 'orders'), "nextval('orders_id_seq'::regclass)", 'node 1 is back on a native sequence');

is(check_windows_disjoint(all_windows(@nodes)), undef, 'no two windows of any nodes overlap');
done_testing();
