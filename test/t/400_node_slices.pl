# Keys for sharded tables on three nodes: node_bits slices,
# hilo_node_of answered on a node other than the issuer, and hilo_uuid
# unique across sessions and nodes.
#
# Every node-to-node connection goes through a TCP proxy the test controls
# (test/perl/HiloProxy.pm). The nodes are n1, n2, n3 (node ids 1, 2, 3).
#  1. A sequence with node_bits => 2: the IDs every node hands out carry its
#     node id in bits 62..61; hilo_node_of on every other node names it.
#  2. A sequence without node_bits: hilo_node_of on another node answers
#     from the window map the agent carries.
#  3. n3 is cut off from the others: it goes on claiming new windows in its
#     own slice (takes far beyond its open windows), while a take of the
#     plain sequence that needs a new window fails there (no majority).
#  4. A node whose id does not fit in node_bits is refused, clearly.
#  5. hilo_uuid from several sessions on every node, one of them with its
#     clock set back an hour: no UUID and no ID twice.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use HiloTest;
use HiloCluster;
use HiloProxy;

my @nodes = cluster_nodes({ conf => "hilo.claim_timeout = '1s'\n" }, qw(n1 n2 n3));
my ($n1, $n2, $n3) = @nodes;
my $proxy = proxied_cluster(@nodes);
my %id_of = map { $_->name => $_->safe_psql('postgres', 'SELECT hilo_node_id()') } @nodes;
is_deeply([ map { $id_of{ $_->name } } @nodes ], [ 1, 2, 3 ], 'hilo_node_id(): 1, 2, 3');

$n1->safe_psql('postgres', q{
	SELECT hilo_create('sl', node_bits => 2, window_size => 1000, min_open_windows => 2,
	                   block_size => 10);
	SELECT hilo_create('pl', window_size => 1000, min_open_windows => 2, block_size => 10);
});
wait_for_windows(\@nodes, 'pl', 2);
# The agent carries sl to every node and claims nothing for it: each node's
# allocator claims its windows itself, from its first take there on.
for my $node (@nodes)
{
	$node->poll_query_until('postgres', "SELECT count(*) = 1 FROM hilo.sequences WHERE name = 'sl'")
	  or die 'sl never reached ' . $node->name;
}
is(join(',', map { $_->safe_psql('postgres', "SELECT node_bits FROM hilo.sequences WHERE name = 'sl'") } @nodes),
	'2,2,2', 'node_bits carried to every node');

# --- 1. IDs from every node carry its node id.
my %ids;    # node name => [ids]
for my $node (@nodes)
{
	my $out = $node->safe_psql('postgres', q{
		SELECT hilo_nextval('sl') FROM generate_series(1, 50)
		UNION ALL
		SELECT g FROM unnest(hilo_take('sl', 3000)) r, generate_series(lower(r), upper(r) - 1, 500) g});
	$ids{ $node->name } = [ split /\n/, $out ];
}
for my $node (@nodes)
{
	my $name = $node->name;
	my $list = join(',', @{ $ids{$name} });
	is($n1->safe_psql('postgres', "SELECT count(*) || ' ' || count(*) FILTER (WHERE i >> 61 <> $id_of{$name})"
			  . " FROM unnest('{$list}'::bigint[]) i"),
		scalar(@{ $ids{$name} }) . ' 0',
		"every ID from $name carries node id $id_of{$name} in bits 62..61");
}
# hilo_node_of on a node other than the issuer.
for my $issuer (@nodes)
{
	for my $asked (grep { $_ != $issuer } @nodes)
	{
		my $list = join(',', @{ $ids{ $issuer->name } }[ 0, 10, 49, -1 ]);
		is($asked->safe_psql('postgres',
				"SELECT string_agg(DISTINCT hilo_node_of('sl', i)::text, ',') FROM unnest('{$list}'::bigint[]) i"),
			$id_of{ $issuer->name },
			"node_bits: " . $asked->name . " says " . $issuer->name . " issued its IDs");
	}
}

# --- 2. Without node_bits: the window map.
my %plain;
$plain{ $_->name } = $_->safe_psql('postgres', "SELECT hilo_nextval('pl')") for @nodes;
for my $issuer (@nodes)
{
	for my $asked (grep { $_ != $issuer } @nodes)
	{
		my $id = $plain{ $issuer->name };
		ok($asked->poll_query_until('postgres',
				"SELECT hilo_node_of('pl', $id) IS NOT DISTINCT FROM $id_of{ $issuer->name }"),
			"window map: " . $asked->name . " says " . $issuer->name . " issued $id");
	}
}
is($n2->safe_psql('postgres', "SELECT hilo_node_of('pl', 9000000000000000000) IS NULL"),
	't', 'window map: NULL for an ID no window holds');

# --- 3. n3 cut off: it keeps claiming windows in its slice.
proxy_isolate($proxy, 'n3');
my $windows_before = $n3->safe_psql('postgres', q{
	SELECT count(*) FROM hilo.windows w JOIN hilo.sequences s USING (seq_id) WHERE s.name = 'sl'});
my ($rc, $out, $err) = $n3->psql('postgres', "SELECT hilo_take('pl', 100000)");
isnt($rc, 0, 'cut off: a take of the plain sequence beyond its open windows fails');
like($err, qr/no majority/, '... for want of a majority');
my $taken = $n3->safe_psql('postgres', q{
	SELECT min(lower(r)) >> 61, sum(upper(r) - lower(r)) FROM unnest(hilo_take('sl', 100000)) r});
is($taken, '3|100000', 'cut off: n3 takes 100000 IDs of sl, far beyond its open windows, in slice 3');
my $many = join(',', split /\n/, $n3->safe_psql('postgres',
		"SELECT hilo_nextval('sl') FROM generate_series(1, 3000)"));
