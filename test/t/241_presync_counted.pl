# The pre-sync of a membership change reads the register of a majority of
# the old configuration and raises the new one to the highest values
# (docs/multi-node.md, "Membership"). Only a node whose dump holds every
# value it ever accepted may count in that majority. The Paxos majority that
# chose the change was at the configuration's epoch and listed as itself,
# but the nodes that answer the dumps need not be the same ones, and the
# dump counted any answer:
#  - a member whose extension was created again (no cluster row, a new
#    nonce: it lost every value it accepted) answered with nothing;
#  - a member restored from a cold copy (the same incarnation, its write
#    count gone back: fenced) answered with its old values.
# Either one, beside a node that missed a claim, made a majority that did
# not hold the claim, and the new configuration was raised below IDs a
# node had handed out. The fenced copy's Paxos votes counted too. Each case fails on the code before: the change
# succeeded, and a majority of the new configuration held 3000 (the first
# case) or 6000000 (the second), below the claim's 6000000 or 9000000.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::RecursiveCopy;
use PostgreSQL::Test::Utils;
use File::Path qw(rmtree);
use Test::More;
use HiloTest;
use HiloCluster;

my @nodes = cluster_nodes({ agent => 0 }, qw(p1 p2 p3 p4));
my ($p1, $p2, $p3, $p4) = @nodes;
form_cluster($p1, $p2);
membership_change($p1, "SELECT hilo_add_node('p3', \$\$" . node_conninfo($p3) . "\$\$)");

# A claim accepted by p1 and p3, missed by p2.
raise_register($p2, 'k', 3000);
raise_register($_, 'k', 6000000) for ($p1, $p3);

# --- A member whose extension was created again.
$p3->safe_psql('postgres', 'DROP EXTENSION hilo; CREATE EXTENSION hilo');
# p1 votes, but cannot give its register: a session holds hilo.register.
my $holder = $p1->background_psql('postgres');
$holder->query_safe('BEGIN; LOCK TABLE hilo.register IN ACCESS EXCLUSIVE MODE');
my ($rc, $out, $err) =
  $p2->psql('postgres', "SELECT hilo_add_node('p4', \$\$" . node_conninfo($p4) . "\$\$)");
isnt($rc, 0, 'an addition whose pre-sync would count a re-created member is refused')
  or diag('values: ' . join(', ', map { $_->name . ' ' . register_value($_, 'k') } $p2, $p3, $p4));
like($err, qr/only 1 of 3 nodes gave their register values, 2 needed: node "p3" answers as incarnation/,
	'... and the error names the re-created member');
$holder->query_safe('ROLLBACK');
$holder->quit;
is(register_value($p4, 'k'), '', '... the joining node was not raised to what p2 alone holds');

# With p1's register readable, the change goes on (Paxos chose it): the
# re-created p3 is left out, p1 and p2 are a majority.
membership_change($p2, "SELECT hilo_add_node('p4', \$\$" . node_conninfo($p4) . "\$\$)");
is(register_value($p4, 'k'), '6000000', 'the addition raises p4 to the highest value a counted majority holds');
membership_change($p2, "SELECT hilo_remove_node('p3')");
is(cluster_members($p2), 'p1,p2,p4', 'the re-created member is removed');

# --- A member restored from a cold copy: same incarnation, write count back.
$p4->stop;
my $copy = PostgreSQL::Test::Utils::tempdir . '/p4_copy';
PostgreSQL::Test::RecursiveCopy::copypath($p4->data_dir, $copy);
$p4->start;
# A claim accepted by p1 and p4, missed by p2 (at 6000000 since the addition).
raise_register($_, 'k', 9000000) for ($p1, $p4);
# The agent learns p4's write count (every node keeps what it saw).
$p1->safe_psql('postgres', 'SELECT hilo_agent_run()');
$p4->stop;
rmtree($p4->data_dir);
PostgreSQL::Test::RecursiveCopy::copypath($copy, $p4->data_dir);
chmod 0700, $p4->data_dir;
$p4->start;
is(register_value($p4, 'k'), '6000000', 'p4 runs from its cold copy');

# Its votes do not count either: with p1 down, p2 alone cannot choose p1's
# removal (before, p2 and the copy chose it; a copy may have lost promises
# and accepts too, and two changes could be chosen for one epoch).
$p1->stop;
($rc, $out, $err) = $p2->psql('postgres', "SELECT hilo_remove_node('p1')");
isnt($rc, 0, 'a removal that needs a fenced member\'s votes is refused')
  or diag('values: ' . join(', ', map { $_->name . ' ' . register_value($_, 'k') } $p2, $p4));
like($err, qr/only 1 of 3 nodes promised, 2 needed: node "p4" fenced: its register went backwards/,
	'... and the error names the fenced member');
$p1->start;

# p1 votes but cannot give its register: the pre-sync would count the copy.
my $p1_holder = $p1->background_psql('postgres');
$p1_holder->query_safe('BEGIN; LOCK TABLE hilo.register IN ACCESS EXCLUSIVE MODE');
($rc, $out, $err) = $p2->psql('postgres', "SELECT hilo_remove_node('p1')");
isnt($rc, 0, 'a removal whose pre-sync would count a fenced member is refused');
like($err, qr/only 1 of 3 nodes gave their register values, 2 needed: node "p4" fenced: its register went backwards/,
	'... and the error names the fenced member');
is(register_value($p2, 'k'), '6000000', '... p2 was not raised to the fenced copy\'s values');
$p1_holder->query_safe('ROLLBACK');
$p1_holder->quit;

# With p1's register readable, the chosen removal is finished from p1's and
# p2's values.
finish_chosen_change($p2, "SELECT hilo_remove_node('p1')", 'p2,p4');
is(register_value($p2, 'k'), '9000000', '... and p2 holds the highest value p1 and p2 held');

$_->stop for @nodes;
done_testing();
