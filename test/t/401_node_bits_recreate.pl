# A node_bits sequence dropped and made again under its name, without
# start_value, on two nodes (found by review). Each node claims its windows
# in its own slice, with no register that outlives the drop: the only
# record of what a node handed out is its own hilo.dropped_names row. The
# creator lifted the shared start_value above its own mark, in its slice,
# and the agent carried that start_value to the other node, which never
# read its own mark:
#   - a node whose slice lies above the creator's handed its old IDs out
#     again;
#   - a node whose slice lies below it had its floor above its whole slice,
#     and was exhausted for good.
# Now the start_value stays 1 and each node lifts its own high-water mark
# above its own mark, the creator at hilo_create and the others when the
# agent carries the sequence.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloCluster;

my @nodes = cluster_nodes({}, qw(k1 k2));
form_cluster(@nodes);
my ($k1, $k2) = @nodes;

sub on_both
{
	my ($sql) = @_;
	for my $node (@nodes)
	{
		$node->poll_query_until('postgres', $sql)
		  or die "never on " . $node->name . ": $sql";
	}
}

sub take5
{
	my ($node) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "SELECT hilo_take('s', 5)");
	return $ret == 0 ? $out : "error: $err";
}

my $create = "SELECT hilo_create('s', node_bits => 2, window_size => 100, block_size => 10)";
$k1->safe_psql('postgres', $create);
on_both("SELECT count(*) = 1 FROM hilo.sequences WHERE name = 's'");
my %before = map { $_->name => take5($_) } @nodes;
for my $by (@nodes)
{
	$by->safe_psql('postgres', "SELECT hilo_drop('s')");
	on_both("SELECT count(*) = 0 FROM hilo.sequences WHERE name = 's'");
	$by->safe_psql('postgres', $create);
	on_both("SELECT count(*) = 1 FROM hilo.sequences WHERE name = 's'");
	for my $node (@nodes)
	{
		my $name = $node->name;
		my ($old) = $before{$name} =~ /\[(\d+),(\d+)\)/ ? ($2) : (0);
		my $now = take5($node);
		my ($first) = $now =~ /^\{\[(\d+),/;
		ok(defined $first && $first >= $old,
			"made again on " . $by->name . ": $name hands out $now, above its IDs before ($before{$name})");
		$before{$name} = $now;
	}
}

$_->stop for @nodes;
done_testing();