is($n3->safe_psql('postgres',
		"SELECT count(*) FILTER (WHERE i >> 61 <> 3) FROM unnest('{$many}'::bigint[]) i"),
	'0', 'cut off: 3000 nextvals on n3, all in slice 3');
my $windows_after = $n3->safe_psql('postgres', q{
	SELECT count(*) FROM hilo.windows w JOIN hilo.sequences s USING (seq_id) WHERE s.name = 'sl'});
cmp_ok($windows_after, '>', $windows_before + 2,
	"cut off: n3 claimed windows alone ($windows_before -> $windows_after)");
like($n3->safe_psql('postgres', 'SELECT hilo_agent_run()'), qr/no majority/,
	'... while its agent has no majority');
proxy_rejoin($proxy, 'n3');

# Every node's windows of sl lie in its own slice, and no two overlap.
for my $node (@nodes)
{
	is($node->safe_psql('postgres', q{
		SELECT count(*) FROM hilo.windows w JOIN hilo.sequences s USING (seq_id)
		 WHERE s.name = 'sl' AND (w.window_start_value >> 61 <> hilo_node_id()
		                          OR (w.window_end_value - 1) >> 61 <> hilo_node_id())}),
		'0', $node->name . ': every window of sl in its own slice');
}
is(check_windows_disjoint(all_windows(@nodes)), undef, 'no two windows of any nodes overlap');

# --- 4. Node ids that do not fit.
($rc, $out, $err) = $n3->psql('postgres', "SELECT hilo_create('narrow', node_bits => 1)",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/55000.*hilo sequence "narrow" has node_bits 1, too few for this node's id 3/s,
	'hilo_create on node 3 with node_bits 1: 55000, names the node id');
$n1->safe_psql('postgres', "SELECT hilo_create('narrow', node_bits => 1, window_size => 10)");
$n3->poll_query_until('postgres', "SELECT count(*) = 1 FROM hilo.sequences WHERE name = 'narrow'")
  or die 'narrow never reached n3';
($rc, $out, $err) = $n3->psql('postgres', "SELECT hilo_nextval('narrow')",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
isnt($rc, 0, 'a carried sequence whose node_bits leave no slice for node 3: refused there');
like($err, qr/55000.*too few for this node's id 3.*node ids run from 0 to 1/s, '... with 55000 and the range');
is($n1->safe_psql('postgres', "SELECT hilo_nextval('narrow') >> 62"), '1', '... while node 1 uses slice 1');

# --- 5. hilo_uuid: unique across sessions and nodes, whatever the clocks say.
for my $node (@nodes)
{
	$node->safe_psql('postgres', 'CREATE TABLE u (id uuid PRIMARY KEY, seq text NOT NULL)');
}
# On every node at once: pgbench with 3 clients, and one more client whose
# clock is an hour behind (hilo.uuid_clock_shift, a superuser's test hook).
my $dir = PostgreSQL::Test::Utils::tempdir;
open my $fh, '>', "$dir/uuid.sql" or die;
print $fh "INSERT INTO u SELECT hilo_uuid('sl'), 'sl';\n"
  . "INSERT INTO u SELECT hilo_uuid('pl'), 'pl';\n";
close $fh;
my @runs;
for my $node (@nodes)
{
	for my $behind (0, 1)
	{
		local $ENV{PGOPTIONS} = $behind ? '-c hilo.uuid_clock_shift=-1h' : '';
		my $run = { out => '', err => '' };
		$run->{harness} = IPC::Run::start(
			[
				'pgbench', '-n', '-c', $behind ? 1 : 3, '-j', 1, '-t', 200,
				'-f', "$dir/uuid.sql", node_conninfo($node)
			],
			'>', \$run->{out}, '2>', \$run->{err}, IPC::Run::timeout(300));
		push @runs, $run;
	}
}
for my $run (@runs)
{
	my $ok = eval { $run->{harness}->finish; 1 } && $run->{harness}->result == 0;
	ok($ok, 'pgbench of hilo_uuid finished') or diag($run->{err});
}
my @all;
for my $node (@nodes)
{
	push @all, split /\n/, $node->safe_psql('postgres',
		"SELECT seq || ' ' || id || ' ' || hilo_uuid_id(id) FROM u");
}
is(scalar @all, 3 * 4 * 200 * 2, 'hilo_uuid: 4800 UUIDs from 12 sessions on 3 nodes');
my (%uuid_seen, %id_seen, $dup);
for (@all)
{
	my ($seq, $uuid, $id) = split / /;
	$dup //= "UUID $uuid twice" if $uuid_seen{$uuid}++;
	$dup //= "ID $id of $seq twice" if $id_seen{"$seq $id"}++;
}
is($dup, undef, 'hilo_uuid: no UUID and no ID twice across sessions and nodes');
for my $node (@nodes)
{
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM u WHERE hilo_uuid_time(id) < now() - interval '50 min'"),
		'400', $node->name . ': the session an hour behind wrote its 400 UUIDs an hour back');
}

# --- A dropped sequence leaves no window map behind: a sequence created
# again under its name must not inherit the old windows' nodes.
cmp_ok($n2->safe_psql('postgres', "SELECT count(*) FROM hilo.window_map WHERE name = 'pl'"),
	'>', 0, 'n2 maps windows of pl');
$n2->safe_psql('postgres', "SELECT hilo_drop('pl')");
is($n2->safe_psql('postgres', "SELECT count(*) FROM hilo.window_map WHERE name = 'pl'"),
	'0', 'dropped on n2: its window map of pl is gone');
ok($n1->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM hilo.window_map WHERE name = 'pl'"),
	'the drop carried to n1 takes its window map of pl too');

proxy_stop($proxy);
done_testing();
