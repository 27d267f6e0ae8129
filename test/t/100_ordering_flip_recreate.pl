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
my @nodes = map { cluster_node($_, conf => $conf, agent_interval => '1h') } qw(a1 a2 a3);
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

done_testing();
