# Ordered sequences ('quorum', 'cluster') on the paths of one session that
# lives on, or that ends while it waits (found by review):
#
#  - a session's hilo_nextval cache of an ordered sequence: it has no pool
#    whose generation would tell of a drop, and the cache was never checked
#    against the catalog epoch. A session that had called a sequence went
#    on serving it under the old settings after another session dropped it
#    and made it again under the name: IDs below the new start_value, and
#    IDs of a sequence that no longer exists.
#  - a sequence made again under a dropped one's name with another
#    ordering started from its own register, and handed the dropped one's
#    IDs out again;
#  - near max_value, a batch of one node's calls that asked for more IDs
#    than were left failed every call of it, also those that fit;
#  - a caller waiting at its sequence's gate for a quorum claim that is
#    ended by pg_terminate_backend (FATAL, which unwinds no PG_TRY) left its
#    ticket answered but never collected: the gate was never idle again, and
#    once the ring of 256 tickets came round to that slot, every call of the
#    sequence on that server waited forever. Both the caller that waits for
#    the claim server (the cluster's database) and one that leads the claim
#    itself (a node with no claim server), and that leader's waiter.
#
# A session holding hilo.register in ACCESS EXCLUSIVE mode keeps the
# claims waiting (the claim timeout is 20 s) while the callers are ended.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use HiloTest;
use HiloCluster;

my $node = cluster_node('served', conf => "hilo.claim_timeout = '20s'\n");
form_cluster($node);

# --- A session's cached ordered sequence, dropped and made again.
for my $ordering ('quorum', 'cluster')
{
	$node->safe_psql('postgres', "SELECT hilo_create('o', ordering => '$ordering')");
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	my $first = $s->query_safe("SELECT hilo_nextval('o')");
	like($first, qr/^\d+$/, "$ordering: a session's first ID of 'o': $first");
	$s->query_safe("SELECT hilo_nextval('o')");
	my $start = $first + 1000000;
	$node->safe_psql('postgres', "SELECT hilo_drop('o')");
	$node->safe_psql('postgres',
		"SELECT hilo_create('o', ordering => '$ordering', start_value => $start)");
	my $next = $s->query_safe("SELECT hilo_nextval('o')");
	cmp_ok($next, '>=', $start,
		"$ordering: 'o' made again with start_value $start by another session: the session's next ID ($next) is not below it");
	$node->safe_psql('postgres', "SELECT hilo_drop('o')");
	my ($gone) = $s->query("SELECT hilo_nextval('o')");
	like($s->{stderr}, qr/hilo sequence "o" does not exist/,
		"$ordering: 'o' dropped by another session: the session gets no ID (got '$gone')");
	$s->quit;
}

# --- A name made again with another ordering, without start_value: the
# new sequence claims through the other register ('quorum' and 'none'
# through hilo.register, 'cluster' through hilo.lease_cells), which knew
# nothing of the dropped one's IDs: it handed them out again.
for my $case ([ 'quorum', 'cluster' ], [ 'cluster', 'quorum' ], [ 'cluster', 'none' ])
{
	my ($before, $after) = @$case;
	my $name = "again_${before}_$after";
	$node->safe_psql('postgres', "SELECT hilo_create('$name', ordering => '$before')");
	my $last = $node->safe_psql('postgres',
		"SELECT max(hilo_nextval('$name')) FROM generate_series(1, 3)");
	$node->safe_psql('postgres', "SELECT hilo_drop('$name')");
	$node->safe_psql('postgres', "SELECT hilo_create('$name', ordering => '$after')");
	my $next = $node->safe_psql('postgres', "SELECT hilo_nextval('$name')");
	cmp_ok($next, '>', $last,
		"'$before' made again as '$after' under its name: the new one's first ID ($next) is above the dropped one's last ($last)");
}

# --- Callers of a quorum sequence ended while they wait.
# The pid of the one backend whose query is $sql and that waits, once it
# does.
sub waiting_pid
{
	my ($on, $db, $sql) = @_;
	my $pid;
	$on->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE datname = '$db' AND query = \$\$$sql\$\$"
		  . " AND wait_event IS NOT NULL AND state = 'active'")
	  or die "no waiting backend for $sql";
	return $on->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE datname = '$db' AND query = \$\$$sql\$\$");
}

