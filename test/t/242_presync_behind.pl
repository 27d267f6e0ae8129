# The pre-sync of a membership change counts, in the majority of the old
# configuration B whose register it reads, only nodes that have installed
# B (docs/multi-node.md, "Membership"). A node still at an older epoch can
# have a register request of that epoch in flight: it passed its epoch
# check (and holds the node's hilo.cluster row FOR SHARE, so the node cannot
# install B) and waits for its register row. The dump reads the row as it
# was; the request commits afterwards, and completes a claim the dump did
# not show. Here a real request of a claim that q1 accepted is held in
# flight on q3 while q4 joins (q3 stays behind), then q4's removal reads
# the dumps. q1 and q2 happen to hold the claim here, so the old code's
# result was not yet wrong, but it counted q3's answer (3000, with 6000000
# in flight there) to make its majority: on the code before, the removal
# succeeded; now it is refused, naming q3, until q3 has the configuration.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use HiloTest;
use HiloCluster;

my @nodes = cluster_nodes({ agent => 0 }, qw(q1 q2 q3 q4));
my ($q1, $q2, $q3, $q4) = @nodes;
form_cluster($q1, $q2);
membership_change($q1, "SELECT hilo_add_node('q3', \$\$" . node_conninfo($q3) . "\$\$)");
raise_register($_, 'k', 3000) for ($q1, $q2, $q3);

sub epoch_on
{
	my ($node) = @_;
	return $node->safe_psql('postgres', 'SELECT epoch FROM hilo.cluster');
}

# A claim's write (SET_IF_AT_MOST 3000 -> 6000000) under the current epoch,
# as a proposer sends it: q1 accepts it; on q3 it waits for the register
# row a session holds.
my $epoch = epoch_on($q1);
my $write = "SELECT status FROM hilo._register_handle($epoch, '{k}', '{1}', '{77}', '{1}', '{1}',"
  . " '{3000}', '{6000000}')";
is($q1->safe_psql('postgres', $write), '1', 'q1 accepts the claim (status 1)');
is(register_value($q1, 'k'), '6000000', '... and holds it');
my $row_holder = $q3->background_psql('postgres');
$row_holder->query_safe("BEGIN; SELECT value FROM hilo.register WHERE key = 'k' FOR UPDATE");
my $in_flight_out = '';
my $in_flight = IPC::Run::start([ 'psql', '-XAtq', '-d', node_conninfo($q3), '-c', $write ],
	'>', \$in_flight_out, '2>', \$in_flight_out);
ok( $q3->poll_query_until(
		'postgres', "SELECT count(*) = 1 FROM pg_stat_activity
		 WHERE query LIKE '%hilo._register_handle(%' AND wait_event_type = 'Lock'"),
	'on q3 the write passed its epoch check and waits for the register row');

# q4 joins; q3, whose configuration row the request holds, stays behind.
membership_change($q2, "SELECT hilo_add_node('q4', \$\$" . node_conninfo($q4) . "\$\$)");
is(epoch_on($q3), $epoch, 'q3 is still at the epoch before the addition');
is(epoch_on($q2), $epoch + 1, 'q2 is at the new one');

# q4's removal, while q4's register cannot be read: of q1, q2, q3 and q4
# only q1 and q2 hold every value they accepted.
my $lock_holder = $q4->background_psql('postgres');
$lock_holder->query_safe('BEGIN; LOCK TABLE hilo.register IN ACCESS EXCLUSIVE MODE');
my ($rc, $out, $err) = $q2->psql('postgres', "SELECT hilo_remove_node('q4')");
isnt($rc, 0, 'a removal whose pre-sync would count a node behind is refused');
like($err,
	qr/only 2 of 4 nodes gave their register values, 3 needed: node "q3" has installed configuration epoch $epoch, not yet @{[$epoch + 1]}/,
	'... naming the node behind');
is(register_value($q3, 'k'), '3000', 'q3 reads 3000 meanwhile');

# The request in flight commits: q3 held 6000000 all along, unseen.
$row_holder->query_safe('ROLLBACK');
$row_holder->quit;
$in_flight->finish;
chomp $in_flight_out;
is($in_flight_out, '1', 'the write in flight on q3 is accepted (status 1) once the row is free')
  or diag($in_flight_out);
is(register_value($q3, 'k'), '6000000', '... q3 holds the claim now');

# With q3's register and q4's free the removal is finished (q3 gets the
# configuration first; q1, q2 and q4 would be a majority without it).
$lock_holder->query_safe('ROLLBACK');
$lock_holder->quit;
finish_chosen_change($q2, "SELECT hilo_remove_node('q4')", 'q1,q2,q3');
is(register_value($q3, 'k'), '6000000', '... and q3 holds the highest value');

$_->stop for @nodes;
done_testing();
