# The node limit: a hilo cluster has at most 64 nodes (HILO_MAX_NODES). A
# node is a database with hilo, so 65 databases of one server stand in for
# 65 servers: every node still talks to every other over libpq, through
# the same code as between machines. 64 join; the 65th gets 54000 and
# changes nothing; takes and the agent work with 64 members; after one node
# is removed, the 65th joins. A membership change waits twice
# hilo.claim_timeout after the one before (docs/multi-node.md), so the
# timeout is short while the 64 join: 64 changes in about two minutes.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloRanges;

my $max_nodes = 64;
my $node = hilo_node('many', conf => "max_connections = 400\n"
	  . "hilo.max_databases = 80\n"
	  . "max_worker_processes = 100\n"
	  . "hilo.claim_timeout = '1s'\n"
	  . "log_statement = none\n");
my @dbs = map { sprintf('d%02d', $_) } 1 .. $max_nodes + 1;
for my $db (@dbs)
{
	$node->safe_psql('postgres', "CREATE DATABASE $db STRATEGY FILE_COPY");
	$node->safe_psql($db, 'CREATE EXTENSION hilo');
}

sub add
{
	my ($via, $db) = @_;
	my $conninfo = $node->connstr($db);
	return $node->psql($via, "\\set VERBOSITY verbose\nSELECT hilo_add_node('$db', \$\$$conninfo\$\$)");
}

my $failed = 0;
for my $db (@dbs[ 0 .. $max_nodes - 1 ])
{
	my ($ret, $out, $err) = add('d01', $db);
	# Opening connections to 40-odd databases of one busy 2-core server can
	# take longer than the 1 s claim timeout: the change then fails with
	# 08006, or with 08001 "no answer after N ms" when opening the other
	# connections used up the timeout before the new node's, and changes
	# nothing. Membership changes are safe to retry (docs/multi-node.md); a
	# retry is reported, and any other error fails.
	for (my $try = 1;
		$ret != 0 && $err =~ /ERROR:\s+(08006:|08001: .*\n.*no answer after)/ && $try <= 3;
		$try++)
	{
		diag("adding $db, retry $try after: $err");
		sleep 2;
		($ret, $out, $err) = add('d01', $db);
	}
	if ($ret != 0)
	{
		diag("adding $db: $err");
		$failed++;
		last;
	}
}
is($failed, 0, "$max_nodes nodes joined, one at a time");
is($node->safe_psql('d01', 'SELECT count(*) FROM hilo.nodes'), $max_nodes, "d01 lists $max_nodes nodes");
$node->poll_query_until($dbs[ $max_nodes - 1 ], "SELECT count(*) = $max_nodes FROM hilo.nodes")
  or fail('the last node to join never listed them all');

my ($ret, $out, $err) = add('d01', $dbs[$max_nodes]);
isnt($ret, 0, 'node ' . ($max_nodes + 1) . ' is refused ...');
like($err, qr/ERROR:\s+54000: a hilo cluster has at most $max_nodes nodes/, '... with 54000 and the limit');
is($node->safe_psql('d01', 'SELECT count(*) FROM hilo.nodes'), $max_nodes, 'and the node list is unchanged');
is($node->safe_psql($dbs[$max_nodes], 'SELECT count(*) FROM hilo.nodes'), '0',
	'and the refused database did not join');

# Takes through the register with 64 members (a majority is 33). A claim
# and an agent pass open a connection to every one of the 64 backends of
# this one server at once; on two busy cores that can take longer than the
# 1 s used for the joins (CI saw the agent reach 51 of 64 in time), so
# these run with a timeout a real deployment would use.
sub set_claim_timeout
{
	my ($value) = @_;
	$node->append_conf('postgresql.conf', "hilo.claim_timeout = '$value'\n");
	$node->reload;
	$node->poll_query_until('d01', "SELECT current_setting('hilo.claim_timeout') = '$value'")
	  or fail("hilo.claim_timeout = '$value' was not loaded");
}
set_claim_timeout('10s');
$node->safe_psql('d01', "SELECT hilo_create('s', window_size => 100, min_open_windows => 1)");
my @a = parse_multirange($node->safe_psql('d01', "SELECT hilo_take('s', 500)"));
is(set_ids(id_set(@a)), 500, 'a take on d01 with 64 members');
like($node->safe_psql('d01', 'SELECT hilo_agent_run()'), qr/^$max_nodes of $max_nodes nodes answered/,
	'the agent reaches all 64');
my @b = parse_multirange($node->safe_psql('d40', "SELECT hilo_take('s', 500)"));
is(set_ids(id_set(@b)), 500, 'a take on d40, where the agent carried the sequence');
is(set_text(set_intersect(id_set(@a), id_set(@b))), '', 'the two nodes got disjoint IDs');

# Remove one; now the 65th joins. No claim is running now (this server has
# no agent), so the timeout can come down again for the two changes, each
# waiting twice the timeout after the one before: 4 s is four times what
# the 64 joins had.
set_claim_timeout('4s');
$node->safe_psql('d01', "SELECT hilo_remove_node('$dbs[$max_nodes - 1]')");
($ret, $out, $err) = add('d01', $dbs[$max_nodes]);
is($ret, 0, 'after one node left, the 65th database joins') or diag($err);
is($node->safe_psql('d01', 'SELECT count(*) FROM hilo.nodes'), $max_nodes, "$max_nodes nodes again");

$node->stop;
done_testing();