# Ends the callers made by @starts (each: a label, a psql started with
# start_psql, its SQL) while the register of $on is locked; then 300 calls
# must all be served (one slot of the ring of 256 tickets leaked would make
# one of them wait for good).
sub end_waiting_callers
{
	my ($on, $what, @starts) = @_;
	my $locker = $on->background_psql('postgres');
	$locker->query_safe('BEGIN; LOCK TABLE hilo.register IN ACCESS EXCLUSIVE MODE');
	for my $start (@starts)
	{
		my ($label, $sql) = @$start;
		my $run = start_psql($on, 'postgres', $sql);
		my $pid = waiting_pid($on, 'postgres', $sql);
		push @$start, $run, $pid;
	}
	for my $start (@starts)
	{
		my ($label, $sql, $run, $pid) = @$start;
		is($on->safe_psql('postgres', "SELECT pg_terminate_backend($pid, 10000)"),
			't', "$what: the $label is ended while it waits");
		$run->{harness}->finish;
	}
	$locker->query_safe('ROLLBACK');
	$locker->quit;
	my ($ret, $out, $err) = $on->psql('postgres',
		"SET statement_timeout = '20s'; SELECT count(hilo_nextval('w')) FROM generate_series(1, 300)");
	is($out, '300', "$what: then 300 calls are served") or diag($err);
}

# --- Near max_value, one call too large for the IDs left fails alone. The
# callers of one node are claimed for in batches; a batch asked for the sum
# of its calls, and when fewer were left every call of it failed (2200H),
# also the small ones that would have fit.
{
	$node->safe_psql('postgres', "SELECT hilo_create('e', ordering => 'quorum', max_value => 1000)");
	is($node->safe_psql('postgres', "SELECT hilo_take('e', 990)"), '{[1,991)}', 'e: 990 of its 1000 IDs taken');
	my $locker = $node->background_psql('postgres');
	$locker->query_safe('BEGIN; LOCK TABLE hilo.register IN ACCESS EXCLUSIVE MODE');
	my %run;
	for my $call ([ first => "SELECT hilo_nextval('e') /* first */" ],
		[ big => "SELECT hilo_take('e', 50) /* big */" ],
		[ small => "SELECT hilo_nextval('e') /* small */" ])
	{
		my ($label, $sql) = @$call;
		$run{$label} = start_psql($node, 'postgres', $sql);
		waiting_pid($node, 'postgres', $sql);
	}
	$locker->query_safe('ROLLBACK');
	$locker->quit;
	$_->{harness}->finish for values %run;
	is($run{first}{out}, "991\n", 'e: the first call, claimed alone while the register was locked, gets 991');
	like($run{big}{err}, qr/fewer than 50 IDs are left/, 'e: the take of 50, claimed with a nextval, fails: 9 are left');
	is($run{small}{out}, "992\n", 'e: the nextval claimed with it gets 992')
	  or diag($run{small}{err});
}

$node->safe_psql('postgres', "SELECT hilo_create('w', ordering => 'quorum')");
$node->safe_psql('postgres', "SELECT hilo_nextval('w')");
end_waiting_callers($node, 'with the claim server',
	[ 'caller waiting for the claim server', "SELECT hilo_nextval('w') /* a */" ]);

# A node whose callers lead their claims: no claim server (no agent).
my $lone = cluster_node('leads', agent => 0, conf => "hilo.claim_timeout = '20s'\n");
form_cluster($lone);
$lone->safe_psql('postgres', "SELECT hilo_create('w', ordering => 'quorum')");
$lone->safe_psql('postgres', "SELECT hilo_nextval('w')");
end_waiting_callers($lone, 'callers that lead',
	[ 'leader of the claim', "SELECT hilo_nextval('w') /* leader */" ],
	[ 'caller waiting for the leader', "SELECT hilo_nextval('w') /* waiter */" ]);

$_->stop for ($node, $lone);
done_testing();
