# A node whose hilo catalog is locked (ALTER EXTENSION hilo UPDATE, VACUUM
# FULL, LOCK TABLE) answers other nodes late. The statements they run there
# (hilo._bootstrap(), the register's hilo._register_handle(), the
# configuration's hilo._config_prepare/_accept) wait for the lock at most
# half hilo.claim_timeout, then fail with 55P03; the caller, which waits
# hilo.claim_timeout, reads why. Before, they waited until the lock was
# released, long after their caller had given up: one more waiting backend
# per attempt, and each went on afterwards, so that hilo_add_node() said
# "could not start a hilo cluster" and the node became one a moment later.
# (The lease acceptor's statements: 070.)
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use HiloTest;
use HiloCluster;

# Statements of $node waiting for a lock whose text matches $like.
sub waiting
{
	my ($node, $like) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
		  . " AND query LIKE '%$like%' AND pid <> pg_backend_pid()");
}

# --- The first hilo_add_node(): hilo._bootstrap() on the node itself.
my $b = cluster_node('b1', agent => 0);
my $locker = dbi_session($b, 'postgres');
$locker->begin_work;
$locker->do('LOCK TABLE hilo.sequences IN SHARE MODE');
my ($rc, $out, $err) = $b->psql('postgres',
	"SELECT hilo_add_node('b1', \$\$" . node_conninfo($b) . "\$\$)",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
isnt($rc, 0, 'hilo_add_node fails while hilo.sequences is locked');
like($err, qr/55000.*could not start a hilo cluster on this node/s,
	'bootstrap: "could not start a hilo cluster"');
like($err, qr/lock timeout/, 'bootstrap: the detail says it was a lock timeout');
is(waiting($b, 'hilo._bootstrap'), 0, 'no hilo._bootstrap() waits for the lock after the call failed');
$locker->commit;
sleep 2;
is($b->safe_psql('postgres', 'SELECT count(*) FROM hilo.cluster WHERE epoch > 0'), '0',
	'after the lock is released the node is still in no cluster, as hilo_add_node said');
is($b->safe_psql('postgres', "SELECT hilo_add_node('b1', \$\$" . node_conninfo($b) . "\$\$)"),
	'1', 'hilo_add_node then starts the cluster');
$locker->disconnect;
$b->stop;

# --- Three nodes; r2's catalog locked while r1 claims windows and changes
# the membership through a majority of r1 and r3.
my @nodes = map { cluster_node("r$_", agent => 0) } 1 .. 3;
my ($r1, $r2, $r3) = @nodes;
form_cluster(@nodes);
$r1->safe_psql('postgres', "SELECT hilo_create('s', window_size => 100, min_open_windows => 1)");

$locker = dbi_session($r2, 'postgres');
$locker->begin_work;
$locker->do('LOCK TABLE hilo.local_node, hilo.cluster IN EXCLUSIVE MODE');

# Claims: each take of 500 IDs needs windows above the high-water mark,
# claimed through the register on r1, r2 and r3, from a session of its own.
my $ids = 0;
my $start = time();
for my $i (1 .. 8)
{
	my ($trc, $tout, $terr) = $r1->psql('postgres',
		"SELECT sum(upper(r) - lower(r)) FROM unnest(hilo_take('s', 500)) AS r");
	is($trc, 0, "take $i with r2 locked: served by r1 and r3") or diag($terr);
	$ids += $tout if $trc == 0;
}
note(sprintf('8 takes in %.1f s', time() - $start));
is($ids, 4000, 'the takes returned every ID they asked for');
sleep 2;    # longer than any answer is read (half the claim timeout: 1 s)
is(waiting($r2, 'hilo._register_handle'), 0,
	'r2: no register statement waits for the lock once their callers gave up');

# A membership change: the configuration's acceptors on r2 are locked too.
($rc, $out, $err) = $r1->psql('postgres', "SELECT hilo_remove_node('r3')");
note("hilo_remove_node('r3') with r2 locked: rc $rc $err");
sleep 2;
is(waiting($r2, 'hilo._config'), 0,
	'r2: no configuration statement waits for the lock once its caller gave up');
$locker->commit;
$locker->disconnect;
done_testing();
