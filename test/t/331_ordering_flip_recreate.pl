# A name dropped and made again with another ordering, on three nodes,
# while the drop has not reached every node yet (the agents pass only when
# the test runs one, an hour apart otherwise): for that while, nodes that
# still have the dropped sequence serve it through its own mechanism (the
# lease of 'cluster', forwarded to its holder; the quorum register's claims
# of 'quorum'; the windows of 'none'), and the node that made it again
# serves the new one through another. No ID may come from both. ('node'
# is refused on a cluster node: its pairs cannot arise here.)
#
# For each pair of orderings: made on a1 with the old ordering and carried;
# ten IDs taken on a1 (the lease holder, for 'cluster'), a2 and a3; on a3
# dropped and made again with the new ordering; then three rounds of a
# take of 1000 on a3 (the new sequence) and of 3000 on a2 (the old one:
# more than a2's open windows of a 'none' sequence hold, so that it claims
# through the register too).
#
# On the code before, each pair with 'cluster' on one side handed out IDs
# twice (990 in each round after the first): a lease renewal recorded its
# next block above the holder's own blocks only, whatever the quorum
# register's claims of the other sequence had reached meanwhile. Now a
# grant's reply reports the name's value in the other register, and the
# holder serves above it; the two registers' acceptors of a name take one
# lock on each node, so that of two writes one sees the other.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloCluster;
use HiloRanges;

my $conf = "hilo.lease_time = '1s'\n";
my @nodes = cluster_nodes({ conf => $conf, agent_interval => '1h' }, qw(a1 a2 a3));
my ($a1, $a2, $a3) = @nodes;
form_cluster(@nodes);

# Takes $n IDs of $seq on $node, retrying a call that no node served in
# time (a lease is being taken); returns them as [lo, hi, where] ranges.
sub take
{
	my ($node, $seq, $n, $what) = @_;
	for my $try (1 .. 30)
	{
		my ($ret, $out, $err) = $node->psql('postgres', "SELECT hilo_take('$seq', $n)");
		return map { [ @$_, $what . ' on ' . $node->name ] } parse_multirange($out)
		  if $ret == 0;
		die "$seq on " . $node->name . ": $err" if $err !~ /no node served the call/;
		sleep 1;
	}
	die "$seq was never served on " . $node->name;
}

sub ordering_on
{
	my ($node, $seq) = @_;
	return $node->safe_psql('postgres', "SELECT ordering FROM hilo.sequences WHERE name = '$seq'");
}

my @orderings = qw(none quorum cluster);
for my $old (@orderings)
{
	for my $new (@orderings)
	{
		next if $old eq $new;
		my $seq = "${old}_to_$new";
		$a1->safe_psql('postgres',
			"SELECT hilo_create('$seq', ordering => '$old', window_size => 1000);"
			  . ' SELECT hilo_agent_run()');
		$_->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM hilo.sequences WHERE name = '$seq'")
		  or die "$seq never reached " . $_->name
		  for $a2, $a3;
		my @got = map { take($_, $seq, 10, "old $old") } @nodes;
		$a3->safe_psql('postgres',
			"SELECT hilo_drop('$seq');"
			  . " SELECT hilo_create('$seq', ordering => '$new', window_size => 1000)");
		for my $round (1 .. 3)
		{
			push @got, take($a3, $seq, 1000, "new $new, round $round");
			push @got, take($a2, $seq, 3000, "old $old, round $round");
		}
		is(ordering_on($a2, $seq) . ' ' . ordering_on($a3, $seq),
			"$old $new", "$old -> $new: a2 still served the dropped sequence, a3 the new one");
		my @twice = overlaps(@got);
		is(scalar(@twice), 0, "$old -> $new: no ID handed out twice")
		  or diag(join("\n", @twice));
	}
}

# The two registers' acceptors of one node, on one name at once: each
# takes the name's lock before its cell, and the node's stamp row (its
# write count) too. Both now take their names first, the register's
# acceptor then the stamp row, the lease acceptor its cell then the stamp
# row, so neither waits for the other in a cycle. On the code before, the
# register's acceptor took the stamp row first and the name then: with the
# stamp row held elsewhere (here by a third session), a register call
# waited for it, a lease grant on the same name took the name and waited
# for it too, and when it came free the two deadlocked (40P01, one failed).
# The lease acceptor waits for a lock half hilo.lease_time at most:
# a longer one here, so that only a deadlock can end a wait.
$a2->safe_psql('postgres',
	"ALTER SYSTEM SET hilo.lease_time = '60s'; SELECT pg_reload_conf()");
$a2->poll_query_until('postgres', "SELECT current_setting('hilo.lease_time') = '1min'")
  or die 'hilo.lease_time never reloaded';
my ($epoch, $cluster_id) = split /\|/,
  $a2->safe_psql('postgres', "SELECT epoch, config->>'cluster_id' FROM hilo.cluster");
my $stamp = $a2->background_psql('postgres');
$stamp->query_safe('BEGIN');
$stamp->query_safe('SELECT count(*) FROM (SELECT 1 FROM hilo.local_node FOR UPDATE) s');

sub wait_until_waiting
{
	my ($function) = @_;
	$a2->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
		  . " AND query LIKE '%hilo.$function(%lock_probe%'")
	  or die "hilo.$function never waited";
}
my $register = start_psql($a2, 'postgres',
	"SELECT status FROM hilo._register_handle($epoch, '{lock_probe}', '{0}', '{7}', '{1}',"
	  . " '{1}', '{0}', '{0}')");
wait_until_waiting('_register_handle');
my $lease = start_psql($a2, 'postgres',
	"SELECT ok FROM hilo._lease_handle($epoch, $cluster_id, 7, '{lock_probe}', '{2}', '{1}',"
	  . " '{0}', '{65543}', '{7}', '{100}', '{5000000}', '{10000}', '{f}')");
wait_until_waiting('_lease_handle');
$stamp->query_safe('COMMIT');
$stamp->quit;
$_->{harness}->finish for $register, $lease;
is($register->{err} . $lease->{err}, '',
	'a register call and a lease grant of one name on one node: no deadlock');
is($lease->{out}, "t\n", 'the lease grant was accepted');
$a2->safe_psql('postgres',
	"DELETE FROM hilo.lease_cells WHERE seq = 'lock_probe'; ALTER SYSTEM RESET hilo.lease_time;"
	  . ' SELECT pg_reload_conf()');

done_testing();
