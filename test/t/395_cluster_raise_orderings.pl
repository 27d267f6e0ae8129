# hilo_raise, hilo_adopt and hilo_unadopt on three real nodes for the
# sequences whose IDs do not come from each node's own windows alone:
# ordering 'quorum' (a register claim per batch of calls, the claiming
# gate remembering the end of its last claim), ordering 'cluster' (one
# lease holder serving from memory and from a pool in shared memory,
# the others forwarding to it) and node_bits (each node claiming in a
# slice of its own). For each, every node serves first (pools filled,
# sessions holding buffers, a lease holder serving, a gate's guess), then
# one node raises: once hilo_raise returns, every node, and every session
# that served before, hands out only IDs above the mark; no ID is handed
# out twice in the whole test. With a node down the raise fails (08006)
# and changes nothing. A rolled-back raise changes nothing on any node; a
# prepared one reaches the other nodes at PREPARE TRANSACTION.
# hilo_adopt with rows on every node starts the sequence above all of
# them, for each of these kinds; hilo_unadopt starts the native sequence
# above all the cluster handed out.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloCluster;

my $conf = "hilo.claim_timeout = '5s'\nhilo.lease_time = '1s'\nhilo.clock_drift_bound = 10000\n"
  . "max_prepared_transactions = 2\n";
my @nodes = cluster_nodes({ conf => $conf }, qw(n1 n2 n3));
my ($n1, $n2, $n3) = @nodes;
sub sql { my ($node, $query) = @_; return $node->safe_psql('postgres', $query) }
sub each_node { my ($code, @on) = @_; return join(' / ', map { $code->($_) } (@on ? @on : @nodes)) }
sub refused
{
	my ($node, $query) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$query");
	return $err;
}

form_cluster(@nodes);
my %id = map { $_->name => sql($_, 'SELECT hilo_node_id()') } @nodes;
note('node ids: ' . join(', ', map { "$_=$id{$_}" } sort keys %id));

create_everywhere(\@nodes,
	q => "ordering => 'quorum'",
	c => "ordering => 'cluster', window_size => 1000",
	b => 'node_bits => 4, window_size => 1000, block_size => 10');

# Every ID handed out in the test, by sequence: none twice.
my %seen;
my %twice;
sub note_ids
{
	my ($seq, @ids) = @_;
	for my $v (@ids)
	{
		$twice{$seq}{$v} = 1 if $seen{$seq}{$v}++;
	}
	return @ids;
}
sub nextvals
{
	my ($node, $seq, $n) = @_;
	return note_ids($seq,
		split /\n/, sql($node, "SELECT hilo_nextval('$seq') FROM generate_series(1, $n)"));
}
sub session_nextvals
{
	my ($session, $seq, $n) = @_;
	return note_ids($seq,
		split /\n/, $session->query_safe("SELECT hilo_nextval('$seq') FROM generate_series(1, $n)"));
}
sub max_of { my $m = shift; for (@_) { $m = $_ if $_ > $m } return $m }
sub min_of { my $m = shift; for (@_) { $m = $_ if $_ < $m } return $m }

# Per kind: the node that raises, and the node whose memory matters most.
# node_bits: the lowest node's slice is the one a mark can lie in; a node
# whose slice lies above raises it.
my ($low) = sort { $id{ $a->name } <=> $id{ $b->name } } @nodes;
my ($high) = grep { $_->name ne $low->name } @nodes;
my %raiser = (q => $n2, b => $high);
my %watched = (q => $n1, b => $low);

sub start_values
{
	my ($seq, @on) = @_;
	return each_node(sub { sql($_[0], "SELECT start_value FROM hilo.sequences WHERE name = '$seq'") }, @on);
}
sub cells
{
	my ($seq, @on) = @_;
	return each_node(sub { register_value($_[0], $seq) . ',' . sql($_[0],
		"SELECT bound FROM hilo.lease_cells WHERE seq = '$seq'") }, @on);
}

