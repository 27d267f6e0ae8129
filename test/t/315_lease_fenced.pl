# A node restored from a cold copy (a copy of its stopped data directory:
# no backup_label, the same incarnation) may have lost lease grants of
# ordering 'cluster': the bound of the IDs a holder handed out. Beside a
# node that missed those grants it made a majority without them, and a new
# holder served IDs already handed out. The register fences such a copy by
# its write count (docs/multi-node.md, "Fencing"); lease cells changed no
# write count, and the lease worker judged no acceptor at all. Now every
# cell written counts, every acceptor reply carries the count, and the lease
# worker drops the replies of a node whose count went back below what this
# node knows (its own replies, and what the agent's passes share).
#
#   {p1, p2, p3}: p3 copied cold; p2 misses grants (a session holds its
#   cell); p1 takes, its blocks recorded on p1 and p3; an agent pass learns
#   p3's write count; p1 stops; p3 runs from the copy; a call on p2.
#
# The agents pass only when the test runs one (an hour apart otherwise),
# and p3 runs from the copy without one: no pass fences it, the lease
# worker of p2 judges its replies itself.
#
# On the code before, p2 took the lease with p3 and handed out IDs p1 had
# handed out.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::RecursiveCopy;
use PostgreSQL::Test::Utils;
use File::Path qw(rmtree);
use Time::HiRes qw(time usleep);
use Test::More;
use HiloTest;
use HiloCluster;

my $conf = "hilo.lease_time = '1s'\n";
my @nodes = cluster_nodes({ conf => $conf, agent_interval => '1h' }, qw(p1 p2 p3));
my ($p1, $p2, $p3) = @nodes;
form_cluster(@nodes);
$p1->safe_psql('postgres', "SELECT hilo_create('c', ordering => 'cluster', window_size => 1000); SELECT hilo_agent_run()");
$_->poll_query_until('postgres', "SELECT count(*) = 1 FROM hilo.sequences WHERE name = 'c'")
  or die 'c never reached ' . $_->name
  for $p2, $p3;

# Takes $n IDs of c on $node, retrying a call that no node served in time
# (a lease is being taken); returns them.
sub take_ids
{
	my ($node, $n) = @_;
	for my $try (1 .. 30)
	{
		my ($ret, $out, $err) = $node->psql('postgres', "SELECT hilo_take('c', $n)");
		return map { $_->[0] .. $_->[1] - 1 } parse_multirange($out) if $ret == 0;
		die $err if $err !~ /no node served the call/;
		sleep 1;
	}
	die 'c was never served on ' . $node->name;
}

my @handed = take_ids($p1, 1000);
is(lease_holder(\@nodes, 'c')->name, 'p1', 'p1 holds the lease of c');

sub write_count
{
	my ($node) = @_;
	return $node->safe_psql('postgres', 'SELECT write_count FROM hilo.local_node');
}

# A cold copy of p3.
$p3->stop;
my $copy = PostgreSQL::Test::Utils::tempdir . '/p3_copy';
PostgreSQL::Test::RecursiveCopy::copypath($p3->data_dir, $copy);
$p3->start;
my $copied_count = write_count($p3);
my $copied_bound =
  $p3->safe_psql('postgres', "SELECT bound FROM hilo.lease_cells WHERE seq = 'c'");

# p2 misses the grants that follow: a session holds its cell of c.
my $holder = $p2->background_psql('postgres');
$holder->query_safe("BEGIN; SELECT * FROM hilo.lease_cells WHERE seq = 'c' FOR UPDATE");
push @handed, take_ids($p1, 5000) for 1 .. 4;
my ($highest) = sort { $b <=> $a } @handed;
my $p3_bound = $p3->safe_psql('postgres', "SELECT bound FROM hilo.lease_cells WHERE seq = 'c'");
cmp_ok($p3_bound, '>=', $highest, "p3 recorded the bound of p1's blocks ($p3_bound, IDs up to $highest)");
cmp_ok(write_count($p3), '>', $copied_count, '... and its write count rose with the grants');

# An agent pass learns p3's count and shares it with every node; p2's
# lease worker reads what the passes shared when it reads the configuration
# again (every 5 s, and at a reload).
$p1->safe_psql('postgres', 'SELECT hilo_agent_run()');
$p2->safe_psql('postgres', 'SELECT pg_reload_conf()');
my $p3_id = $p3->safe_psql('postgres', 'SELECT hilo_node_id()');
cmp_ok($p2->safe_psql('postgres',
		"SELECT highest_write_count FROM hilo.peer_watermarks WHERE node_id = $p3_id"),
	'>', $copied_count, 'p2 knows a write count of p3 above the copy\'s');

# p1, the holder, stops (before the copy starts: a renewal of its own would
# raise the copy); p3 runs from its copy, without an agent; p2's cell is
# free again.
$p3->stop('immediate');
$p1->stop('immediate');
rmtree($p3->data_dir);
PostgreSQL::Test::RecursiveCopy::copypath($copy, $p3->data_dir);
chmod 0700, $p3->data_dir;
$p3->append_conf('postgresql.conf', "hilo.agent_database = ''\n");
$p3->start;
is($p3->safe_psql('postgres', "SELECT bound FROM hilo.lease_cells WHERE seq = 'c'"),
	$copied_bound, "p3 runs from its cold copy (bound $copied_bound, below $highest)");
# A grant of p1's still waiting for the cell on p2 would be written once the
# cell is free (p1 is gone, but the statement runs on): wait until it gave
# up (lock_timeout).
$p2->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
  or die 'a grant still waits for the cell on p2';
$holder->query_safe('ROLLBACK');
$holder->quit;
my $p2_bound = $p2->safe_psql('postgres', "SELECT bound FROM hilo.lease_cells WHERE seq = 'c'");
cmp_ok($p2_bound, '<', $highest, "p2 missed p1's grants (bound $p2_bound)");

# Calls on p2 for 10 s (the old lease ends within 3): p2 and the copy are a
# majority by number, but the copy's replies must not count.
my %handed = map { $_ => 1 } @handed;
my ($served, $repeated) = (0, 0);
my $until = time + 10;
while (time < $until)
{
	my ($ret, $out, $err) = $p2->psql('postgres', "SELECT hilo_take('c', 1000)");
	if ($ret == 0)
	{
		my @ids = map { $_->[0] .. $_->[1] - 1 } parse_multirange($out);
		$served += @ids;
		$repeated += grep { $handed{$_} } @ids;
		$handed{$_} = 1 for @ids;
	}
	else
	{
		die $err if $err !~ /no node served the call/;
		usleep(200_000);
	}
}
is($repeated, 0, 'p2 handed out none of the IDs p1 had handed out')
  or diag("p2 served $served IDs, $repeated of them handed out before");
is($served, 0, '... and nothing at all: without p1 no majority it trusts is reachable');
ok($p2->log_contains(qr/node "p3" is fenced: its write count went back/),
	"p2's lease worker says p3 is fenced")
  or diag('p2 has p3 fenced in hilo.peer_watermarks (an agent pass): '
	  . $p2->safe_psql('postgres', "SELECT fenced FROM hilo.peer_watermarks WHERE node_id = $p3_id"));

# With p1 back, p2 and p1 are a majority: it serves above every ID handed out.
$p1->start;
my @after = take_ids($p2, 1000);
my ($lowest) = sort { $a <=> $b } @after;
cmp_ok($lowest, '>', $highest, "with p1 back, p2 serves above every ID handed out ($lowest > $highest)");

$_->stop for @nodes;
done_testing();
