# The lease cells of ordering 'cluster' across two membership changes with
# the sequence idle between them. Grants under two consecutive
# configurations meet at an acceptor; but a sequence nobody calls while a
# configuration is installed has no grant under it, and before 0.5.0's fix
# a membership change carried only the quorum register to the new
# configuration, not the lease cells. A node that missed the grants (down
# while the sequence was used) could then, two changes later, form a
# majority with a new node that has no cell at all: a new holder read no
# bound and served the sequence from its start again, IDs already handed
# out. Now each change raises a majority of the new configuration to the
# cells of a majority of the old one (the pre-sync, as for the register).
#
#   e   = {n1, n2, n3}, n3 down: takes on n1; the bound is on n1 and n2
#   e+1 = {n1, n3}      n2 removed, nobody calls the sequence
#   e+2 = {n1, n3, n4}  n4 added; n1 stopped; a call on n4 reads n3 and n4
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloCluster;

my $conf = "hilo.lease_time = '1s'\n";    # 2 s from before the changes on
my @nodes = cluster_nodes({ conf => $conf }, qw(n1 n2 n3 n4));
my ($n1, $n2, $n3, $n4) = @nodes;
form_cluster($n1, $n2, $n3);

# n3 misses everything the sequence does under e.
$n3->stop;
$n1->safe_psql('postgres', "SELECT hilo_create('c', ordering => 'cluster')");
# The first take waits for a lease (after hilo.lease_time), which with n3
# down may take longer than hilo.claim_timeout: a call that no node served
# in time hands out nothing, and is tried again.
my @handed;
for my $try (1 .. 30)
{
	my ($ret, $out, $err) = $n1->psql('postgres', "SELECT hilo_take('c', 1000)");
	die $err if $ret != 0 && $err !~ /no node served the call/;
	push @handed, map { $_->[0] .. $_->[1] - 1 } parse_multirange($out) if $ret == 0;
	last if @handed == 5000;
	sleep 1 if $ret != 0;
}
my ($highest) = sort { $b <=> $a } @handed;
cmp_ok(scalar @handed, '==', 5000, "n1 took 5,000 IDs of c, up to $highest, with n3 down");

# The holder renews its lease while c is called and for a lease time
# after, and a renewal would bring n3 the bound once it is back. A new
# hilo.lease_time starts every lease over at once: nothing renews c after
# that, nobody calls it.
sub set_lease_time
{
	for my $node (@_)
	{
		$node->safe_psql('postgres',
			"ALTER SYSTEM SET hilo.lease_time = '2s'; SELECT pg_reload_conf()");
		$node->poll_query_until('postgres', "SELECT current_setting('hilo.lease_time') = '2s'")
		  or die 'hilo.lease_time never changed on ' . $node->name;
	}
}
set_lease_time($n1, $n2, $n4);
sleep 3;
$n3->start;
set_lease_time($n3);
is($n3->safe_psql('postgres', "SELECT coalesce(max(bound), 0) FROM hilo.lease_cells WHERE seq = 'c'"),
	'0', 'n3 has no lease cell of c: it missed the grants');

# Two changes, the sequence idle in between (no call, so no grant under
# e+1). A change waits twice hilo.claim_timeout (2 s) after the one before.
membership_change($n1, "SELECT hilo_remove_node('n2')");
$n3->poll_query_until('postgres', 'SELECT count(*) = 2 FROM hilo.nodes')
  or die 'n3 never installed the configuration without n2';
sleep 5;
membership_change($n1,
	"SELECT hilo_add_node('n4', \$\$" . node_conninfo($n4) . "\$\$)");
$_->poll_query_until('postgres', 'SELECT count(*) = 3 FROM hilo.nodes')
  or die $_->name . ' never installed the configuration with n4'
  for $n3, $n4;
$n4->poll_query_until('postgres', "SELECT count(*) = 1 FROM hilo.sequences WHERE name = 'c'")
  or die 'c never reached n4';

# n1, the one member that knows the bound first hand, stops: a call on n4
# takes the lease with n3 and n4, which must start above every ID handed out.
$n1->stop;
my $id;
$n4->poll_query_until('postgres', "SELECT hilo_nextval('c') > 0")
  or die 'c was never served on n4 after n1 stopped';
$id = $n4->safe_psql('postgres', "SELECT hilo_nextval('c')");
cmp_ok($id, '>', $highest,
	"after the two changes, n4 serves above every ID n1 handed out ($id > $highest)");
my %handed = map { $_ => 1 } @handed;
is(scalar(grep { $handed{$_} } map { $_->[0] .. $_->[1] - 1 }
	  parse_multirange($n4->safe_psql('postgres', "SELECT hilo_take('c', 1000)"))),
	0, 'and a take of 1,000 on n4 repeats none of them');

$_->stop for $n2, $n3, $n4;
done_testing();
