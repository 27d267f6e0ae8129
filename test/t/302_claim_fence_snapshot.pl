# A claim that a caller's backend leads (an ordered 'quorum' sequence with
# no claim server: here no agent database) runs in the caller's
# transaction. It judges nodes by hilo.peer_watermarks, and read them as of
# that transaction's snapshot: in a REPEATABLE READ transaction begun
# before the agent recorded a node as fenced, the fenced node still counted
# in the claim's majority. Now the watermarks are read as of the claim.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloCluster;

my @nodes = cluster_nodes({ agent => 0 }, qw(f1 f2 f3));
my ($f1, $f2, $f3) = @nodes;
form_cluster(@nodes);
$f1->safe_psql('postgres', "SELECT hilo_create('q', ordering => 'quorum')");
cmp_ok($f1->safe_psql('postgres', "SELECT hilo_nextval('q')"), '>', 0, "f1 serves 'q'");
$f2->stop;

my $f3_id = $f3->safe_psql('postgres', 'SELECT hilo_node_id()');
my $f3_incarnation =
  $f1->safe_psql('postgres', "SELECT incarnation FROM hilo.nodes WHERE node_id = $f3_id");

# A REPEATABLE READ transaction takes its snapshot; then f3 is recorded as
# fenced (as an agent pass records a node whose write count went back).
my $session = $f1->background_psql('postgres');
$session->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
$session->query_safe("SELECT hilo_nextval('q')");
$f1->safe_psql('postgres',
	"SELECT hilo._save_watermarks(ARRAY[$f3_id], ARRAY[$f3_incarnation]::bigint[], '{0}', '{t}')");
is($f1->safe_psql('postgres', "SELECT fenced FROM hilo.peer_watermarks WHERE node_id = $f3_id"),
	't', 'f3 is recorded as fenced on f1');

# With f2 down only f1 and the fenced f3 answer: no majority it may count.
# (psql stops at the error: ON_ERROR_STOP.)
my $out;
my $refused = !eval { $out = $session->query_safe("SELECT hilo_nextval('q')"); 1 };
ok($refused, "the transaction's next call is refused: f3's answer does not count")
  or diag("it returned $out");
ok($f1->log_contains(
		qr/ERROR:  hilo sequence "q" is ordered across the hilo cluster, and no majority/),
	'... for want of a majority');
eval { $session->quit };

$_->stop for $f1, $f3;
done_testing();