for my $seq (qw(q c b))
{
	if ($seq eq 'c')
	{
		# The holder serves from memory; another node raises.
		wait_until_served(\@nodes, 'c');
		my $holder = wait_for_lease_holder(\@nodes, 'c') or die 'no lease holder of c';
		note('holder of c: ' . $holder->name);
		$watched{c} = $holder;
		($raiser{c}) = grep { $_->name ne $holder->name } @nodes;
	}
	# Sessions that served before the raise and stay open: their buffers,
	# the pools, the lease holder's memory, the gates' guesses.
	my %session = map { $_->name => $_->background_psql('postgres') } @nodes;
	my @before;
	for (1 .. 3)
	{
		for my $node (@nodes)
		{
			push @before, session_nextvals($session{ $node->name }, $seq, 3);
			push @before, nextvals($node, $seq, 2);
		}
	}
	my $watched = $watched{$seq};
	my $top = max_of(map { sql($watched, "SELECT hilo_nextval('$seq')") } 1 .. 2);
	note_ids($seq, $top);
	push @before, $top;
	# Just above what the watched node served: what it holds in memory
	# lies at or below the mark.
	my $above = $top + 50;
	my ($ret, $out, $err) = $raiser{$seq}->psql('postgres', "SELECT hilo_raise('$seq', $above)");
	is($ret . $err, '0', "$seq: hilo_raise on " . $raiser{$seq}->name . " returns");
	my (@after, $far);
	for my $node (@nodes)
	{
		my @ids = (session_nextvals($session{ $node->name }, $seq, 3), nextvals($node, $seq, 3));
		push @after, @ids;
		# (node_bits: a mark in the watched node's slice)
		$far = max_of(@ids) + 1000000 if $node == $watched;
		my $lowest = min_of(@ids);
		ok($lowest > $above,
			"$seq: every session on " . $node->name . " hands out above the mark ($lowest > $above)");
	}
	$_->quit for values %session;
	ok(min_of(@after) > $above, "$seq: nothing at or below the mark after the raise");

	# A rolled-back raise changes nothing on any node.
	my $start = start_values($seq);
	my $cells = cells($seq);
	sql($raiser{$seq}, "BEGIN; SELECT hilo_raise('$seq', $far); ROLLBACK;");
	is(start_values($seq), $start, "$seq: a rolled-back raise leaves every node's start_value");
	is(cells($seq), $cells, "$seq: ... and every node's register and lease cell");
	my @next = nextvals($watched, $seq, 3);
	ok(max_of(@next) < $far, "$seq: " . $watched->name . ' serves below the rolled-back mark');

	# A node down: 08006, nothing changed on the others.
	my $down = $nodes[2] == $raiser{$seq} ? $nodes[0] : $nodes[2];
	my @up = grep { $_ != $down } @nodes;
	$start = start_values($seq, @up);
	$cells = cells($seq, @up);
	$down->stop('immediate');
	like(refused($raiser{$seq}, "SELECT hilo_raise('$seq', $far)"),
		qr/ERROR:\s+08006: cannot raise hilo sequence "$seq"/,
		"$seq: hilo_raise with a node down fails with 08006");
	is(start_values($seq, @up), $start, "$seq: nothing raised on the nodes that answered");
	is(cells($seq, @up), $cells, "$seq: ... nor their register and lease cells");
	$down->start;
}
# A prepared raise: the other nodes apply it at PREPARE TRANSACTION, this
# node's catalog at COMMIT PREPARED.
my $mark = max_of(keys %{ $seen{q} }) + 1000;
sql($n1, "BEGIN; SELECT hilo_raise('q', $mark); PREPARE TRANSACTION 'raise_q';");
is(start_values('q', $n2, $n3), join(' / ', ($mark + 1) x 2), 'q: a prepared raise reached the other nodes');
sql($n1, "COMMIT PREPARED 'raise_q'");
is(start_values('q'), join(' / ', ($mark + 1) x 3), 'q: ... and its own node once committed');
ok(min_of(map { nextvals($_, 'q', 2) } @nodes) > $mark, 'q: every node serves above the prepared mark');

is(join(',', map { "$_:" . join('|', sort keys %{ $twice{$_} }) } grep { %{ $twice{$_} // {} } } sort keys %twice),
	'', 'no ID handed out twice');

# --- hilo_adopt with rows on all three nodes, then hilo_unadopt.
my %adopt = (quorum => "ordering => 'quorum'", cluster => "ordering => 'cluster'", slices => 'node_bits => 4');
for my $kind (sort keys %adopt)
{
	my $table = "t_$kind";
	for my $i (0 .. 2)
	{
		sql($nodes[$i], "CREATE TABLE $table (id bigserial PRIMARY KEY, v text)");
		sql($nodes[$i], "INSERT INTO $table (v) SELECT 'row' FROM generate_series(1, 10)");
	}
	sql($n3, "INSERT INTO $table (id, v) VALUES (7000, 'explicit')");
	sql($n2, "SELECT setval('${table}_id_seq', 8000)");
	is(sql($n1, "SELECT hilo_adopt('$table', 'id', $adopt{$kind})"), "${table}_id_seq",
		"$kind: hilo_adopt on a cluster node");
	for my $node (@nodes)
	{
		$node->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM hilo.sequences WHERE name = '${table}_id_seq'")
		  or die "${table}_id_seq never reached " . $node->name;
	}
	my @ids;
	push @ids, sql($n1, "INSERT INTO $table (v) VALUES ('new') RETURNING id") for 1 .. 3;
	push @ids, nextvals($_, "${table}_id_seq", 3) for @nodes;
	ok(min_of(@ids) > 8000, "$kind: every node hands out above every node's rows (" . min_of(@ids) . ')');
	is(sql($n1, "SELECT ordering || '/' || node_bits FROM hilo.sequences WHERE name = '${table}_id_seq'"),
		$kind eq 'slices' ? 'none/4' : "$kind/0", "$kind: the sequence has the kind asked for");
	is(sql($n1, "SELECT hilo_unadopt('$table', 'id')"), "${table}_id_seq", "$kind: hilo_unadopt");
	my $start = sql($n1, "SELECT start_value FROM pg_sequences WHERE sequencename = '${table}_id_seq'");
	ok($start > max_of(@ids), "$kind: the native sequence starts above all the cluster handed out ($start)");
}

done_testing();
