# A membership change whose configuration Paxos chose, but which a member of
# it could not install then (down, or busy: here a session holds its
# hilo.cluster row), succeeds: the change is decided, and the agent installs
# it on that member once it answers. It used to say nothing of that member;
# now a WARNING names it and says why, and hilo.nodes shows its epoch.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloCluster;

my @nodes = cluster_nodes({}, qw(r1 r2 r3 r4));
my ($r1, $r2, $r3, $r4) = @nodes;
form_cluster($r1, $r2, $r3);
my $epoch = $r1->safe_psql('postgres', 'SELECT epoch FROM hilo.cluster');

my $holder = $r3->background_psql('postgres');
$holder->query_safe('BEGIN; SELECT epoch FROM hilo.cluster FOR UPDATE');
my ($rc, $out, $err) =
  $r1->psql('postgres', "SELECT hilo_add_node('r4', \$\$" . node_conninfo($r4) . "\$\$)");
is($rc, 0, 'r4 is added while r3 cannot install the configuration')
  or diag($err);
like($err, qr/WARNING:  the new hilo configuration \(epoch @{[$epoch + 1]}\) is installed on 3 of its 4 nodes/,
	'... with a WARNING that says on how many nodes it is installed');
like($err, qr/DETAIL:  Not installed on node "r3": \S/,
	'... and names r3 and why');
is($r3->safe_psql('postgres', 'SELECT epoch FROM hilo.cluster'), $epoch,
	'r3 is still at the configuration before');

$holder->query_safe('ROLLBACK');
$holder->quit;
$r3->poll_query_until('postgres', 'SELECT epoch = ' . ($epoch + 1) . ' FROM hilo.cluster')
  or die 'the agent never installed the configuration on r3';
pass('the agent installs it on r3 once r3 answers');

$_->stop for @nodes;
done_testing();
