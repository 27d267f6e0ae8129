# An error that crosses a process or a node reaches the caller by its
# SQLSTATE, with the message, detail and hint of the process that raised
# it: never as text that the caller matches.
#
# A 'cluster' sequence near max_value, on three nodes: the holder of its
# lease raises 2200H for a call that asks for more IDs than are left (its
# lease worker answers it through shared memory). A node that does not hold
# the lease forwards its callers' calls to the holder; the holder's answer
# comes back over libpq and the caller there gets the same 2200H, message
# and detail, at once: both through the lease worker's forwarding (a node
# that never called the sequence) and after a call of the node went to the
# holder directly. A call that fits is still served everywhere.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use HiloTest;
use HiloCluster;

my $conf = "hilo.claim_timeout = '5s'\nhilo.lease_time = '1s'\nhilo.clock_drift_bound = 10000\n";
my @nodes = cluster_nodes({ conf => $conf }, qw(n1 n2 n3));
my ($n1, $n2, $n3) = @nodes;
form_cluster(@nodes);
create_everywhere(\@nodes, c => "ordering => 'cluster', max_value => 1000, window_size => 10");

# The holder: n1, the first node that calls.
is($n1->safe_psql('postgres', "SELECT hilo_nextval('c')"), '1', 'n1 serves the first ID');
my $holder = wait_for_lease_holder(\@nodes, 'c');
is($holder ? $holder->name : 'none', 'n1', 'n1 holds the lease');
$n1->safe_psql('postgres', "SELECT hilo_take('c', 800)");

# A call's error as psql shows it in verbose mode: SQLSTATE, message,
# detail and hint lines; and how long the call took.
sub failed_call
{
	my ($node, $sql) = @_;
	my $start = time();
	my ($ret, $out, $err) =
	  $node->psql('postgres', "\\set VERBOSITY verbose\n$sql", on_error_stop => 1);
	my $took = time() - $start;
	$err =~ s/^LOCATION:.*\n?//mg;
	$err =~ s/^psql:[^\n]*?(ERROR)/$1/mg;
	return ($ret, $err, $took);
}

my $too_many = "SELECT hilo_take('c', 500)";
my ($ret, $on_holder) = failed_call($n1, $too_many);
like($on_holder, qr/^ERROR:\s+2200H: hilo sequence "c" has fewer than 500 IDs left/m,
	'on the holder: 2200H');
like($on_holder, qr/^DETAIL:\s+\S/m, 'on the holder: a detail says why');

# n2 never called 'c': its lease worker forwards the call to the holder.
my ($ret2, $on_n2, $took2) = failed_call($n2, $too_many);
isnt($ret2, 0, 'forwarded through the lease worker: the call fails');
is($on_n2, $on_holder, 'forwarded through the lease worker: the holder\'s SQLSTATE, message '
	  . 'and detail');
cmp_ok($took2, '<', 4, "forwarded through the lease worker: at once (${took2}s), not after "
	  . 'hilo.claim_timeout');

# n3 calls once (served by the holder, which n3's backends then call
# directly), then asks for too many.
is($n3->safe_psql('postgres', "SELECT hilo_nextval('c') > 801"), 't', 'n3 is served');
my ($ret3, $on_n3, $took3) = failed_call($n3,
	"SELECT hilo_nextval('c') > 0;\nSELECT hilo_nextval('c') > 0;\n$too_many");
isnt($ret3, 0, 'after direct calls: the call fails');
is($on_n3, $on_holder, 'after direct calls: the holder\'s SQLSTATE, message and detail');
cmp_ok($took3, '<', 4, "after direct calls: at once (${took3}s)");

# Calls that fit are still served, on every node.
for my $node (@nodes)
{
	like($node->safe_psql('postgres', "SELECT hilo_nextval('c')"), qr/^\d+$/,
		$node->name . ': a call that fits is served');
}

done_testing();
