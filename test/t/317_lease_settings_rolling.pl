# Ordering 'cluster' while the nodes' hilo.lease_time differ, as in the
# middle of a rolling change of the setting (one server reloaded after the
# other). n1 and n2 have a lease time of 5 s, n3 of 1 s. A holder with 5 s
# renews every 2.5 s; n3, cut off from it (the TCP proxy), used to judge it
# dead after its own 1 s, take the lease over and serve after waiting its
# own 1 s plus margin, while the holder still served for up to 5 s: IDs out
# of order across nodes. Grants now carry their proposer's lease time and
# drift bound; a node waits out and suspects by the largest it reads.
#
# Clients on every node, the linearizability check of every pair of calls
# (test/perl/HiloLinear.pm): while n3 is cut off from the holder three
# times, then while the setting is changed to 1 s node by node (a rolling
# reload), with the holder cut off from n3 again in between.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use HiloTest;
use HiloCluster;
use HiloProxy;
use HiloLinear;

# Calls go through each node's lease worker (hilo.forward_connections = 0),
# whose lease node judges the holder: a backend's own connection to the
# holder only fails its calls while it is cut off.
my $base = "hilo.claim_timeout = '5s'\nhilo.clock_drift_bound = 10000\n"
  . "hilo.forward_connections = 0\n";
my @nodes = cluster_nodes({},
	[ n1 => conf => $base . "hilo.lease_time = '5s'\n" ],
	[ n2 => conf => $base . "hilo.lease_time = '5s'\n" ],
	[ n3 => conf => $base . "hilo.lease_time = '1s'\n" ]);
my ($n1, $n2, $n3) = @nodes;
my $proxy = proxied_cluster(@nodes);
# A large block (window_size): the holder renews for time, every 2.5 s,
# not for IDs every few calls (each renewal is a new ballot, which a node
# that watches for a dead holder sees as a sign of life).
create_everywhere(\@nodes, c => "ordering => 'cluster', window_size => 10000000");

# n1 takes the lease first (its callers come first).
$n1->poll_query_until('postgres', "SELECT hilo_nextval('c') > 0") or die 'n1 never served c';
wait_until_served(\@nodes, 'c');
my $holder = wait_for_lease_holder(\@nodes, 'c');
is($holder ? $holder->name : 'none', 'n1', 'n1, with a lease time of 5 s, holds the lease');

my $dir = PostgreSQL::Test::Utils::tempdir;
my @targets = linear_pairs(@nodes);

# Cuts the links between n3 and the holder both ways for $seconds.
sub cut_n3_from_holder
{
	my ($seconds) = @_;
	my $h = lease_holder(\@nodes, 'c') // $n1;
	return if $h->name eq 'n3';
	my @links = ('n3>' . $h->name, $h->name . '>n3');
	proxy_cut($proxy, @links);
	sleep $seconds;
	proxy_heal($proxy, @links);
}

# --- n3 (1 s) cut off from the holder (5 s), three times 6 s.
my ($ok, $failed) = linear_run(\@targets, 'c', 90, dir => $dir, faults => sub {
	sleep 2;
	for (1 .. 3)
	{
		cut_n3_from_holder(6);
		sleep 2;
	}
}, then => 3);
my @violations = linear_check($ok);
is(join("\n", @violations), '', 'lease times 5 s, 5 s, 1 s, n3 cut off from the holder: '
	  . 'linearizable, no ID twice over ' . scalar(@$ok) . ' calls (' . scalar(@$failed)
	  . ' failed)');
cmp_ok(scalar(grep { $_->{label} =~ /^n3/ } @$ok), '>', 10, 'n3 was served between the cuts');
is(lease_holder(\@nodes, 'c') ? lease_holder(\@nodes, 'c')->name : 'none', 'n1',
	'n3 did not take the lease of a holder that renews');

# --- A rolling reload to 1 s: n1 (the holder) first, then n2; n3 is cut
# off from the holder between the two.
sub reload_lease_time
{
	my ($node, $value) = @_;
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET hilo.lease_time = '$value'; SELECT pg_reload_conf()");
}
($ok, $failed) = linear_run(\@targets, 'c', 90, dir => $dir, faults => sub {
	sleep 2;
	reload_lease_time($n3, '5s');
	sleep 3;
	reload_lease_time($n1, '1s');
	sleep 3;
	cut_n3_from_holder(6);
	reload_lease_time($n2, '1s');
	sleep 3;
	reload_lease_time($n3, '1s');
	sleep 2;
	cut_n3_from_holder(4);
}, then => 3);
@violations = linear_check($ok);
is(join("\n", @violations), '', 'a rolling reload of the lease time under load: '
	  . 'linearizable, no ID twice over ' . scalar(@$ok) . ' calls (' . scalar(@$failed)
	  . ' failed)');
cmp_ok(scalar(grep { $_->{label} =~ /^n3/ } @$ok), '>', 10, 'n3 was served');

note("the cells on n2:\n" . $n2->safe_psql('postgres',
	'SELECT * FROM hilo.lease_cells',
	extra_params => [ '-P', 'footer=off', '-A', '-F', ' | ' ]));

proxy_stop($proxy);
done_testing();
